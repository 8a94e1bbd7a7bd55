"""Handing batches of work to the free rollout workers: payoff entries and best responses.

Evaluation cuts the missing entries into about ``workers × chunks_per_worker``
contiguous batches of one seed each, each with its own seed (so a batch played twice,
after a failure, gives the same values), and gives the next batch to whichever worker
finishes first (:func:`spread`). Results are keyed by entry index and applied once.
Exact best responses are spread the same way, one task per call. A batch whose worker
died, or that is not done within ``timeout_s`` (the worker is then taken for hung:
killed and replaced), is sent again, counted as a retry.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import numpy as np
import ray

from popmarl.api import BestResponseResult, BestResponseTask, EvalResult, EvalTask, stream_seed
from popmarl_ray.faults import ActorGroup, Retries, actor_died, late, log, outcome


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
        batches += [[attrs.evolve(t, seed=stream_seed(seed, "ray.eval_batch", k)) for t in group[lo:hi]]
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
        value, failure = outcome(done[0])
        if failure is None:
            results.setdefault(batch, list(value))
        else:
            retries.failed(batch, failure)
            if actor_died(failure):
                workers.replace(slot, generation)
            pending.appendleft(batch)
        idle.append(slot)
    return [results[batch] for batch in range(len(batches))]
