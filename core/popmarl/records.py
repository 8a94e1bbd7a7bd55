"""Records that cross process boundaries: tasks, results, episodes, policy specs.

All are attrs frozen classes with numpy payloads, so they pickle cheaply for Ray and
serialise to JSON/npz for checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

Weights = Mapping[str, np.ndarray]


@attrs.frozen(kw_only=True)
class RunInfo:
    """What hooks receive about the run."""

    run_dir: str
    scenario: str
    seed: int
    config: Mapping[str, Any]
    start_iteration: int = 0
    populations: tuple[str, ...] = ()
    resumed: bool = False


@attrs.frozen(kw_only=True)
class PolicySpec:
    """A frozen policy's identity: which population, which algorithm, when it was made."""

    policy_id: str
    population: str
    algorithm: str
    iteration: int


@attrs.frozen(kw_only=True)
class Observations:
    """A batch of decisions for one policy: observations, legal-action masks, and (for
    tabular policies) the information-state keys of each row."""

    obs: np.ndarray
    mask: np.ndarray | None = None
    keys: tuple[str, ...] | None = None
    agent: str = ""

    def __len__(self) -> int:
        return int(self.obs.shape[0])


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
class TrainBudget:
    """When one oracle training run stops, and what it keeps.

    Training ends at the first of: ``max_env_steps``, ``max_episodes``,
    ``max_wall_time_s``, or the mean return (``target_return``) or win rate (return > 0,
    ``target_win_rate``) over the last ``window`` episodes reaching its target. ``keep``:
    the ``last`` weights, or the ``best`` version: the one whose own first ``window``
    episodes have the highest mean return (:mod:`popmarl.keep`).
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
    episodes_per_update: int = 32
    window: int = 100
    target_return: float | None = None
    target_win_rate: float | None = None
    keep: str = "last"
    self_play: float = 0.0
    opponent_epsilon: float = 0.0


@attrs.frozen(kw_only=True)
class TrainTask:
    """Produce a new policy for ``population`` against the seats' meta-strategies."""

    spec: PolicySpec
    seed: int
    opponents: tuple[Opponents, ...]
    budget: TrainBudget = attrs.field(factory=TrainBudget)


@attrs.frozen(kw_only=True)
class TrainResult:
    """A trained, frozen policy's weights and what its training measured."""

    spec: PolicySpec
    weights: Weights
    env_steps: int = 0
    episodes: int = 0
    metrics: Mapping[str, float] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class EvalTask:
    """Estimate one payoff-table entry: a joint profile, one policy id per agent (seat)."""

    index: tuple[int, ...]
    profile: Mapping[str, str]
    episodes: int
    seed: int


@attrs.frozen(kw_only=True)
class EvalResult:
    """Mean return of each agent (in env agent order) for one entry."""

    index: tuple[int, ...]
    returns: np.ndarray
    episodes: int = 0
    env_steps: int = 0
    exact: bool = False


@attrs.frozen(kw_only=True)
class Episode:
    """One finished episode's transitions for a learner (arrays over its decisions).

    Exactly one of ``terminated`` (the episode ended: nothing follows the last decision)
    and ``truncated`` (it was cut off, e.g. by a time limit) holds. A truncated episode
    carries ``final_obs`` (and ``final_mask``), the learner's observation when it was
    cut, so that learning bootstraps from its value rather than from zero.
    """

    agent: str
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    masks: np.ndarray | None
    terminated: bool
    truncated: bool
    episode_return: float
    final_obs: np.ndarray | None = None
    final_mask: np.ndarray | None = None

    def __attrs_post_init__(self) -> None:
        if self.terminated == self.truncated:
            raise ValueError(f"Episode: exactly one of terminated and truncated must hold, got terminated="
                             f"{self.terminated}, truncated={self.truncated}")
        if self.truncated and self.final_obs is None:
            raise ValueError("Episode: a truncated episode needs final_obs, the observation when it was cut off")


@attrs.frozen(kw_only=True)
class LearnTask:
    """Continue training every population in ``learners`` together (co-learning) for one
    budget; agents of the other populations play the frozen policy ids in ``fixed``.
    ``initial`` gives each learner's starting weights (a policy id) for a learner the
    executing worker has not built yet (a fresh run, or a resumed one)."""

    iteration: int
    seed: int
    learners: tuple[str, ...]
    fixed: Mapping[str, str]
    initial: Mapping[str, str]
    budget: TrainBudget


@attrs.frozen(kw_only=True)
class LearnResult:
    """The learners' weights after the budget, and what training measured."""

    weights: Mapping[str, Weights]
    env_steps: int = 0
    episodes: int = 0
    metrics: Mapping[str, float] = attrs.field(factory=dict)
