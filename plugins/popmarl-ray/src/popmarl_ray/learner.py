"""The asynchronous learner: trains while rollout workers keep playing.

:class:`AsyncAgentInterface` is the core :class:`~popmarl.agent.AgentInterface` (exact
oracles and untrained algorithms go through it unchanged) whose training by rollouts
does not collect itself: it publishes each new version of its weights to the parameter
server actor (put in the object store once), and updates on whatever fresh episodes the
rollout workers have queued for it in the episode server actor, dropping those played
with weights more than ``max_staleness`` versions old, or, for an on-policy algorithm
(:attr:`~popmarl.algorithm.Algorithm.on_policy`: ppo, a2c), with any but its current
weights. ``keep`` works as on every backend (:class:`~popmarl.keep.KeptWeights`): the
learner holds the weights of the versions still in play to keep the best one.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np
import ray

from popmarl.agent import AgentInterface
from popmarl.agent import budget_spent
from popmarl.algorithm import Algorithm, PolicySpace
from popmarl.env import Env, MixedProfile
from popmarl.errors import PopmarlError
from popmarl.keep import KeptWeights
from popmarl.policy import Policy
from popmarl.records import TrainResult, TrainTask, Weights
from popmarl.rollout import RolloutWorker
from popmarl.trainer import Trainer

#: How long one ``take`` waits for a full batch before the learner looks at its budget.
TAKE_TIMEOUT_S = 1.0


class StalledError(PopmarlError):
    """No episodes reached a learner for too long."""


class AttemptClosedError(PopmarlError):
    """The driver ended the training attempt (e.g. a server it used was replaced)."""


class AsyncAgentInterface(AgentInterface):
    """An AgentInterface whose trainer learns from episodes rollout worker actors play."""

    def __init__(self, *, space: PolicySpace, algorithm: Algorithm, env: Env, rollout: RolloutWorker,
                 params: Any, data: Any, max_staleness: int, stall_timeout_s: float = 300.0) -> None:
        super().__init__(space=space, algorithm=algorithm, env=env, rollout=rollout)
        self.params_actor = params
        self.data_actor = data
        self.max_staleness = 0 if algorithm.on_policy else max_staleness
        self.stall_timeout_s = stall_timeout_s
        self.key = ""

    def train_attempt(self, task: TrainTask, key: str, policy_of: Any) -> TrainResult:
        """Run ``task`` with its episodes and weights filed under ``key`` (one per attempt)."""
        self.key = key
        return self.train(task, policy_of)

    def _push(self, key: str, weights: Weights) -> int:
        return int(ray.get(self.params_actor.push.remote(key, [ray.put(weights)])))

    def train_by_rollouts(self, task: TrainTask, learner: Policy, trainer: Trainer,
                           opponents: MixedProfile) -> TrainResult:
        budget = task.budget
        kept = KeptWeights(budget)
        version = self._publish(self.key, learner, kept)
        ray.get(self.data_actor.open.remote(self.key))
        window: deque[float] = deque(maxlen=budget.window)
        start = last_data = time.monotonic()
        updates = 0
        metrics: dict[str, float] = {}
        try:
            while True:
                batch = ray.get(self.data_actor.take.remote(
                    self.key, min_items=budget.episodes_per_update,
                    min_version=version - self.max_staleness, timeout_s=TAKE_TIMEOUT_S))
                if batch.closed:
                    raise AttemptClosedError(f"learner {self.space.population}: training attempt {self.key} closed")
                now = time.monotonic()
                if batch.episodes:
                    last_data = now
                    window.extend(e.episode_return for e in batch.episodes)
                    for played, episode in zip(batch.versions, batch.episodes):
                        kept.played(played, [episode.episode_return])
                    metrics = {k: float(v) for k, v in trainer.update(list(batch.episodes)).items()}
                    updates += 1
                    version = self._publish(self.key, learner, kept)
                elif now - last_data > self.stall_timeout_s:
                    raise StalledError(f"learner {self.space.population}: no episodes for {self.stall_timeout_s:.0f} s")
                if budget_spent(budget, batch.env_steps, batch.played, now - start, window):
                    break
        finally:
            self.data_actor.close.remote(self.key)
        metrics.update({
            "train_time_s": time.monotonic() - start, "updates": float(updates),
            "window_return": float(np.mean(window)) if window else 0.0,
            "window_win_rate": float(np.mean(np.asarray(window) > 0)) if window else 0.0,
            "dropped_episodes": float(batch.dropped), **kept.metrics(),
        })
        return TrainResult(spec=task.spec, weights=kept.final(learner.get_weights()), env_steps=batch.env_steps,
                           episodes=batch.played, metrics=metrics)
