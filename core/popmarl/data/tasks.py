"""The tasks a scenario hands a backend and the results it gets back: train tasks (their
learners, budget and opponents), evaluation tasks, exact best-response tasks.

All are attrs frozen classes with numpy payloads, so they pickle cheaply for Ray.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np

from popmarl.data.learners import LearnerSpec, LearnerState
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.policies import FrozenPolicy, PolicySpec


@attrs.frozen(kw_only=True)
class TrainBudget:
    """When one oracle training run stops, and what it keeps.

    Training ends at the first of: ``max_env_steps``, ``max_episodes``,
    ``max_wall_time_s``, the mean return (``target_return``) or win rate (return > 0,
    ``target_win_rate``) over the last ``window`` episodes reaching its target, or (with
    ``patience`` set) the return over that window not improving for ``patience``
    update rounds, once ``min_env_steps`` are played (:mod:`popmarl.engine.progress`). ``keep``:
    the ``last`` weights, or the ``best`` version: the one whose own first ``window``
    episodes have the highest mean return (:mod:`popmarl.engine.kept_weights`).
    ``self_play``: the share of episodes in which every seat but the learner's is played
    by a non-learning copy of the learner's current policy (the learner still learns
    from its own seat only).
    ``opponent_epsilon``: the probability that an opponent's decision is replaced by a
    uniformly random legal action, so that a learner facing deterministic policies still
    meets the positions other play leads to.

    A run's budgets come from its training config, by one builder
    (:meth:`popmarl.config.schema.TrainingConfig.budget`); the defaults here are those of a
    task built by hand (a test, a benchmark).
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
    episode from ``opponents`` (a :class:`~popmarl.data.meta_strategy.MetaStrategy` over
    frozen policy ids: per seat a mixture, its joint seats drawn together). ``return_state``: return each
    learner's whole :class:`~popmarl.data.learners.LearnerState` too (for the scenario's checkpoint).
    """

    learners: tuple[LearnerSpec, ...]
    seed: int
    budget: TrainBudget = attrs.field(factory=TrainBudget)
    opponents: MetaStrategy = attrs.field(factory=MetaStrategy)
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
    policy id (``profile``), or by a policy drawn once per episode from ``meta`` (a
    :class:`~popmarl.data.meta_strategy.MetaStrategy`: per seat a mixture, its joint seats
    drawn together); each seat is named by exactly one of them. Sampled over ``episodes`` episodes from ``seed`` (tasks of one call with the
    same seed share one vector of games), or exact where the env allows. ``outcomes``:
    whether win / draw / loss are wanted; False spares an exact env that cannot compute
    them exactly from sampling them (PSRO's payoff entries need returns only)."""

    index: tuple[int, ...]
    profile: Mapping[str, str] = attrs.field(factory=dict)
    episodes: int
    seed: int
    meta: MetaStrategy = attrs.field(factory=MetaStrategy)
    outcomes: bool = True

    def __attrs_post_init__(self) -> None:
        twice = sorted(set(self.profile) & set(self.meta.agents))
        if twice:
            raise ValueError(f"EvalTask: seat {', '.join(twice)} is named in both profile and meta: each seat is "
                             "played by one policy or drawn from the meta-strategy")

    @property
    def seats(self) -> tuple[str, ...]:
        """The seats the task names."""
        return (*self.profile, *self.meta.agents)


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
    seats, to the other seats' ``opponents`` (a
    :class:`~popmarl.data.meta_strategy.MetaStrategy` over frozen policy ids); the answer is frozen as ``snapshot``.
    No learner is involved: nothing trains, nothing is kept between tasks."""

    population: str
    seed: int
    snapshot: PolicySpec
    opponents: MetaStrategy = attrs.field(factory=MetaStrategy)


@attrs.frozen(kw_only=True)
class BestResponseResult:
    """The answer to a :class:`BestResponseTask`: the frozen best response, or None when
    the algorithm declined (e.g. the game is too large to solve: train a learner
    instead); ``seconds`` it took."""

    policy: FrozenPolicy | None
    seconds: float = 0.0
