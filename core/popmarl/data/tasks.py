"""The tasks a scenario hands a backend and the results it gets back: train tasks (their
learners, budget and opponents), evaluation tasks, exact best-response tasks.

All are attrs frozen classes with numpy payloads, so they pickle cheaply for Ray.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np

from popmarl.data.learners import LearnerSpec, LearnerState
from popmarl.data.policies import FrozenPolicy, PolicySpec


@attrs.frozen(kw_only=True)
class Opponents:
    """The meta-strategy of one seat: the pool's policy ids and their probabilities."""

    agent: str
    population: str
    policy_ids: tuple[str, ...]
    mixture: np.ndarray

    def support(self) -> list[tuple[str, float]]:
        """The (policy id, probability) pairs with positive probability."""
        return [(pid, float(p)) for pid, p in zip(self.policy_ids, self.mixture) if p > 0]


@attrs.frozen(kw_only=True)
class JointOpponents:
    """A joint distribution over profiles of the seats ``agents``: ``profiles[k]`` gives
    one frozen policy id per seat, drawn with probability ``probabilities[k]`` once per
    episode (a correlated meta-strategy)."""

    agents: tuple[str, ...]
    profiles: tuple[tuple[str, ...], ...]
    probabilities: np.ndarray

    def __attrs_post_init__(self) -> None:
        p = np.asarray(self.probabilities, dtype=float)
        if any(len(profile) != len(self.agents) for profile in self.profiles):
            raise ValueError(f"JointOpponents: every profile names one policy per seat of {self.agents}")
        if p.shape != (len(self.profiles),) or not np.all(p >= 0) or not p.sum() > 0:
            raise ValueError("JointOpponents: probabilities must be one non-negative number per profile, "
                             "with a positive sum")

    def support(self) -> list[tuple[tuple[str, ...], float]]:
        """The (profile, probability) pairs with positive probability."""
        return [(prof, float(p)) for prof, p in zip(self.profiles, self.probabilities) if p > 0]


@attrs.frozen(kw_only=True)
class TrainBudget:
    """When one oracle training run stops, and what it keeps.

    Training ends at the first of: ``max_env_steps``, ``max_episodes``,
    ``max_wall_time_s``, the mean return (``target_return``) or win rate (return > 0,
    ``target_win_rate``) over the last ``window`` episodes reaching its target, or (with
    ``patience`` set) the return over that window no longer improving for ``patience``
    update rounds, once ``min_env_steps`` are played (:mod:`popmarl.engine.progress`). ``keep``:
    the ``last`` weights, or the ``best`` version: the one whose own first ``window``
    episodes have the highest mean return (:mod:`popmarl.engine.kept_weights`).
    ``self_play``: the share of episodes in which every seat but the learner's is played
    by a non-learning copy of the learner's current policy (the learner still learns
    from its own seat only).
    ``opponent_epsilon``: the probability that an opponent's decision is replaced by a
    uniformly random legal action, so that a learner facing deterministic policies still
    meets the positions other play leads to.
    """

    max_env_steps: int | None = None
    max_episodes: int | None = None
    max_wall_time_s: float | None = None
    episodes_per_update: int = 128
    window: int = 100
    target_return: float | None = None
    target_win_rate: float | None = None
    patience: int | None = None
    min_env_steps: int | None = None
    keep: str = "last"
    self_play: float = 0.0
    opponent_epsilon: float = 0.0


@attrs.frozen(kw_only=True)
class TrainTask:
    """Train ``learners`` together in the same episodes for one ``budget``.

    Every seat a learner does not play in an episode is an opponent's: drawn once per
    episode from ``opponents`` (per seat, a mixture of frozen policy ids) or from
    ``joint`` (a distribution over profiles of its seats). ``return_state``: return each
    learner's whole :class:`~popmarl.data.learners.LearnerState` too (for the scenario's checkpoint).
    """

    learners: tuple[LearnerSpec, ...]
    seed: int
    budget: TrainBudget = attrs.field(factory=TrainBudget)
    opponents: tuple[Opponents, ...] = ()
    joint: JointOpponents | None = None
    return_state: bool = False

    def __attrs_post_init__(self) -> None:
        keys = [spec.key for spec in self.learners]
        if not keys:
            raise ValueError("TrainTask: needs at least one learner")
        if len(set(keys)) != len(keys):
            raise ValueError(f"TrainTask: learner keys must differ, got {', '.join(keys)}")
        seats = [seat for spec in self.learners for seat in spec.seats]
        if len(set(seats)) != len(seats):
            raise ValueError(f"TrainTask: a seat is played by one learner at most, got seats {', '.join(seats)}")
        per_seat = [o.agent for o in self.opponents]
        joint = self.joint.agents if self.joint is not None else ()
        if len(set(per_seat)) != len(per_seat) or set(per_seat) & set(joint):
            raise ValueError("TrainTask: each seat's opponents come from one mixture or the joint distribution, "
                             f"got {', '.join(per_seat)} and joint {', '.join(joint)}")


@attrs.frozen(kw_only=True)
class TrainResult:
    """What a train task produced: the snapshots its learners were asked for, their
    states (``return_state``), per-learner metrics (by key), the task's own metrics, the
    env steps and episodes it played, and how its games ended: per seating (who played
    each seat: a learner's key, a frozen policy's id, ``self-play:<key>``), ``[3, n]``
    win / draw / loss counts per seat (:meth:`popmarl.data.outcomes.PlayedGames.counts`)."""

    policies: tuple[FrozenPolicy, ...] = ()
    states: Mapping[str, LearnerState] = attrs.field(factory=dict)
    learner_metrics: Mapping[str, Mapping[str, float]] = attrs.field(factory=dict)
    metrics: Mapping[str, float] = attrs.field(factory=dict)
    env_steps: int = 0
    episodes: int = 0
    outcomes: Mapping[tuple[str, ...], np.ndarray] = attrs.field(factory=dict)
    #: Why training stopped (:meth:`popmarl.engine.progress.TrainingProgress.stop_reason`,
    #: ``exhausted``); empty where nothing trained (an exact answer).
    stop_reason: str = ""


@attrs.frozen(kw_only=True)
class EvalTask:
    """Estimate one entry (``index`` names it in the result): every seat is played by one
    policy id (``profile``), or by a policy drawn once per episode from a mixture
    (``mixtures``: per seat a :class:`Opponents`) or, for several seats together, from a
    distribution over their profiles (``joint``); each seat is named by exactly one of
    them. Sampled over ``episodes`` episodes from ``seed`` (tasks of one call with the
    same seed share one vector of games), or exact where the env allows. ``outcomes``:
    whether win / draw / loss are wanted; False spares an exact env that cannot compute
    them exactly from sampling them (PSRO's payoff entries need returns only)."""

    index: tuple[int, ...]
    profile: Mapping[str, str] = attrs.field(factory=dict)
    episodes: int
    seed: int
    mixtures: tuple[Opponents, ...] = ()
    joint: JointOpponents | None = None
    outcomes: bool = True

    def __attrs_post_init__(self) -> None:
        named = [*self.profile, *(m.agent for m in self.mixtures), *(self.joint.agents if self.joint else ())]
        twice = sorted({seat for seat in named if named.count(seat) > 1})
        if twice:
            raise ValueError(f"EvalTask: seat {', '.join(twice)} is named more than once (in profile, mixtures "
                             "or joint): each seat is played by one policy, one mixture or the joint distribution")

    @property
    def seats(self) -> tuple[str, ...]:
        """The seats the task names."""
        return (*self.profile, *(m.agent for m in self.mixtures), *(self.joint.agents if self.joint else ()))


@attrs.frozen(kw_only=True)
class EvalResult:
    """One entry's result, per seat (env agent order): the mean return, and how its
    games ended (:mod:`popmarl.data.outcomes`): ``wins``, ``draws``, ``losses`` — counts over
    the ``episodes`` sampled, or probabilities where the env computed them exactly
    (``exact_outcomes``). ``exact``: the returns are exact (no sampling noise);
    ``episodes`` and ``env_steps``: what was sampled (0 when nothing was)."""

    index: tuple[int, ...]
    returns: np.ndarray
    episodes: int = 0
    env_steps: int = 0
    exact: bool = False
    wins: np.ndarray | None = None
    draws: np.ndarray | None = None
    losses: np.ndarray | None = None
    exact_outcomes: bool = False

    def outcome_rates(self) -> np.ndarray:
        """``[3, n_agents]``: each seat's probability (or frequency) of a win, a draw and
        a loss (:data:`popmarl.data.outcomes.OUTCOMES` order)."""
        if self.wins is None or self.draws is None or self.losses is None:
            raise ValueError(f"EvalResult {self.index}: the backend reported no win/draw/loss")
        counts = np.stack([self.wins, self.draws, self.losses]).astype(float)
        return counts if self.exact_outcomes else counts / max(self.episodes, 1)


@attrs.frozen(kw_only=True)
class BestResponseTask:
    """Ask ``population``'s algorithm for its exact best response, in the population's
    seats, to the other seats' ``opponents`` (per seat, a mixture of frozen policy ids) or
    to their ``joint`` distribution over profiles; the answer is frozen as ``snapshot``.
    No learner is involved: nothing trains, nothing is kept between tasks."""

    population: str
    seed: int
    snapshot: PolicySpec
    opponents: tuple[Opponents, ...] = ()
    joint: JointOpponents | None = None


@attrs.frozen(kw_only=True)
class BestResponseResult:
    """The answer to a :class:`BestResponseTask`: the frozen best response, or None when
    the algorithm declined (e.g. the game is too large to solve: train a learner
    instead); ``seconds`` it took."""

    policy: FrozenPolicy | None
    seconds: float = 0.0
