"""The Algorithm interface: makes policies for one population and improves them.

An algorithm is either an exact oracle (``answers``: it overrides
:meth:`Algorithm.best_response`) or a learner (``learns``: it overrides
:meth:`Algorithm.make_trainer`; the rollout engine trains the policy against opponents
drawn from the meta-strategy). One that does neither, like ``random``, adds its fresh
policy unchanged. What an algorithm can do is read from its capability flags only
(:class:`Algorithm`'s class attributes); ``popmarl plugins --check`` reports an
algorithm whose flags contradict what it implements (:func:`flag_problems`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import attrs
import numpy as np

from popmarl.interfaces.component import Component
from popmarl.interfaces.env import CorrelatedProfile, Env, MixedProfile
from popmarl.interfaces.env_traits import EnvTraits, traits_of
from popmarl.errors import ConfigError
from popmarl.interfaces.policy import Policy
from popmarl.interfaces.spaces import Space
from popmarl.interfaces.trainer import Trainer


@attrs.frozen(kw_only=True)
class PolicySpace:
    """What a population's policies see and do: its agents share these spaces."""

    population: str
    agents: tuple[str, ...]
    observation_space: Space
    action_space: Space


@attrs.frozen(kw_only=True)
class BestResponseProblem:
    """Best-respond, in the seats ``space.agents``, to ``opponents``: per agent (seat), the
    mixture of frozen policies of the population mapped to it; or, when ``correlated`` is
    set (JPSRO's CE and CCE meta-solvers), to the other seats' policies drawn together
    from that distribution over profiles (``opponents`` is then empty)."""

    env: Env
    space: PolicySpace
    opponents: MixedProfile
    seed: int
    correlated: CorrelatedProfile | None = None


@attrs.frozen(kw_only=True)
class TrainerContext:
    """What a trainer learns from beyond its own population's spaces: the spaces of
    every seat whose rows it may read (``seats``: seat -> (observation, action) space;
    with the joint view, every seat of the env), the seats its learner plays
    (``own_seats``), the env's global state space (None: the env has none), and the
    policies it improves with their spaces, by population (``policies``, ``spaces``: the
    learner's own; a team's every member, its lead first)."""

    seats: Mapping[str, tuple[Space, Space]]
    own_seats: tuple[str, ...]
    state_space: Space | None = None
    policies: Mapping[str, Policy] = attrs.field(factory=dict)
    spaces: Mapping[str, PolicySpace] = attrs.field(factory=dict)

    @classmethod
    def alone(cls, *, policy: Policy, space: PolicySpace, state_space: Space | None = None) -> TrainerContext:
        """The context of a learner of ``policy`` alone in its population's own seats,
        each with the population's spaces: what a trainer is given outside a run (a test,
        a benchmark) when it reads nothing of other seats."""
        seat_spaces = (space.observation_space, space.action_space)
        return cls(seats=dict.fromkeys(space.agents, seat_spaces), own_seats=space.agents, state_space=state_space,
                   policies={space.population: policy}, spaces={space.population: space})


class Algorithm(Component):
    """Policies and their improvement for one population.

    What it can do is declared by its capability flags, class attributes that the engine,
    the scenarios and the tools read (never its methods' overrides or signatures):

    ``learns``: whether it trains policies: it overrides :meth:`make_trainer`, which the
    engine calls only for an algorithm that sets it. False unless an algorithm says so.

    ``answers``: whether it may answer a best-response problem exactly: it overrides
    :meth:`best_response` (which may still decline, returning None); scenarios ask it with
    ``Backend.best_respond`` rather than training a learner. False unless an algorithm says so.

    ``answers_correlated``: whether :meth:`best_response` answers problems whose
    opponents are a ``correlated`` distribution over profiles (JPSRO's CE/CCE); an exact
    oracle that reads only ``opponents`` leaves it False and is refused with those
    solvers. It implies ``answers``.

    ``on_policy``: whether the trainer must learn only from episodes played with the
    learner's current weights (policy-gradient updates such as PPO's and A2C's assume
    it). Backends that collect while the learner updates (``ray``) then give it only
    episodes of its newest version; an algorithm that learns correctly from older
    weights' play (DQN's replay) sets it False and accepts episodes up to the backend's
    staleness limit. True unless an algorithm says otherwise: the safe assumption.

    ``opponent_epsilon``: the opponent exploration a ``psro`` best response of this
    algorithm trains against when ``training.opponent_epsilon`` is not set (the share of
    opponent moves replaced by uniformly random legal ones). 0.0 unless an algorithm
    says otherwise; a value learner that must meet the positions other play leads to
    (DQN: board games) asks for some.

    ``joint_view``: whether its trainer learns from the joint view
    (:class:`~popmarl.data.trajectories.JointEpisodes`: every seat's rows of each game aligned
    by step, the state, each seat's outcome: what a centralized critic or a mixer needs)
    rather than its own decisions (:class:`~popmarl.data.episodes.EpisodeBatch`, the default).
    It implies ``learns``.
    ``needs_state``: whether it reads the env's global state; a run on an env without one
    (:attr:`~popmarl.interfaces.env.Env.state_space` None) is refused at config time.

    ``trains_team``: whether, in ``marl``, the learning populations that all use this
    algorithm (e.g. every seat's population under ``per_player``) train as **one team
    learner** (one key, one trainer over all their seats: a centralized critic's or a
    mixer's team) rather than one learner each; it implies ``joint_view``.
    """

    learns: ClassVar[bool] = False
    answers: ClassVar[bool] = False
    on_policy: ClassVar[bool] = True
    opponent_epsilon: ClassVar[float] = 0.0
    answers_correlated: ClassVar[bool] = False
    joint_view: ClassVar[bool] = False
    needs_state: ClassVar[bool] = False
    trains_team: ClassVar[bool] = False
    #: The params whose default follows the env: left null in a config, a run fills them
    #: from :meth:`env_defaults` of the env's traits before the algorithm is built (and
    #: says so in its log); an algorithm built without an env gets ``env_defaults(None)``.
    env_params: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        unset = [name for name in self.env_params if getattr(self.config, name) is None]
        if unset:
            fallback = self.env_defaults(None)
            self.config = attrs.evolve(self.config, **{name: fallback[name] for name in unset})

    @classmethod
    def env_defaults(cls, traits: EnvTraits | None) -> dict[str, Any]:
        """The values of :attr:`env_params` for an env with ``traits``
        (:mod:`popmarl.interfaces.env_traits`; None: an env not known)."""
        return {}

    def describe(self, space: PolicySpace) -> str:
        """One line for the run's log about how this algorithm builds its policies for
        ``space`` (e.g. which network model each of its networks got, and why), printed
        once per run as ``popmarl: <algorithm> (<populations>): <line>``; ``""`` (the
        default) prints nothing."""
        return ""

    def check(self, *, env: Env, space: PolicySpace) -> None:
        """Raise a :class:`~popmarl.errors.ConfigError` (one line naming the key to change)
        for an env or population this algorithm cannot work with, e.g. an exact oracle on
        a game it cannot solve; called by ``popmarl.run`` before anything is written, so a
        run that cannot work fails before its directory exists rather than at iteration 1."""

    @abstractmethod
    def make_policy(self, *, space: PolicySpace, seed: int) -> Policy:
        """A fresh policy, deterministic in ``seed``; also what rebuilds a frozen policy
        from its weights (``make_policy(...).set_weights(weights)``)."""

    def initial_policy(self, *, space: PolicySpace, seed: int) -> Policy:
        """PSRO's first policy of the population (iteration 0): :meth:`make_policy` by
        default. Learners return one that plays uniformly at random, as OpenSpiel's PSRO
        starts, rather than an untrained network's arbitrary (for DQN: deterministic) play."""
        return self.make_policy(space=space, seed=seed)

    def best_response(self, problem: BestResponseProblem) -> Policy | None:
        """An exact oracle's answer (an algorithm that sets :attr:`answers` overrides it);
        ``None`` (the default) means: no answer, train with a Trainer."""
        return None

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int,
                     context: TrainerContext) -> Trainer | None:
        """The trainer that improves ``policy`` (an algorithm that sets :attr:`learns`
        overrides it); ``None`` (the default): no training. ``context`` is what the
        trainer learns from beyond its own spaces (every seat's spaces, the state's, a
        team's policies); a trainer that needs none of it ignores it."""
        return None

    def warm_start(self, policy: Policy, *, seed: int) -> None:
        """Prepare ``policy``, a new learner that starts from another policy's weights
        (``training.init: newest_weights``), before its trainer is made: e.g. restore the
        exploration that training took out of those weights. Nothing by default."""


def flag_problems(cls: type[Algorithm]) -> list[str]:
    """Where ``cls``'s capability flags contradict what it implements, one line each
    (none: they agree): a flag set without the method it promises, a method overridden
    that no flag lets the engine call, a flag that implies another one left unset."""
    name = cls.__name__
    problems = []
    for flag, method in (("learns", "make_trainer"), ("answers", "best_response")):
        overridden = getattr(cls, method) is not getattr(Algorithm, method)
        if getattr(cls, flag) and not overridden:
            problems.append(f"{name} sets {flag} = True and does not override {method}")
        elif overridden and not getattr(cls, flag):
            problems.append(f"{name} overrides {method} and leaves {flag} False, so it is never called; "
                            f"set {flag} = True")
    for flag, implied in (("answers_correlated", "answers"), ("joint_view", "learns"), ("trains_team", "joint_view")):
        if getattr(cls, flag) and not getattr(cls, implied):
            problems.append(f"{name} sets {flag} = True and leaves {implied} False ({flag} implies {implied})")
    return problems


def seed_rng(seed: int) -> np.random.Generator:
    """The generator every component derives from an integer seed."""
    return np.random.default_rng(seed)


#: A long turn-based game without chance (connect four): a ``psro`` best response's opponents
#: move at random this often (for an algorithm that asks for opponent exploration at all),
#: and it plays this share of its episodes against copies of itself — a population of
#: deterministic policies shows a learner few of such a game's positions, and it is what
#: they meet that its loss against other play depends on. Chosen with
#: ``benchmarks/defaults.py``: PSRO with ``dqn`` on connect four loses far fewer games
#: against random with these than with 0.3 and no self-play.
LONG_GAME_OPPONENT_EPSILON = 0.5
LONG_GAME_SELF_PLAY = 0.5


def opponent_exploration(algorithm: Algorithm, env: Env) -> float:
    """The opponent exploration a ``psro`` best response of ``algorithm`` trains against on
    ``env`` when ``training.opponent_epsilon`` is unset: the algorithm's own
    (:attr:`Algorithm.opponent_epsilon`), or none where chance takes part in play
    (:attr:`popmarl.interfaces.env.Env.has_chance`) or the seats move at once
    (:attr:`popmarl.interfaces.env_traits.EnvTraits.simultaneous`): there random opponent moves lead
    to no position the opponents' policies would not, and only change what the response
    answers (in a one-shot allocation game, ``dqn``'s meta-strategy ends further from
    equilibrium than uniform play with 0.3); at least :data:`LONG_GAME_OPPONENT_EPSILON` in a
    long turn-based game without chance, for an algorithm that asks for some."""
    traits = traits_of(env)
    if env.has_chance or traits.simultaneous:
        return 0.0
    if traits.long_deterministic and algorithm.opponent_epsilon > 0:
        return max(algorithm.opponent_epsilon, LONG_GAME_OPPONENT_EPSILON)
    return algorithm.opponent_epsilon


def default_self_play(env: Env, spaces: Iterable[PolicySpace]) -> float:
    """The share of self-play episodes of a ``psro`` best response on ``env`` when
    ``training.self_play`` is unset: :data:`LONG_GAME_SELF_PLAY` in a long turn-based game
    without chance (:attr:`popmarl.interfaces.env_traits.EnvTraits.long_deterministic`) whose
    populations all have the same ``spaces`` (copies of a learner can take every seat),
    else none."""
    shared = len({(s.observation_space, s.action_space) for s in spaces}) == 1
    return LONG_GAME_SELF_PLAY if shared and traits_of(env).long_deterministic else 0.0


def check_state(algorithm: Algorithm, env: Env, *, population: str, algorithm_name: str) -> None:
    """Refuse (one line) an algorithm that reads the global state on an env without one."""
    if algorithm.needs_state and env.state_space is None:
        raise ConfigError(f"algorithm: {algorithm_name} (population {population}) reads the env's global state, "
                          f"and env {type(env).__name__} has none; choose an algorithm that does not need it, "
                          "or an env that declares a state_space")
