"""The ray backend's feed: a learner group trains on what the rollout workers play.

A train task runs in its learner actor through the core learner loop
(:func:`popmarl.api.engine.run_task`), as on every backend; what differs is its
:class:`~popmarl.api.engine.Feed`. :class:`RayFeed` does not play: it publishes each new
version of a learner's weights to the parameter server actor (put in the object store
once), and hands the loop whatever fresh batches the rollout workers have queued for the
task's learners on the episode server actor, one stream per learner
(``<attempt>/<learner key>``), dropping those played with weights more than
``max_staleness`` versions old. An on-policy learner
(:attr:`~popmarl.api.Algorithm.on_policy`: ppo, a2c) learns in lock step: it
*wants* ``episodes_per_update`` games of each version it publishes, the workers reserve
them before they play (``EpisodeServerActor.reserve``) and wait while it updates, so
almost nothing they play is dropped; one worker's games of a version are seeded as the
local backend's round of that version, so a synchronous run equals a local one. The
workers play every learner of the task in the same games (co-learning tasks too), so
each stream receives the same games.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from popmarl.api import PopmarlError, TrainTask
from popmarl.api.engine import Fed, Feed, Group, Learner, TeamWeights

#: How long one ``take`` waits for a full batch before the learner looks at its budget.
TAKE_TIMEOUT_S = 1.0
#: How long an on-policy learner waits for the games it wants before it asks again (a
#: worker that reserved some died with them).
REWANT_S = 10.0


class StalledError(PopmarlError):
    """No episodes reached a learner for too long."""


class AttemptClosedError(PopmarlError):
    """The driver ended the training attempt (e.g. a server it used was replaced)."""


def stream_of(attempt: str, key: str) -> str:
    """The name of learner ``key``'s stream (episodes and weights) in training attempt ``attempt``."""
    return f"{attempt}/{key}"


class RayFeed(Feed):
    """The episodes rollout worker actors play with the learners' published weights."""

    def __init__(self, *, params: Any, data: Any, attempt: str, task: TrainTask, group: Group, max_staleness: int,
                 stall_timeout_s: float = 300.0) -> None:
        self.params_actor = params
        self.data_actor = data
        self.attempt = attempt
        self.task = task
        self.streams = {spec.key: stream_of(attempt, spec.key) for spec, _ in group}
        self.staleness = {spec.key: 0 if learner.agent.algorithm.on_policy else max_staleness
                          for spec, learner in group}
        self.versions = dict.fromkeys(self.streams, 0)
        self.on_policy = {spec.key: learner.agent.algorithm.on_policy for spec, learner in group}
        self.stall_timeout_s = stall_timeout_s
        self._wanted_at = dict.fromkeys(self.streams, 0.0)
        self._opened = False
        self._dropped = 0
        self._last_data = time.monotonic()

    def publish(self, key: str, learner: Learner) -> tuple[int, TeamWeights | None]:
        weights = learner.weights()
        version = int(ray.get(self.params_actor.push.remote(self.streams[key], [ray.put(weights)])))
        self.versions[key] = version
        if self._opened:
            self._want(key)
        return version, weights

    def _want(self, key: str) -> None:
        """An on-policy learner's next batch: ``episodes_per_update`` games of its current version."""
        if self.on_policy[key]:
            ray.get(self.data_actor.want.remote(self.streams[key], *self._wish(key)))
            self._wanted_at[key] = time.monotonic()

    def _wish(self, key: str) -> tuple[int, int]:
        return self.versions[key], self.task.budget.episodes_per_update

    def oldest(self, key: str, version: int) -> int:
        return version - self.staleness[key]

    def next(self) -> Fed:
        if not self._opened:  # every learner's first weights are published: the workers may play
            # Each on-policy stream opens with its wish: opened first and wished for after, a
            # stream would take unlimited games of its first version from a worker in between
            # (while another learner's wish already held it back): games it then drops as stale.
            ray.get([self.data_actor.open.remote(stream, self._wish(key) if self.on_policy[key] else None)
                     for key, stream in self.streams.items()])
            self._opened = True
            self._wanted_at = dict.fromkeys(self.streams, time.monotonic())
        first, *others = self.streams
        wanted = self.task.budget.episodes_per_update
        batches = {first: self._take(first, wanted, TAKE_TIMEOUT_S)}
        for key in others:  # the same games reach every stream, a moment apart
            batches[key] = self._take(key, wanted if self.on_policy[key] else 1,
                                      TAKE_TIMEOUT_S if batches[first].parts else 0.0)
        now = time.monotonic()
        if any(batch.parts for batch in batches.values()):
            self._last_data = now
        elif now - self._last_data > self.stall_timeout_s:
            raise StalledError(f"learner {first}: no episodes for {self.stall_timeout_s:.0f} s")
        for key, batch in batches.items():
            if not batch.parts and self.on_policy[key] and now - self._wanted_at[key] > REWANT_S:
                self._want(key)  # the games it wanted were lost with a worker: ask again
        totals = batches[first]
        self._dropped = totals.dropped
        return Fed(trajectories={key: batch.parts for key, batch in batches.items()}, games=totals.games,
                   env_steps=totals.env_steps, episodes=totals.played)

    def _take(self, key: str, min_items: int, timeout_s: float) -> Any:
        batch = ray.get(self.data_actor.take.remote(
            self.streams[key], min_items=min_items, min_version=self.versions[key] - self.staleness[key],
            timeout_s=timeout_s))
        if batch.closed:
            raise AttemptClosedError(f"learner {key}: training attempt {self.attempt} closed")
        return batch

    def metrics(self) -> dict[str, float]:
        return {"dropped_episodes": float(self._dropped)}

    def close(self) -> None:
        for stream in self.streams.values():
            self.data_actor.close.remote(stream)
