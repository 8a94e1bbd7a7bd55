"""Training on the ray backend: every train task at once, its learners fed by the workers.

Training starts every task at once, each on the learner actor that holds its learners
(placed per learner key: :class:`~popmarl_ray.placement.Placement`). A task whose
learners train by rollouts opens one stream per learner on the episode server; from then
on the workers play batches of its games, every learner of the task in each (two calls
in flight per worker, spread over the tasks still training), until it returns its
result. Learners that do not train return inside their learner actor, fed nothing.
A dead worker or learner actor is replaced and its work retried (a learner carried over
from earlier tasks is rebuilt from its last state).

Deadlines (``timeout_s``): a worker busy for ``timeout_s`` without finishing a call, or
a learner that publishes no new weights for ``timeout_s`` (one that does not learn: whose call
takes longer), is taken for hung: killed, replaced, and its work retried, counted like
a death. A dead parameter or episode server is replaced; the training attempts in
flight then restart on fresh learners (their episodes and weights died with it).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import attrs
import ray

from popmarl.api import TrainResult, TrainTask, stream_seed
from popmarl_ray.actors import ExploreReport, writable
from popmarl_ray.attempts import Attempt, Call
from popmarl_ray.faults import (SERVER_PROBE_S, ActorGroup, Retries, Servers, actor_died, is_ray_failure, late, log,
                                outcome)
from popmarl_ray.placement import Placement
from popmarl_ray.spreading import wait_s

#: Explore calls kept in flight per worker, so a worker never waits for the driver.
EXPLORE_IN_FLIGHT = 2
#: How long one ``wait_open`` call waits before it is renewed.
WAIT_OPEN_S = 30.0


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
        self.answering = answering  # populations whose algorithm does not learn: they open no episode stream
        self.on_policy = on_policy  # populations whose learners take only games of their current weights
        self.learner_retries = Retries("learner", max_retries)
        self.worker_retries = Retries("rollout worker", max_retries)
        self.server_retries = Retries("ray servers", max_retries)
        self.calls: dict[ray.ObjectRef, Call] = {}
        self.load = [0] * len(workers)
        self.busy_since = [0.0] * len(workers)  # when each worker last started or finished a call
        self.attempts: list[Attempt] = []
        self.sent = 0
        self.cleanups: list[ray.ObjectRef] = []  # closes and drops on the servers, awaited before returning

    def run(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        running = [0] * len(self.learners)  # this call's tasks per learner actor
        self.attempts = []
        for t in tasks:
            slot = self.placement.slot(t, running)
            running[slot] += 1
            self.attempts.append(Attempt(task=t, slot=slot, task_ref=ray.put(t), serial=next(self.serials)))
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

    def _call(self, ref: ray.ObjectRef, kind: str, a: Attempt, slot: int, generation: int) -> None:
        self.calls[ref] = Call(kind, a, a.number, slot, generation, self.servers.generation)

    def _start(self, a: Attempt) -> None:
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

    def _restart(self, a: Attempt, *, replace: int | None) -> None:
        """End the attempt, replace its learner if it is the one of generation ``replace``,
        and start the next attempt."""
        self._end(a)
        if replace is not None:
            self.learners.replace(a.slot, replace)
        a.number += 1
        self._start(a)

    def _wait_open(self, a: Attempt) -> None:
        self._call(self.servers.data.wait_open.remote(a.streams[0], WAIT_OPEN_S), "open", a, a.slot, 0)

    def _end(self, a: Attempt) -> None:
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

    def _check_learner(self, a: Attempt, timeout_s: float) -> None:
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
    def _server_fault(self, call: Call | None) -> bool:
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
    def _on_train(self, ref: ray.ObjectRef, call: Call) -> None:
        a = call.attempt
        result, failure = outcome(ref)
        if failure is not None:
            if actor_died(failure) or not self._server_fault(call):
                self.learner_retries.failed(a.name, failure)
            self._restart(a, replace=call.generation if actor_died(failure) else None)
            return
        self._end(a)
        self.placement.done(a.task, a.slot, call.generation, result)
        a.result = owned(result)

    def _on_open(self, ref: ray.ObjectRef, call: Call) -> None:
        a = call.attempt
        state, failure = outcome(ref)
        if failure is not None:
            if not self._server_fault(call) and call.number == a.number and a.result is None:
                self._wait_open(a)  # a server that died restarted the attempt (and its wait)
            return
        if call.number != a.number or a.result is not None:
            return
        if state == "new":
            self._wait_open(a)
        a.collecting = state == "open"

    def _on_explore(self, ref: ray.ObjectRef, call: Call) -> None:
        a = call.attempt
        current_worker = call.generation == self.workers.generations[call.slot]
        current_attempt = call.number == a.number and a.result is None
        if current_worker:
            self.load[call.slot] -= 1
            self.busy_since[call.slot] = time.monotonic()
        if current_attempt:
            a.in_flight -= 1
        report: ExploreReport
        report, failure = outcome(ref)
        if failure is not None:
            if actor_died(failure):
                if self.workers.replace(call.slot, call.generation):  # once per dead worker
                    self.load[call.slot] = 0
                    self.worker_retries.failed(a.name, failure)
            elif self._server_fault(call):
                pass
            elif current_attempt and a.collecting:  # not the fallout of a learner's restart
                self.worker_retries.failed(a.name, failure)
            return
        if current_attempt:
            if report.accepted:
                a.played(report)
            else:
                a.collecting = False

    def _feed(self, collecting: list[Attempt]) -> None:
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
                seed = stream_seed(a.task.seed, "ray.explore", a.number, a.batches)
                ref = self.workers.handle(slot).explore.remote(a.key, a.task_ref, self._batch_size(a), seed)
                self._call(ref, "explore", a, slot, self.workers.generations[slot])
                if not self.load[slot]:
                    self.busy_since[slot] = time.monotonic()
                self.load[slot] += 1
                a.in_flight += 1


    def _batch_size(self, a: Attempt) -> int:
        """Games per explore call: a round's (``episodes_per_update``), or, for a task with
        an on-policy learner (which wants a round of each version in lock step), its share
        of the workers' so that all of them play the round at once."""
        per_update = a.task.budget.episodes_per_update
        if self._lock_step(a):
            return -(-per_update // len(self.workers))
        return per_update

    def _lock_step(self, a: Attempt) -> bool:
        """Whether ``a`` has an on-policy learner (the workers play in lock step with it)."""
        return any(spec.population in self.on_policy for spec in a.task.learners)


def owned(result: TrainResult) -> TrainResult:
    """``result`` with writable copies of its arrays (as the local backend gives them)."""
    return attrs.evolve(
        result, policies=tuple(attrs.evolve(p, weights=writable(p.weights)) for p in result.policies),
        states={k: attrs.evolve(s, weights=writable(s.weights)) for k, s in result.states.items()})
