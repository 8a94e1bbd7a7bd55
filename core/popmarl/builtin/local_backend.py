"""Backend ``local``: every task in this process, deterministic for a given seed.

A train task's learners act and update right here: :func:`popmarl.api.engine.run_task`
through the :class:`~popmarl.api.engine.Executor`, which holds the learners between tasks;
best-response tasks are answered by :func:`popmarl.engine.exact_answers.answer`.
"""

from __future__ import annotations

from collections.abc import Sequence

from popmarl.api import (Backend, BestResponseResult, BestResponseTask, Components, EvalResult, EvalTask, RunSetup,
                         TrainResult, TrainTask, Weights)
from popmarl.api.engine import Executor


class LocalBackend(Backend):
    """Runs tasks in-process with one :class:`~popmarl.api.engine.Executor`."""

    def start(self, setup: RunSetup, components: Components) -> None:
        self._executor = Executor(setup, components)

    def add_policy(self, policy_id: str, weights: Weights) -> None:
        self._executor.add_policy(policy_id, weights)

    def train(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        return [self._executor.train(task) for task in tasks]

    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        return self._executor.evaluate(tasks)

    def best_respond(self, tasks: Sequence[BestResponseTask]) -> list[BestResponseResult]:
        return [self._executor.best_respond(task) for task in tasks]
