"""Records that cross process boundaries: tasks, results, episodes, policy specs.

All are attrs frozen classes with numpy payloads, so they pickle cheaply for Ray and
serialise to JSON/npz for checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
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


LEARNER_INITS = ("fresh", "from", "continue", "restore")


@attrs.frozen(kw_only=True)
class LearnerState:
    """Everything a learner is, in safe formats: its policy's weights and its trainer's
    state (:data:`popmarl.interfaces.trainer.TrainerState`: named files); a team's other members'
    weights by population (``members``). With its population's algorithm and ``seed``,
    enough to rebuild it exactly (``init: restore``)."""

    key: str
    population: str
    seed: int
    weights: Weights
    trainer: Mapping[str, bytes] = attrs.field(factory=dict)
    members: Mapping[str, Weights] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class LearnerInit:
    """How a train task's learner starts.

    ``fresh``: a new policy and trainer (from the learner's seed). ``from``: a new
    trainer on the weights of the frozen policy ``policy_id`` (a warm start).
    ``continue``: the learner as the last task that named its key left it (policy,
    trainer, optimiser, replay buffer, exploration schedule, random generators); with
    ``policy_id``, its policy takes that frozen policy's weights (e.g. the snapshot
    ``keep: best`` kept) and its trainer carries on. ``restore``: the learner rebuilt
    from ``state`` (a checkpoint), then as ``continue`` (``policy_id`` included)."""

    kind: str = "fresh"
    policy_id: str | None = None
    state: LearnerState | None = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in LEARNER_INITS:
            raise ValueError(f"LearnerInit.kind: {self.kind!r} is not allowed; allowed: {', '.join(LEARNER_INITS)}")
        if self.kind == "from" and self.policy_id is None:
            raise ValueError("LearnerInit: kind 'from' needs a policy_id")
        if self.kind == "fresh" and self.policy_id is not None:
            raise ValueError("LearnerInit: kind 'fresh' takes no policy_id")
        if (self.kind == "restore") != (self.state is not None):
            raise ValueError("LearnerInit: state goes with kind 'restore', and only with it")

    @classmethod
    def start_from(cls, policy_id: str) -> LearnerInit:
        return cls(kind="from", policy_id=policy_id)

    @classmethod
    def restore(cls, state: LearnerState, policy_id: str | None = None) -> LearnerInit:
        return cls(kind="restore", state=state, policy_id=policy_id)


@attrs.frozen(kw_only=True)
class LearnerSpec:
    """One learner of a train task: its ``key`` (its identity across tasks), the
    ``population`` whose algorithm and spaces it uses, the ``seats`` (agents) it plays,
    how it starts (``init``), its ``seed`` (for ``fresh`` and ``from``), and
    ``snapshot``: freeze its weights after the task and return them under this spec
    (None: return no snapshot).

    ``one_seat``: per episode it plays one of ``seats``, drawn uniformly (the other seats
    are the opponents'; a PSRO best response of a shared population); otherwise it plays
    all of them in every episode (parameter sharing in co-learning).

    A **team**: ``seats`` of several populations (e.g. every seat of a ``per_player``
    mapping, for a centralized critic or a mixer). It is one learner (one key, one
    checkpoint, one update) whose trainer improves one policy per member population
    (its algorithm, ``population``'s, must read the joint view); ``team_snapshots``
    freeze the other members' policies (``snapshot`` freezes ``population``'s)."""

    key: str
    population: str
    seats: tuple[str, ...]
    seed: int
    init: LearnerInit = attrs.field(factory=LearnerInit)
    snapshot: PolicySpec | None = None
    one_seat: bool = False
    team_snapshots: tuple[PolicySpec, ...] = ()


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
class TrainTask:
    """Train ``learners`` together in the same episodes for one ``budget``.

    Every seat a learner does not play in an episode is an opponent's: drawn once per
    episode from ``opponents`` (per seat, a mixture of frozen policy ids) or from
    ``joint`` (a distribution over profiles of its seats). ``return_state``: return each
    learner's whole :class:`LearnerState` too (for the scenario's checkpoint).
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
class FrozenPolicy:
    """A frozen policy: its identity and weights."""

    spec: PolicySpec
    weights: Weights


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


@attrs.frozen(kw_only=True, eq=False)
class EpisodeBatch(Sequence[Episode]):
    """Finished episodes stored column-wise: their decisions' rows concatenated, episode
    after episode (``starts[i]:starts[i + 1]`` are episode ``i``'s rows).

    What the rollout engine hands a learner's trainer: building one costs a few numpy
    calls however many episodes it holds, and a trainer turns it into transitions the
    same way. It is also a sequence of :class:`Episode` (views into the columns), for
    code that reads episodes one by one.
    """

    agents: tuple[str, ...]
    starts: np.ndarray
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    masks: np.ndarray | None
    returns: np.ndarray
    truncated: np.ndarray
    final_obs: tuple[np.ndarray | None, ...]
    final_masks: tuple[np.ndarray | None, ...]

    def __attrs_post_init__(self) -> None:
        n = len(self.agents)
        if len(self.starts) != n + 1 or self.starts[0] != 0 or self.starts[-1] != len(self.obs):
            raise ValueError(f"EpisodeBatch: starts must run from 0 to the {len(self.obs)} rows in {n + 1} offsets")
        if n and np.any(np.diff(self.starts) <= 0):
            raise ValueError("EpisodeBatch: every episode needs at least one decision")
        for name in ("returns", "truncated", "final_obs", "final_masks"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"EpisodeBatch: {name} needs one entry per episode ({n})")
        if any(cut and final is None for cut, final in zip(self.truncated, self.final_obs)):
            raise ValueError("EpisodeBatch: a truncated episode needs final_obs, the observation when it was cut off")

    @classmethod
    def of(cls, episodes: Iterable[Episode]) -> EpisodeBatch:
        """The episodes (those with at least one decision) as one batch."""
        if isinstance(episodes, EpisodeBatch):
            return episodes
        kept = [e for e in episodes if len(e.actions)]
        if not kept:
            return EMPTY_EPISODES
        widths = {np.shape(e.masks)[1] for e in kept if e.masks is not None}
        width = widths.pop() if widths else 0
        return cls(
            agents=tuple(e.agent for e in kept),
            starts=np.concatenate([[0], np.cumsum([len(e.actions) for e in kept])]).astype(np.int64),
            obs=np.concatenate([np.asarray(e.obs)[:len(e.actions)] for e in kept]),
            actions=np.concatenate([np.asarray(e.actions) for e in kept]),
            rewards=np.concatenate([np.asarray(e.rewards, dtype=np.float32) for e in kept]),
            # An episode without masks (every action legal) beside masked ones: all ones.
            masks=np.concatenate([np.ones((len(e.actions), width), bool) if e.masks is None
                                  else np.asarray(e.masks, bool)[:len(e.actions)] for e in kept]) if width else None,
            returns=np.asarray([e.episode_return for e in kept], dtype=np.float64),
            truncated=np.asarray([e.truncated for e in kept], dtype=bool),
            final_obs=tuple(e.final_obs if e.truncated else None for e in kept),
            final_masks=tuple(e.final_mask if e.truncated else None for e in kept),
        )

    @classmethod
    def join(cls, batches: Sequence[EpisodeBatch]) -> EpisodeBatch:
        """Several batches as one, column by column (episodes in the batches' order)."""
        kept = [b for b in batches if len(b)]
        if len(kept) <= 1:
            return kept[0] if kept else EMPTY_EPISODES
        widths = {b.masks.shape[1] for b in kept if b.masks is not None}
        width = widths.pop() if widths else 0
        offsets = np.cumsum([0] + [b.decisions for b in kept[:-1]])
        return cls(
            agents=tuple(a for b in kept for a in b.agents),
            starts=np.concatenate([[0], *[b.starts[1:] + at for b, at in zip(kept, offsets)]]).astype(np.int64),
            obs=np.concatenate([b.obs for b in kept]),
            actions=np.concatenate([b.actions for b in kept]),
            rewards=np.concatenate([b.rewards for b in kept]),
            masks=np.concatenate([np.ones((b.decisions, width), bool) if b.masks is None else b.masks
                                  for b in kept]) if width else None,
            returns=np.concatenate([b.returns for b in kept]),
            truncated=np.concatenate([b.truncated for b in kept]),
            final_obs=tuple(f for b in kept for f in b.final_obs),
            final_masks=tuple(f for b in kept for f in b.final_masks),
        )

    def __len__(self) -> int:
        return len(self.agents)

    def __getitem__(self, index: int) -> Episode:  # type: ignore[override]
        if not isinstance(index, int | np.integer):
            raise TypeError("EpisodeBatch: index with an int (one episode)")
        i = range(len(self))[index]
        rows = slice(int(self.starts[i]), int(self.starts[i + 1]))
        cut = bool(self.truncated[i])
        return Episode(agent=self.agents[i], obs=self.obs[rows], actions=self.actions[rows],
                       rewards=self.rewards[rows], masks=None if self.masks is None else self.masks[rows],
                       terminated=not cut, truncated=cut, episode_return=float(self.returns[i]),
                       final_obs=self.final_obs[i], final_mask=self.final_masks[i])

    def __iter__(self) -> Iterator[Episode]:
        return (self[i] for i in range(len(self)))

    @property
    def decisions(self) -> int:
        """Rows (the learner's decisions) over all episodes."""
        return len(self.obs)

    @property
    def ends(self) -> np.ndarray:
        """Each episode's last row."""
        return self.starts[1:] - 1


EMPTY_EPISODES = EpisodeBatch(agents=(), starts=np.zeros(1, np.int64), obs=np.zeros((0, 0)), actions=np.zeros(0),
                              rewards=np.zeros(0, np.float32), masks=None, returns=np.zeros(0),
                              truncated=np.zeros(0, bool), final_obs=(), final_masks=())
