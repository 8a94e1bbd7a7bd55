"""Evaluation and exact best responses on Ray: ``popmarl eval`` runs through the backend
(each seat a mixture drawn per episode), its figures agree with the local backend's, and
PSRO's exact oracles are asked through ``best_respond`` on the workers, not trained."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import popmarl
from popmarl.cli import main
from popmarl.records import BestResponseResult, BestResponseTask, TrainResult, TrainTask
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
