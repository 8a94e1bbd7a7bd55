"""Handing work to actors: payoff-entry batches, best responses and training episodes.

Evaluation cuts the missing entries into about ``workers × chunks_per_worker``
contiguous batches of one seed each, each with its own seed (so a batch played twice,
after a failure, gives the same values), and gives the next batch to whichever worker
finishes first (:func:`spread`). Results are keyed by entry index and applied once.
Exact best responses are spread the same way, one task per call.

Training starts every task at once, each on the learner actor that holds its learners
(placed per learner key: :class:`~popmarl_ray.placement.Placement`). A task whose
learners train by rollouts opens one stream per learner on the episode server; from then
on the workers play batches of its games, every learner of the task in each (two calls
in flight per worker, spread over the tasks still training), until it returns its
result. Exact oracles and learners that do not train answer inside their learner actor.
A dead worker or learner actor is replaced and its work retried (a learner carried over
from earlier tasks is rebuilt from its last state).

Deadlines (``timeout_s``): a worker busy for ``timeout_s`` without finishing a call, or
a learner that publishes no new weights for ``timeout_s`` (an exact oracle: whose call
takes longer), is taken for hung: killed, replaced, and its work retried, counted like
a death. A dead parameter or episode server is replaced; the training attempts in
flight then restart on fresh learners (their episodes and weights died with it).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import numpy as np
import ray

from popmarl.data.seeds import derive_seed
from popmarl.data.records import BestResponseResult, BestResponseTask, EvalResult, EvalTask, TrainResult, TrainTask
from popmarl_ray.actors import ExploreReport, writable
from popmarl_ray.feed import stream_of
from popmarl_ray.faults import SERVER_PROBE_S, ActorGroup, Retries, Servers, actor_died, is_ray_failure, late, log
from popmarl_ray.placement import Placement

#: Explore calls kept in flight per worker, so a worker never waits for the driver.
EXPLORE_IN_FLIGHT = 2
#: How long one ``wait_open`` call waits before it is renewed.
WAIT_OPEN_S = 30.0


def split(tasks: Sequence[EvalTask], parts: int) -> list[list[EvalTask]]:
    """``tasks`` cut into about ``parts`` contiguous batches of near-equal size, the
    tasks of each seed apart (each seed's share of the parts, one at least), every batch
    seeded from its tasks' seed and its number among that seed's batches."""
    by_seed: dict[int, list[EvalTask]] = {}
    for task in tasks:
        by_seed.setdefault(task.seed, []).append(task)
    batches = []
    for seed, group in by_seed.items():
        share = max(1, min(round(parts * len(group) / len(tasks)), len(group)))
        bounds = np.linspace(0, len(group), share + 1).round().astype(int)
        batches += [[attrs.evolve(t, seed=derive_seed(seed, k)) for t in group[lo:hi]]
                    for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
    return batches


def wait_s(starts: Iterable[float], timeout_s: float | None) -> float | None:
    """How long to wait for a result before the first of the deadlines ``start +
    timeout_s`` passes (None: no deadline)."""
    first = min(starts, default=None)
    if timeout_s is None or first is None:
        return None
    return max(0.0, first + timeout_s - time.monotonic())


def evaluate(workers: ActorGroup, tasks: Sequence[EvalTask], *, chunks_per_worker: int,
             max_retries: int, timeout_s: float | None = None) -> list[EvalResult]:
    """Every entry of ``tasks``, batches spread over the free workers; a batch not done
    within ``timeout_s`` is played again on a fresh worker."""
    if not tasks:
        return []
    done = spread(workers, "evaluate", split(tasks, len(workers) * chunks_per_worker), max_retries=max_retries,
                  timeout_s=timeout_s)
    results = {tuple(r.index): r for batch in done for r in batch}
    return [results[tuple(t.index)] for t in tasks]


def best_respond(workers: ActorGroup, tasks: Sequence[BestResponseTask], *, max_retries: int,
                 timeout_s: float | None = None) -> list[BestResponseResult]:
    """Every task's exact best response, one task per call, spread over the free workers."""
    done = spread(workers, "best_respond", [[task] for task in tasks], max_retries=max_retries, timeout_s=timeout_s)
    return [result for batch in done for result in batch]


def spread(workers: ActorGroup, method: str, batches: Sequence[Sequence[Any]], *, max_retries: int,
           timeout_s: float | None = None) -> list[list[Any]]:
    """Each batch's results from the workers' ``method``, in batch order: batches go to
    whichever worker is free; a batch whose worker died, or that is not done within
    ``timeout_s`` (the worker is then killed and replaced), is sent again."""
    pending = deque(range(len(batches)))
    idle = deque(range(len(workers)))
    running: dict[ray.ObjectRef, tuple[int, int, int, float]] = {}  # ref -> (batch, slot, generation, sent)
    results: dict[int, list[Any]] = {}
    retries = Retries("rollout worker", max_retries)
    while pending or running:
        while pending and idle:
            batch, slot = pending.popleft(), idle.popleft()
            ref = getattr(workers.handle(slot), method).remote(batches[batch])
            running[ref] = (batch, slot, workers.generations[slot], time.monotonic())
        done, _ = ray.wait(list(running), num_returns=1, timeout=wait_s((r[3] for r in running.values()), timeout_s))
        if not done:  # a deadline passed (measured at the wait: replacing a worker takes a while)
            assert timeout_s is not None
            now = time.monotonic()
            for ref, (batch, slot, generation, sent) in list(running.items()):
                if now - sent >= timeout_s:
                    del running[ref]
                    error = late("rollout worker", slot, f"one {method} batch", timeout_s)
                    retries.failed(batch, error)
                    log.warning("ray backend: %s; killed and replaced it", error)
                    workers.replace(slot, generation)
                    pending.appendleft(batch)
                    idle.append(slot)
            continue
        batch, slot, generation, _sent = running.pop(done[0])
        try:
            results.setdefault(batch, list(ray.get(done[0])))
        except Exception as exc:
            if not is_ray_failure(exc):
                raise
            retries.failed(batch, exc)
            if actor_died(exc):
                workers.replace(slot, generation)
            pending.appendleft(batch)
        idle.append(slot)
    return [results[batch] for batch in range(len(batches))]


@attrs.define
class _Attempt:
    """One train task on its learner actor: the current attempt and its explore traffic."""

    task: TrainTask
    slot: int
    task_ref: ray.ObjectRef  # the task as the workers see it
    serial: int  # unique in the run: names its attempts on the servers
    number: int = 0
    train_ref: ray.ObjectRef | None = None
    since: float = 0.0  # when the learner last showed progress (started, or published weights)
    version: int = 0  # the newest weights version it published, as last seen
    queued: int = 0  # the order its train call was sent in (calls to one learner run in turn)
    collecting: bool = False
    generation: int = 0  # of the learner actor running the current attempt
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

    def room(self, games: int) -> bool:
        """Whether another explore call of ``games`` games fits the budget: the steps and
        games reported plus those of the calls in flight (at the steps per game reported so
        far) stay below its caps. Without it the workers' calls in flight when the budget
        is reached overshoot it (two workers, an off-policy team: 9,600 env steps for a
        6,000 budget); with it the budget is kept within about one call's games."""
        budget = self.task.budget
        coming = self.in_flight * games
        if budget.max_episodes is not None and self.episodes + coming >= budget.max_episodes:
            return False
        if budget.max_env_steps is not None and self.episodes:
            steps_per_game = self.env_steps / self.episodes
            if self.env_steps + coming * steps_per_game >= budget.max_env_steps:
                return False
        return True

    @property
    def name(self) -> str:
        """The task's learners' keys."""
        return "+".join(spec.key for spec in self.task.learners)

    @property
    def key(self) -> str:
        """The attempt's name on the episode and parameter servers."""
        return f"{self.name}@{self.serial}#{self.number}"

    @property
    def streams(self) -> list[str]:
        """The attempt's streams on the episode and parameter servers, one per learner."""
        return [stream_of(self.key, spec.key) for spec in self.task.learners]


@attrs.frozen
class _Call:
    """What an outstanding call was: its kind, its attempt (and that attempt's number
    then), the actor's slot and generation, and the servers' generation."""

    kind: str
    attempt: _Attempt
    number: int
    slot: int
    generation: int
    servers: int


class Training:
    """One ``train`` call: learners, the explore batches fed to them, failures."""

    def __init__(self, *, learners: ActorGroup, workers: ActorGroup, servers: Servers, placement: Placement,
                 serials: Iterable[int], max_retries: int, timeout_s: float | None = None,
                 answering: frozenset[str] = frozenset(), on_policy: frozenset[str] = frozenset()) -> None:
        self.learners = learners
        self.workers = workers
        self.servers = servers
        self.placement = placement
        self.serials = iter(serials)
        self.timeout_s = timeout_s
        self.answering = answering  # populations whose algorithm answers exactly: they open no episode stream
        self.on_policy = on_policy  # populations whose learners take only games of their current weights
        self.learner_retries = Retries("learner", max_retries)
        self.worker_retries = Retries("rollout worker", max_retries)
        self.server_retries = Retries("ray servers", max_retries)
        self.calls: dict[ray.ObjectRef, _Call] = {}
        self.load = [0] * len(workers)
        self.busy_since = [0.0] * len(workers)  # when each worker last started or finished a call
        self.attempts: list[_Attempt] = []
        self.sent = 0
        self.cleanups: list[ray.ObjectRef] = []  # closes and drops on the servers, awaited before returning

    def run(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        running = [0] * len(self.learners)  # this call's tasks per learner actor
        self.attempts = []
        for t in tasks:
            slot = self.placement.slot(t, running)
            running[slot] += 1
            self.attempts.append(_Attempt(task=t, slot=slot, task_ref=ray.put(t), serial=next(self.serials)))
        for a in self.attempts:
            self._start(a)
        while any(a.result is None for a in self.attempts):
            done, _ = ray.wait(list(self.calls), num_returns=1, timeout=self._wait_s())
            if done:
                call = self.calls.pop(done[0])
                getattr(self, f"_on_{call.kind}")(done[0], call)
            else:
                self._check_deadlines()
            self._feed([a for a in self.attempts if a.collecting and a.result is None])
        # Returning once the servers dropped the attempts' state: the next call finds them
        # empty (an async actor may run a later call first). A dead server's failed call is
        # ready as well; the next call replaces that server.
        if self.cleanups:
            ray.wait(self.cleanups, num_returns=len(self.cleanups), timeout=SERVER_PROBE_S)
        return [a.result for a in self.attempts if a.result is not None]

    def _call(self, ref: ray.ObjectRef, kind: str, a: _Attempt, slot: int, generation: int) -> None:
        self.calls[ref] = _Call(kind, a, a.number, slot, generation, self.servers.generation)

    def _start(self, a: _Attempt) -> None:
        a.collecting, a.in_flight, a.env_steps, a.episodes = False, 0, 0, 0
        a.since, a.version = time.monotonic(), 0
        self.sent += 1
        a.queued = self.sent
        slot, generation = a.slot, self.learners.generations[a.slot]
        a.generation = generation
        task = self.placement.task_for(a.task, slot, generation, retry=a.number > 0)
        a.train_ref = self.learners.handle(slot).train.remote(a.task_ref if task is a.task else task, a.key)
        self._call(a.train_ref, "train", a, slot, generation)
        if not any(spec.population in self.answering for spec in a.task.learners):
            self._wait_open(a)

    def _restart(self, a: _Attempt, *, replace: int | None) -> None:
        """End the attempt, replace its learner if it is the one of generation ``replace``,
        and start the next attempt."""
        self._end(a)
        if replace is not None:
            self.learners.replace(a.slot, replace)
        a.number += 1
        self._start(a)

    def _wait_open(self, a: _Attempt) -> None:
        self._call(self.servers.data.wait_open.remote(a.streams[0], WAIT_OPEN_S), "open", a, a.slot, 0)

    def _end(self, a: _Attempt) -> None:
        """Close the attempt's streams and forget its weights on the servers."""
        for stream in a.streams:
            self.cleanups += [self.servers.data.close.remote(stream), self.servers.params.drop.remote(stream)]
        a.collecting = False

    # -- deadlines ----------------------------------------------------------------------
    def _wait_s(self) -> float | None:
        busy = [self.busy_since[slot] for slot in range(len(self.workers)) if self.load[slot]]
        return wait_s([*busy, *(a.since for a in self.attempts if a.result is None)], self.timeout_s)

    def _check_deadlines(self) -> None:
        """Replace the workers and learners past their deadline; retry their work."""
        assert self.timeout_s is not None
        timeout_s, now = self.timeout_s, time.monotonic()  # as at the wait: replacing an actor takes a while
        for slot in range(len(self.workers)):
            if self.load[slot] and now - self.busy_since[slot] >= timeout_s:
                generation = self.workers.generations[slot]
                mine = [c for c in self.calls.values() if c.kind == "explore" and c.slot == slot
                        and c.generation == generation]
                error = late("rollout worker", slot, "no explore call finished", timeout_s)
                self.worker_retries.failed(mine[0].attempt.name if mine else "explore", error)
                log.warning("ray backend: %s; killed and replaced it", error)
                self.workers.replace(slot, generation)  # its calls fail as a dead actor's: not counted again
                self.load[slot] = 0
                for a in self.attempts:  # the learners were starved, not hung
                    a.since = max(a.since, time.monotonic())
        for a in self.attempts:
            if a.result is None and now - a.since >= timeout_s:
                self._check_learner(a, timeout_s)

    def _check_learner(self, a: _Attempt, timeout_s: float) -> None:
        """Renew the learner's deadline if it published new weights since, or is still
        busy with an earlier attempt; else restart."""
        if any(b.result is None and b.slot == a.slot and b.queued < a.queued for b in self.attempts):
            a.since = time.monotonic()
            return
        try:
            versions = ray.get([self.servers.params.version.remote(s) for s in a.streams], timeout=SERVER_PROBE_S)
            version = sum(int(v) for v in versions)
        except Exception as exc:
            if not is_ray_failure(exc):
                raise
            self._server_fault(None)
            return
        if version > a.version:
            a.since, a.version = time.monotonic(), version
            return
        if a.train_ref is not None:
            if ray.wait([a.train_ref], timeout=0)[0]:
                return  # it finished since the wait returned: the loop takes its result
            call = self.calls.pop(a.train_ref, None)
            error = late("learner", a.slot, f"no new weights of {a.name}", timeout_s)
            self.learner_retries.failed(a.name, error)
            log.warning("ray backend: %s; killed and replaced it", error)
            self._restart(a, replace=None if call is None else call.generation)

    # -- servers --------------------------------------------------------------------------
    def _server_fault(self, call: _Call | None) -> bool:
        """Whether a failed call is the fallout of a dead server: one replaced since the
        call was made, or found dead now (then replaced). The attempts in flight lost
        their stream or weights with it: their streams are closed, so that their learners
        stop (the failed train call restarts the attempt, not counted as a retry)."""
        if call is not None and call.servers != self.servers.generation:
            return True
        replaced = self.servers.revive()
        if not replaced:
            return False
        self.server_retries.failed("servers", RuntimeError(f"the {' and the '.join(replaced)} died"))
        for a in self.attempts:
            if a.result is None:
                self.cleanups += [self.servers.data.close.remote(stream) for stream in a.streams]
                a.collecting = False
        return True

    # -- results --------------------------------------------------------------------------
    def _on_train(self, ref: ray.ObjectRef, call: _Call) -> None:
        a = call.attempt
        try:
            result = ray.get(ref)
        except Exception as exc:
            if not is_ray_failure(exc):
                raise
            if actor_died(exc) or not self._server_fault(call):
                self.learner_retries.failed(a.name, exc)
            self._restart(a, replace=call.generation if actor_died(exc) else None)
            return
        self._end(a)
        self.placement.done(a.task, a.slot, call.generation, result)
        a.result = owned(result)

    def _on_open(self, ref: ray.ObjectRef, call: _Call) -> None:
        a = call.attempt
        try:
            state = ray.get(ref)
        except Exception as exc:
            if not is_ray_failure(exc):
                raise
            if not self._server_fault(call) and call.number == a.number and a.result is None:
                self._wait_open(a)  # a server that died restarted the attempt (and its wait)
            return
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
            self.busy_since[call.slot] = time.monotonic()
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
                    self.worker_retries.failed(a.name, exc)
            elif self._server_fault(call):
                pass
            elif current_attempt and a.collecting:  # not the fallout of a learner's restart
                self.worker_retries.failed(a.name, exc)
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
                # An on-policy learner's lock step already plays only the games it wants.
                fits = [c for c in collecting if self._lock_step(c) or c.room(self._batch_size(c))]
                if not fits:
                    return
                a = min(fits, key=lambda c: c.in_flight)
                a.batches += 1
                seed = derive_seed(a.task.seed, a.number, a.batches)
                ref = self.workers.handle(slot).explore.remote(a.key, a.task_ref, self._batch_size(a), seed)
                self._call(ref, "explore", a, slot, self.workers.generations[slot])
                if not self.load[slot]:
                    self.busy_since[slot] = time.monotonic()
                self.load[slot] += 1
                a.in_flight += 1


    def _batch_size(self, a: _Attempt) -> int:
        """Games per explore call: a round's (``episodes_per_update``), or, for a task with
        an on-policy learner (which wants a round of each version in lock step), its share
        of the workers' so that all of them play the round at once."""
        per_update = a.task.budget.episodes_per_update
        if self._lock_step(a):
            return -(-per_update // len(self.workers))
        return per_update

    def _lock_step(self, a: _Attempt) -> bool:
        """Whether ``a`` has an on-policy learner (the workers play in lock step with it)."""
        return any(spec.population in self.on_policy for spec in a.task.learners)


def owned(result: TrainResult) -> TrainResult:
    """``result`` with writable copies of its arrays (as the local backend gives them)."""
    return attrs.evolve(
        result, policies=tuple(attrs.evolve(p, weights=writable(p.weights)) for p in result.policies),
        states={k: attrs.evolve(s, weights=writable(s.weights)) for k, s in result.states.items()})
