"""The learner loop: a train task's learners update on what a feed plays, until the budget.

:func:`run_task` is the one loop every backend runs. It starts the task's learners
(:class:`~popmarl.engine.learners.Learners`) and repeats: take the next round of episodes from a
:class:`Feed`, update each learner on its own (its decisions, or the joint view: see
:mod:`popmarl.data.trajectories`), publish the new weights to the feed; until the budget is
spent (:mod:`popmarl.engine.progress`). ``keep`` is scored on the same rounds
(:mod:`popmarl.engine.kept_weights`). The feed is where the backends differ: :class:`LocalFeed` plays
the round in-process with the learners' current policies
(:meth:`~popmarl.engine.rollout.RolloutWorker.explore`); the ray backend's feed takes what its
rollout workers queued on the episode server (``popmarl_ray.feed``). Exact answers are
no train task's: scenarios ask them with ``Backend.best_respond``
(:mod:`popmarl.engine.exact_answers`); a train task starts every learner it names, and a
learner whose algorithm does not learn plays no games and keeps its policy as made.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence

import attrs
import numpy as np

from popmarl.engine.exact_answers import PolicyOf
from popmarl.engine.kept_weights import KeptWeights
from popmarl.engine.learners import Learner, Learners
from popmarl.data.outcomes import PlayedGames
from popmarl.engine.progress import TrainingProgress
from popmarl.data.episodes import EpisodeBatch
from popmarl.data.learners import LearnerSpec
from popmarl.data.policies import FrozenPolicy, Weights
from popmarl.data.seeds import stream_seed
from popmarl.data.tasks import TrainResult, TrainTask
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.data.trajectories import JointEpisodes

#: A learner's episodes of one round: its decisions, or its games seen by every seat.
Trajectories = EpisodeBatch | JointEpisodes
#: The learners of a task that train by rollouts, with their specs, in task order.
Group = Sequence[tuple[LearnerSpec, Learner]]


@attrs.frozen(kw_only=True)
class Fed:
    """One round from a feed: per learner key, its trajectories and the weights version
    each part was played with; the games finished this round (``games``: who played each
    seat, and the returns); the task's running totals of env steps and games played;
    and ``exhausted`` once nothing more will come (the learners stop)."""

    trajectories: Mapping[str, Sequence[tuple[int, Trajectories]]]
    games: PlayedGames
    env_steps: int
    episodes: int
    exhausted: bool = False


class Feed(ABC):
    """Where a learner group's episodes come from, and where its weights go."""

    @abstractmethod
    def publish(self, key: str, learner: Learner) -> tuple[int, TeamWeights | None]:
        """``learner``'s weights (:meth:`~popmarl.engine.learners.Learner.weights`) are its next
        version, from now on played by the feed; returns that version and the weights
        when the feed read them (else None)."""

    @abstractmethod
    def next(self) -> Fed:
        """The next round of episodes (a feed may raise to end the task: a stall)."""

    def oldest(self, key: str, version: int) -> int:
        """The oldest version of learner ``key`` whose episodes may still arrive once
        ``version`` is published."""
        return version

    def metrics(self) -> dict[str, float]:
        """The feed's own metrics of the task (e.g. episodes dropped as stale)."""
        return {}

    def close(self) -> None:
        """The task is over (also when it failed)."""


#: Makes the feed of a task's training learners (``population_of``: each seat's population).
FeedFactory = Callable[[TrainTask, Group, PolicyOf, Mapping[str, str]], Feed]
#: A learner's weights by member population (one entry unless it is a team).
TeamWeights = Mapping[str, Weights]


def seating(spec: LearnerSpec, learner: Learner, population_of: Mapping[str, str]) -> Seating:
    """How ``learner`` plays ``spec``'s seats (a team: each seat with its population's policy)."""
    return Seating(policy=learner.policy, seats=spec.seats, one_seat=spec.one_seat, name=spec.key,
                   joint=learner.agent.algorithm.joint_view,
                   seat_policies={seat: learner.members[population_of[seat]] for seat in spec.seats
                                  if seat not in learner.agent.space.agents})


class LocalFeed(Feed):
    """Rounds played here: ``episodes_per_update`` games (at most what the budget has
    left) with the learners' current policies against opponents drawn per game; every
    part of a round is played with the newest version. Round k plays weights version k
    (every round ends in one update), seeded from the task's seed and k (stream
    ``learner.round``, part 0: the ray backend's lock step seeds its first part alike)."""

    def __init__(self, rollout: RolloutWorker, task: TrainTask, group: Group, policy_of: PolicyOf,
                 population_of: Mapping[str, str]) -> None:
        self.rollout = rollout
        self.task = task
        self.seatings = [seating(spec, learner, population_of) for spec, learner in group]
        self.keys = [spec.key for spec, _ in group]
        self.draw = OpponentDraw.of(task.opponents, policy_of)
        self.versions = dict.fromkeys(self.keys, 0)
        self.rounds = self.env_steps = self.episodes = 0

    def publish(self, key: str, learner: Learner) -> tuple[int, TeamWeights | None]:
        self.versions[key] += 1
        return self.versions[key], None

    def next(self) -> Fed:
        budget = self.task.budget
        chunk = budget.episodes_per_update
        if budget.max_episodes is not None:
            chunk = min(chunk, budget.max_episodes - self.episodes)
        self.rounds += 1
        played = self.rollout.explore(
            learners=self.seatings, opponents=self.draw, max_episodes=chunk,
            max_steps=None if budget.max_env_steps is None else budget.max_env_steps - self.env_steps,
            seed=stream_seed(self.task.seed, "learner.round", self.rounds, 0), self_play=budget.self_play,
            opponent_epsilon=budget.opponent_epsilon)
        self.env_steps += played.env_steps
        self.episodes += len(played.tags)
        return Fed(trajectories={key: [(self.versions[key], data)] for key, data in zip(self.keys, played.episodes)},
                   games=played.games(), env_steps=self.env_steps,
                   episodes=self.episodes, exhausted=not played.tags)


def local_feed(rollout: RolloutWorker) -> FeedFactory:
    """Tasks fed by ``rollout`` in this process."""
    return lambda task, group, policy_of, population_of: LocalFeed(rollout, task, group, policy_of, population_of)


def run_task(task: TrainTask, *, learners: Learners, policy_of: PolicyOf, rollout: RolloutWorker | None = None,
             feed: FeedFactory | None = None) -> TrainResult:
    """Run ``task``: train its learners on what ``feed`` plays (default: ``rollout``, in
    this process) for its budget; return what it asks for."""
    if feed is None:
        if rollout is None:
            raise ValueError("run_task: give a rollout worker or a feed")
        feed = local_feed(rollout)
    start = time.monotonic()
    prepared = {spec.key: learners.prepare(spec, policy_of) for spec in task.learners}
    group = [(spec, prepared[spec.key]) for spec in task.learners if prepared[spec.key].trainer is not None]
    learner_metrics: dict[str, dict[str, float]] = {spec.key: {} for spec in task.learners}
    final: dict[str, TeamWeights] = {}
    feed_metrics: dict[str, float] = {}
    games = PlayedGames()
    env_steps = episodes = 0
    stop_reason = ""
    if group:
        source = feed(task, group, policy_of, learners.population_of)
        try:
            final, env_steps, episodes, games, stop_reason = _train(task, group, source, learner_metrics, start)
        finally:
            source.close()
        feed_metrics = source.metrics()
    policies = []
    for spec in task.learners:
        snapshots = ([spec.snapshot] if spec.snapshot is not None else []) + list(spec.team_snapshots)
        if not snapshots:
            continue
        weights: TeamWeights = final.get(spec.key) or prepared[spec.key].weights()
        policies += [FrozenPolicy(spec=snapshot, weights=weights[snapshot.population]) for snapshot in snapshots]
    metrics = {"train_time_s": time.monotonic() - start, **feed_metrics}
    if len(games):
        metrics["train_mean_team_return"] = float(np.mean(games.team_returns))
    states = {}
    if task.return_state:
        states = {spec.key: prepared[spec.key].state() for spec in task.learners}
    return TrainResult(policies=tuple(policies), states=states, learner_metrics=learner_metrics, metrics=metrics,
                       env_steps=env_steps, episodes=episodes, outcomes=games.counts(), stop_reason=stop_reason)


def _train(task: TrainTask, group: Group, feed: Feed, learner_metrics: dict[str, dict[str, float]],
           start: float) -> tuple[dict[str, TeamWeights], int, int, PlayedGames, str]:
    """The loop over ``feed``'s rounds; returns each learner's final weights (``keep``
    applied), the env steps and games played, the games themselves, and why it stopped
    (:meth:`~popmarl.engine.progress.TrainingProgress.stop_reason`, or ``exhausted``)."""
    budget = task.budget
    keys = [spec.key for spec, _ in group]
    kept = {key: KeptWeights(budget) for key in keys}
    progress = TrainingProgress(budget, keys)
    updates = dict.fromkeys(keys, 0)
    games: list[PlayedGames] = []
    games_before = 0

    def publish(key: str, learner: Learner) -> None:
        version, weights = feed.publish(key, learner)
        if kept[key].best:
            kept[key].published(version, weights if weights is not None else learner.weights())
        kept[key].forget_older(feed.oldest(key, version))

    for spec, learner in group:
        publish(spec.key, learner)
    while True:
        fed = feed.next()
        games.append(fed.games)
        got = False
        for spec, learner in group:
            parts = fed.trajectories.get(spec.key, ())
            for version, data in parts:
                returns = _returns(data)
                progress.played(spec.key, returns)
                kept[spec.key].played(version, returns)
            joined = _joined([data for _, data in parts])
            if joined is not None and len(joined):
                got = True
                assert learner.trainer is not None
                update = learner.trainer.update(joined)  # type: ignore[arg-type]  # a joint view for joint learners
                learner_metrics[spec.key].update({k: float(v) for k, v in update.items()})
                updates[spec.key] += 1
                publish(spec.key, learner)
        if got:  # a feed may deliver several rounds' games at once (Ray workers ahead of an off-policy learner)
            new_games, games_before = fed.episodes - games_before, fed.episodes
            progress.round_done(max(1, round(new_games / budget.episodes_per_update)))
        reason = "exhausted" if fed.exhausted else progress.stop_reason(fed.env_steps, fed.episodes,
                                                                        time.monotonic() - start)
        if reason is not None:
            break
    for spec, _ in group:
        learner_metrics[spec.key].update({"updates": float(updates[spec.key]),
                                          **progress.learners[spec.key].metrics(), **kept[spec.key].metrics()})
    final = {spec.key: kept[spec.key].final(learner.weights()) for spec, learner in group}
    return final, fed.env_steps, fed.episodes, PlayedGames.join(games), reason


def _returns(data: Trajectories) -> list[float]:
    """The learner's returns in ``data``: one per episode of a seat it played."""
    if isinstance(data, JointEpisodes):
        return data.own_returns().tolist()
    return data.returns.tolist()  # type: ignore[no-any-return]


def _joined(parts: Sequence[Trajectories]) -> Trajectories | None:
    """The parts of one round as one batch (None: no part)."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], JointEpisodes):
        return JointEpisodes.join([p for p in parts if isinstance(p, JointEpisodes)])
    return EpisodeBatch.join([p for p in parts if isinstance(p, EpisodeBatch)])
