"""The asynchronous learner: trains while rollout workers keep playing.

:class:`AsyncTraining` runs a train task of one learner (a core
:class:`~popmarl.learner.Learner`, held by key in the learner actor) whose algorithm
trains by rollouts. It does not collect itself: it publishes each new version of the
learner's weights to the parameter server actor (put in the object store once), and
updates on whatever fresh episodes the rollout workers have queued for it in the episode
server actor, dropping those played with weights more than ``max_staleness`` versions
old, or, for an on-policy algorithm (:attr:`~popmarl.algorithm.Algorithm.on_policy`:
ppo, a2c), with any but its current weights. ``keep`` works as on every backend
(:class:`~popmarl.keep.KeptWeights`): the learner holds the weights of the versions
still in play to keep the best one. Exact oracles, algorithms that do not train and
co-learning tasks run in the actor through the core :func:`~popmarl.training.run_task`.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from popmarl.errors import PopmarlError
from popmarl.keep import KeptWeights
from popmarl.learner import Learner
from popmarl.progress import TrainingProgress
from popmarl.records import FrozenPolicy, TrainResult, TrainTask

#: How long one ``take`` waits for a full batch before the learner looks at its budget.
TAKE_TIMEOUT_S = 1.0


class StalledError(PopmarlError):
    """No episodes reached a learner for too long."""


class AttemptClosedError(PopmarlError):
    """The driver ended the training attempt (e.g. a server it used was replaced)."""


class AsyncTraining:
    """Trains one learner on the episodes rollout worker actors play with its weights."""

    def __init__(self, *, params: Any, data: Any, max_staleness: int, stall_timeout_s: float = 300.0) -> None:
        self.params_actor = params
        self.data_actor = data
        self.max_staleness = max_staleness
        self.stall_timeout_s = stall_timeout_s

    def _publish(self, key: str, learner: Learner, kept: KeptWeights, max_staleness: int) -> int:
        """Make the learner's weights its next version (returned); forget, for ``keep``,
        the versions whose episodes can no longer reach the trainer."""
        weights = learner.policy.get_weights()
        version = int(ray.get(self.params_actor.push.remote(key, [ray.put(weights)])))
        kept.published(version, weights)
        kept.forget_older(version - max_staleness)
        return version

    def train(self, task: TrainTask, learner: Learner, key: str) -> TrainResult:
        """Run ``task`` (whose one learner is ``learner``, prepared) with its episodes and
        weights filed under ``key`` (one per attempt)."""
        (spec,) = task.learners
        trainer = learner.trainer
        assert trainer is not None
        max_staleness = 0 if learner.agent.algorithm.on_policy else self.max_staleness
        budget = task.budget
        kept = KeptWeights(budget)
        version = self._publish(key, learner, kept, max_staleness)
        ray.get(self.data_actor.open.remote(key))
        progress = TrainingProgress(budget, [spec.key])
        start = last_data = time.monotonic()
        updates = 0
        metrics: dict[str, float] = {}
        try:
            while True:
                batch = ray.get(self.data_actor.take.remote(
                    key, min_items=budget.episodes_per_update, min_version=version - max_staleness,
                    timeout_s=TAKE_TIMEOUT_S))
                if batch.closed:
                    raise AttemptClosedError(f"learner {spec.key}: training attempt {key} closed")
                now = time.monotonic()
                if batch.episodes:
                    last_data = now
                    progress.played(spec.key, [e.episode_return for e in batch.episodes])
                    for played, episode in zip(batch.versions, batch.episodes):
                        kept.played(played, [episode.episode_return])
                    metrics = {k: float(v) for k, v in trainer.update(list(batch.episodes)).items()}
                    updates += 1
                    progress.round_done()
                    version = self._publish(key, learner, kept, max_staleness)
                elif now - last_data > self.stall_timeout_s:
                    raise StalledError(f"learner {spec.key}: no episodes for {self.stall_timeout_s:.0f} s")
                if progress.spent(batch.env_steps, batch.played, now - start):
                    break
        finally:
            self.data_actor.close.remote(key)
        metrics.update({
            "updates": float(updates),
            **progress.learners[spec.key].metrics(),
            **kept.metrics(),
        })
        policies: tuple[FrozenPolicy, ...] = ()
        if spec.snapshot is not None:
            policies = (FrozenPolicy(spec=spec.snapshot, weights=kept.final(learner.policy.get_weights())),)
        return TrainResult(policies=policies, states={spec.key: learner.state()} if task.return_state else {},
                           learner_metrics={spec.key: metrics},
                           metrics={"train_time_s": time.monotonic() - start, "dropped_episodes": float(batch.dropped)},
                           env_steps=batch.env_steps, episodes=batch.played)
