"""Evaluation and exact best responses on Ray: ``popmarl eval`` runs through the backend
(each seat a mixture drawn per episode), its figures agree with the local backend's, and
PSRO's exact oracles are asked through ``best_respond`` on the workers, not trained."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from popmarl.interfaces.backend import Components, RunSetup
from popmarl.builtin.exact_matrix_br import ExactMatrixBR
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.cli import main
from popmarl.data.population import AgentMapping
from popmarl.data.learners import LearnerSpec
from popmarl.data.policies import PolicySpec
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import (
    BestResponseResult,
    BestResponseTask,
    TrainResult,
    TrainTask,
)
from popmarl.runs.runner import policy_spaces
from popmarl_ray import RayBackend

from ray_helpers import MATRIX_EXACT, ray_backend, run


def _eval(run_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["eval", str(run_dir), "--episodes", "3000", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])["populations"]


def test_eval_runs_on_the_runs_ray_backend_and_agrees_with_local(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    config = {**MATRIX_EXACT, "backend": ray_backend(), "evaluation": {"exact": "never", "episodes_per_entry": 50}}
    run(config, tmp_path / "run")
    on_ray, local = _eval(tmp_path / "run", capsys), _eval(tmp_path / "run", capsys, "--backend", "local")
    for population in ("player_0", "player_1"):
        assert on_ray[population]["episodes"] == local[population]["episodes"] == 3000
        assert not on_ray[population]["exact"]
        # sd of a frequency over 3000 games <= 0.0092, of the mean return (payoffs in [-1, 1]) <= 0.019
        for key, tolerance in (("win", 0.04), ("draw", 0.04), ("loss", 0.04), ("mean_return", 0.08)):
            assert on_ray[population][key] == pytest.approx(local[population][key], abs=tolerance), key


def test_exact_eval_on_ray_equals_local(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(MATRIX_EXACT, tmp_path / "run")
    local, on_ray = _eval(tmp_path / "run", capsys), _eval(tmp_path / "run", capsys, "--backend", "ray")
    assert all(r["exact"] for r in on_ray.values())
    for population, figures in local.items():
        assert on_ray[population] == pytest.approx(figures, abs=1e-12)


class CountingRay(RayBackend):
    """The ray backend, counting train and best-response tasks per call (test only)."""

    trains: list[int] = []
    questions: list[int] = []

    def train(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        type(self).trains.append(len(tasks))
        return super().train(tasks)

    def best_respond(self, tasks: Sequence[BestResponseTask]) -> list[BestResponseResult]:
        type(self).questions.append(len(tasks))
        return super().best_respond(tasks)


def test_exact_oracles_answer_on_the_workers_and_match_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "backends", popmarl.backends.with_component("counting_ray", CountingRay))
    monkeypatch.setattr(CountingRay, "trains", [])
    monkeypatch.setattr(CountingRay, "questions", [])
    local = run(MATRIX_EXACT, tmp_path / "local")
    on_ray = run({**MATRIX_EXACT, "backend": {"name": "counting_ray", "params": {"num_rollout_workers": 2}}},
                 tmp_path / "ray")
    assert CountingRay.questions == [2, 2, 2] and CountingRay.trains == []
    assert on_ray["meta_strategies"] == local["meta_strategies"] and on_ray["nash_conv"] == local["nash_conv"]


def test_a_train_task_of_an_algorithm_that_does_not_learn_plays_no_game() -> None:
    """Exact answers are asked with ``best_respond``, never by ``train``: a train task of an
    exact oracle (which does not learn) returns its policy as made, after no game, and on
    Ray leaves no episode stream behind."""
    env = MatrixEnv(game="rps")
    mapping = AgentMapping.resolve("per_player", env.agents)
    spaces = policy_spaces(env, mapping)
    setup = RunSetup(env_name="matrix", env_params={"game": "rps"}, mapping=mapping, spaces=spaces, seed=0,
                     algorithms={p: ("exact_matrix_br", {}) for p in spaces})
    backend = RayBackend(num_rollout_workers=1)
    backend.start(setup, Components(env=env, algorithms={p: ExactMatrixBR() for p in spaces}))
    try:
        for population in spaces:
            backend.add_policy(f"{population}/0", {"probs": np.array([0.0, 1.0, 0.0])})  # paper
        meta = MetaStrategy.pure({a: f"{a}/0" for a in env.agents})
        spec = LearnerSpec(key="player_0", population="player_0", seats=("player_0",), seed=1,
                           snapshot=PolicySpec(policy_id="player_0/1", population="player_0",
                                               algorithm="exact_matrix_br", iteration=1))
        (result,) = backend.train([TrainTask(learners=(spec,), seed=1, opponents=meta)])
        made = ExactMatrixBR().make_policy(space=spaces["player_0"], seed=1).get_weights()
        assert result.policies[0].weights["probs"].tolist() == made["probs"].tolist() != [0, 0, 1]  # not answered
        assert result.env_steps == 0 and result.episodes == 0
        assert backend.open_streams() == (0, 0)
    finally:
        backend.close()
