"""PSRO's train tasks with a conditional joint meta-solver (CE) and ``training.init:
previous``: one task per population and recommendation, each learner under a key of its
own; the first recommendation's learner is the population's, carried on and checkpointed,
the others start new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import popmarl
from popmarl.scenario.psro.strategies import JointResponses
from popmarl.scenario.psro.scenario import PSRO, PSROState
from popmarl.gametheory.metagame import check_payoffs
from popmarl.data.tasks import TrainTask
from popmarl.runs.rundir import RunDirectory
from learning_schedule import ScheduleAlgorithm


class UniformCE(popmarl.JointMetaSolver):
    """Every profile equally likely, best-responded to per recommendation: each policy of
    a seat is recommended (test only; no equilibrium)."""

    conditional = True

    @attrs.frozen(kw_only=True)
    class Config:
        pass

    def solve_joint(self, payoffs: np.ndarray) -> np.ndarray:
        shape = check_payoffs(payoffs).shape[1:]
        return np.full(shape, 1.0 / np.prod(shape))


FOUND = popmarl.Registries.current().with_component("solvers", "uniform_ce", UniformCE).with_component(
    "algorithms", "schedule", ScheduleAlgorithm)
POPULATIONS = ("player_0", "player_1")


def test_each_recommendation_has_a_learner_key_of_its_own_and_only_the_first_is_carried_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[list[TrainTask]] = []
    train_tasks = JointResponses.tasks

    def recording(self: JointResponses, psro: PSRO, state: PSROState, iteration: int) -> list[TrainTask]:
        made.append(train_tasks(self, psro, state, iteration))
        return made[-1]

    monkeypatch.setattr(JointResponses, "tasks", recording)
    config: dict[str, Any] = {
        "scenario": "psro", "env": {"name": "matrix", "params": {"game": "rps"}},
        "algorithm": {"name": "schedule", "params": {"schedule": [0, 1, 2]}}, "solver": "uniform_ce",
        "stopping": {"max_iterations": 3}, "trackers": [],
        "training": {"max_env_steps": None, "max_episodes": 4, "episodes_per_update": 4, "init": "previous"}}
    popmarl.run(popmarl.validate(config, registries=FOUND), out=str(tmp_path / "run"), registries=FOUND)
    assert len(made) == 3
    for iteration, tasks in enumerate(made, start=1):
        keys = [spec.key for task in tasks for spec in task.learners]
        assert len(set(keys)) == len(keys), keys
        for population in POPULATIONS:
            own = [task for task in tasks if task.learners[0].population == population]
            assert [task.learners[0].key for task in own] == [population] + [
                f"{population}/recommendation{j}" for j in range(1, len(own))]
            assert [task.return_state for task in own] == [True] + [False] * (len(own) - 1)
            first = "fresh" if iteration == 1 else "continue"
            assert [task.learners[0].init.kind for task in own] == [first] + ["fresh"] * (len(own) - 1)
    assert len(made[-1]) > len(POPULATIONS)  # several recommendations per population
    run_dir = RunDirectory(tmp_path / "run")
    saved, _ = run_dir.load_state()
    assert sorted(run_dir.load_learners(saved)) == list(POPULATIONS)
