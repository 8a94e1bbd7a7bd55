"""Handing work to actors: payoff-entry batches and training episodes.

Evaluation cuts the missing entries into about ``workers × chunks_per_worker``
contiguous batches, each with its own seed (so a batch played twice, after a failure,
gives the same values), and gives the next batch to whichever worker finishes first.
Results are keyed by entry index and applied once.

Training starts every population's learner at once. A learner that trains by rollouts
opens its queue on the episode server; from then on the workers play batches of its
episodes (two calls in flight per worker, spread over the learners still training)
until it returns its policy. A dead worker or learner is replaced and its work retried.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import ray

from popmarl.records import EvalResult, EvalTask, TrainResult, TrainTask
from popmarl_ray.actors import ExploreReport, writable
from popmarl_ray.faults import ActorGroup, Retries, actor_died, is_ray_failure

#: Explore calls kept in flight per worker, so a worker never waits for the driver.
EXPLORE_IN_FLIGHT = 2
#: How long one ``wait_open`` call waits before it is renewed.
WAIT_OPEN_S = 30.0


def derive_seed(seed: int, *keys: int) -> int:
    """A 31-bit seed determined by ``seed`` and ``keys``."""
    return int(np.random.SeedSequence([seed, *keys]).generate_state(1)[0] & 0x7FFFFFFF)


def split(tasks: Sequence[EvalTask], parts: int) -> list[list[EvalTask]]:
    """``tasks`` cut into ``parts`` contiguous batches of near-equal size, each seeded
    from the first task's seed and its batch number."""
    parts = max(1, min(parts, len(tasks)))
    bounds = np.linspace(0, len(tasks), parts + 1).round().astype(int)
    return [
        [attrs.evolve(t, seed=derive_seed(tasks[0].seed, k)) for t in tasks[lo:hi]]
        for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))
    ]


def evaluate(workers: ActorGroup, tasks: Sequence[EvalTask], *, chunks_per_worker: int,
             max_retries: int) -> list[EvalResult]:
    """Every entry of ``tasks``, batches spread over the free workers."""
    if not tasks:
        return []
    batches = split(tasks, len(workers) * chunks_per_worker)
    pending = deque(range(len(batches)))
    idle = deque(range(len(workers)))
    running: dict[ray.ObjectRef, tuple[int, int, int]] = {}  # ref -> (batch, slot, generation)
    results: dict[tuple[int, ...], EvalResult] = {}
    retries = Retries("rollout worker", max_retries)
    while pending or running:
        while pending and idle:
            batch, slot = pending.popleft(), idle.popleft()
            ref = workers.handle(slot).evaluate.remote(batches[batch])
            running[ref] = (batch, slot, workers.generations[slot])
        done, _ = ray.wait(list(running), num_returns=1)
        batch, slot, generation = running.pop(done[0])
        try:
            for result in ray.get(done[0]):
                results.setdefault(tuple(result.index), result)
        except Exception as exc:
            if not is_ray_failure(exc):
                raise
            retries.failed(batch, exc)
            if actor_died(exc):
                workers.replace(slot, generation)
            pending.appendleft(batch)
        idle.append(slot)
    return [results[tuple(t.index)] for t in tasks]


@attrs.define
class _Attempt:
    """One train task on its learner: the current attempt and its explore traffic."""

    task: TrainTask
    slot: int
    task_ref: ray.ObjectRef
    number: int = 0
    collecting: bool = False
    in_flight: int = 0
    batches: int = 0
    env_steps: int = 0
    episodes: int = 0
    result: TrainResult | None = None

    def played(self, report: ExploreReport) -> None:
        """Count an accepted batch; stop feeding once the budget's steps or episodes are
        played (the learner stops on the same totals, kept by the episode server)."""
        self.env_steps += report.env_steps
        self.episodes += report.episodes
        budget = self.task.budget
        if (budget.max_env_steps is not None and self.env_steps >= budget.max_env_steps) or (
                budget.max_episodes is not None and self.episodes >= budget.max_episodes):
            self.collecting = False

    @property
    def key(self) -> str:
        """The attempt's name on the episode and parameter servers."""
        return f"{self.task.spec.policy_id}#{self.number}"


@attrs.frozen
class _Call:
    """What an outstanding call was: its kind, its attempt (and that attempt's number
    then), the actor's slot and generation."""

    kind: str
    attempt: _Attempt
    number: int
    slot: int
    generation: int


class Training:
    """One ``train`` call: learners, the explore batches fed to them, failures."""

    def __init__(self, *, learners: ActorGroup, workers: ActorGroup, data: Any, params: Any,
                 slot_of: dict[str, int], max_retries: int) -> None:
        self.learners = learners
        self.workers = workers
        self.data = data
        self.params = params
        self.slot_of = slot_of
        self.learner_retries = Retries("learner", max_retries)
        self.worker_retries = Retries("rollout worker", max_retries)
        self.calls: dict[ray.ObjectRef, _Call] = {}
        self.load = [0] * len(workers)

    def run(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        attempts = [_Attempt(task=t, slot=self.slot_of[t.spec.population], task_ref=ray.put(t)) for t in tasks]
        for a in attempts:
            self._start(a)
        while any(a.result is None for a in attempts):
            done, _ = ray.wait(list(self.calls), num_returns=1)
            call = self.calls.pop(done[0])
            getattr(self, f"_on_{call.kind}")(done[0], call)
            self._feed([a for a in attempts if a.collecting and a.result is None])
        return [a.result for a in attempts if a.result is not None]

    def _start(self, a: _Attempt) -> None:
        a.collecting, a.in_flight, a.env_steps, a.episodes = False, 0, 0, 0
        slot, generation = a.slot, self.learners.generations[a.slot]
        self.calls[self.learners.handle(slot).train.remote(a.task_ref, a.key)] = _Call("train", a, a.number, slot,
                                                                                        generation)
        self._wait_open(a)

    def _wait_open(self, a: _Attempt) -> None:
        self.calls[self.data.wait_open.remote(a.key, WAIT_OPEN_S)] = _Call("open", a, a.number, a.slot, 0)

    def _end(self, a: _Attempt) -> None:
        """Close the attempt's queue and forget its weights on the servers."""
        self.data.close.remote(a.key)
        self.params.drop.remote(a.key)
        a.collecting = False

    def _on_train(self, ref: ray.ObjectRef, call: _Call) -> None:
        a = call.attempt
        try:
            result = ray.get(ref)
        except Exception as exc:
            if not is_ray_failure(exc):
                raise
            self._end(a)
            self.learner_retries.failed(a.task.spec.policy_id, exc)
            if actor_died(exc):
                self.learners.replace(call.slot, call.generation)
            a.number += 1
            self._start(a)
            return
        self._end(a)
        a.result = attrs.evolve(result, weights=writable(result.weights))  # as local gives them

    def _on_open(self, ref: ray.ObjectRef, call: _Call) -> None:
        state = ray.get(ref)
        a = call.attempt
        if call.number != a.number or a.result is not None:
            return
        if state == "new":
            self._wait_open(a)
        a.collecting = state == "open"

    def _on_explore(self, ref: ray.ObjectRef, call: _Call) -> None:
        a = call.attempt
        current_worker = call.generation == self.workers.generations[call.slot]
        current_attempt = call.number == a.number and a.result is None
        if current_worker:
            self.load[call.slot] -= 1
        if current_attempt:
            a.in_flight -= 1
        try:
            report: ExploreReport = ray.get(ref)
        except Exception as exc:
            if not is_ray_failure(exc):
                raise
            if actor_died(exc):
                if self.workers.replace(call.slot, call.generation):  # once per dead worker
                    self.load[call.slot] = 0
                    self.worker_retries.failed(a.task.spec.policy_id, exc)
            elif current_attempt and a.collecting:  # not the fallout of a learner's restart
                self.worker_retries.failed(a.task.spec.policy_id, exc)
            return
        if current_attempt:
            if report.accepted:
                a.played(report)
            else:
                a.collecting = False

    def _feed(self, collecting: list[_Attempt]) -> None:
        """Keep every worker busy with explore batches of the learners still collecting."""
        if not collecting:
            return
        for slot in range(len(self.workers)):
            while self.load[slot] < EXPLORE_IN_FLIGHT:
                a = min(collecting, key=lambda c: c.in_flight)
                a.batches += 1
                seed = derive_seed(a.task.seed, a.number, a.batches)
                ref = self.workers.handle(slot).explore.remote(a.key, a.task_ref, a.task.budget.episodes_per_update,
                                                               seed)
                self.calls[ref] = _Call("explore", a, a.number, slot, self.workers.generations[slot])
                self.load[slot] += 1
                a.in_flight += 1
