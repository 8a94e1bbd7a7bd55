"""Backend ``counting``: the local backend's work, counting the tasks it runs.

It runs every task in this process, as ``local`` does, with the
:class:`~popmarl.api.engine.Executor` that backends share, and counts the tasks of
each kind. At the end of the run it logs the counts and, if ``path`` is set, writes
them there as JSON. A backend that runs tasks elsewhere (workers, a cluster) has the
same five methods.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import attrs

from popmarl.api import (Backend, BestResponseResult, BestResponseTask, Components, EvalResult, EvalTask, RunSetup,
                         TrainResult, TrainTask, Weights, optional)
from popmarl.api.engine import Executor

log = logging.getLogger("popmarl")


@attrs.frozen(kw_only=True)
class CountingConfig:
    """``path``: a JSON file for the counts (relative to the current directory); none: log them only."""

    path: str | None = attrs.field(default=None, validator=optional(attrs.validators.instance_of(str)))


class CountingBackend(Backend):
    """Runs tasks in-process and counts them by kind."""

    Config = CountingConfig
    config: CountingConfig

    def start(self, setup: RunSetup, components: Components) -> None:
        self.counts: Counter[str] = Counter()
        self._executor = Executor(setup, components)

    def add_policy(self, policy_id: str, weights: Weights) -> None:
        self.counts["policies"] += 1
        self._executor.add_policy(policy_id, weights)

    def train(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        self.counts["train"] += len(tasks)
        return [self._executor.train(task) for task in tasks]

    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        self.counts["evaluate"] += len(tasks)
        return self._executor.evaluate(tasks)

    def best_respond(self, tasks: Sequence[BestResponseTask]) -> list[BestResponseResult]:
        self.counts["best_respond"] += len(tasks)
        return [self._executor.best_respond(task) for task in tasks]

    def close(self) -> None:
        counts = dict(sorted(getattr(self, "counts", Counter()).items()))
        log.info("popmarl: the counting backend ran %s", counts)
        if self.config.path is not None:
            Path(self.config.path).write_text(json.dumps(counts) + "\n", encoding="utf-8")
