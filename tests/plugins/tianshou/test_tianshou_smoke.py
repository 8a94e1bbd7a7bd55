"""Smoke runs: every algorithm completes short PSRO runs through ``popmarl.run``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tianshou_helpers import ACTOR_CRITIC, ALGORITHMS, metrics, requires_nash, requires_openspiel, run_psro

from popmarl.runs.rundir import RunDirectory


def _check_run(summary, run_dir: Path, iterations: int) -> None:
    assert summary["status"] == "completed"
    assert summary["iterations"] == iterations
    for population in summary["populations"].values():
        assert len(population["policies"]) == iterations + 1
    rows = metrics(run_dir)
    assert [r["iteration"] for r in rows] == list(range(1, iterations + 1))
    assert all(r["iteration_env_steps"] > 0 for r in rows)
    for policy_file in (run_dir / "checkpoints").rglob("*.npz"):
        with np.load(policy_file, allow_pickle=False) as data:  # plain arrays, no pickles
            assert all(data[k].dtype != object for k in data.files)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_psro_on_a_matrix_game(tmp_path: Path, name):
    summary, run_dir = run_psro(
        tmp_path, name, env={"name": "matrix", "params": {"game": "rps"}}, algorithm={"name": name},
        solver={"name": "uniform"}, stopping={"max_iterations": 2},
        training={"max_env_steps": 1500, "num_envs": 16},
    )
    _check_run(summary, run_dir, 2)
    assert summary["nash_conv"] is not None and np.isfinite(summary["nash_conv"])


@requires_openspiel
@requires_nash
@pytest.mark.parametrize("name", ALGORITHMS)
def test_psro_on_kuhn_poker(tmp_path: Path, name):
    params = {"learning_starts": 200} if name == "dqn" else {}
    summary, run_dir = run_psro(
        tmp_path, name, env={"name": "openspiel", "params": {"game": "kuhn_poker"}},
        algorithm={"name": name, "params": params}, solver={"name": "nash"}, stopping={"max_iterations": 2},
        training={"max_env_steps": 1500},
    )
    _check_run(summary, run_dir, 2)
    assert 0.0 <= summary["nash_conv"] <= 3.0
    policy = json.loads((run_dir / "final_policy.json").read_text())
    assert policy  # the aggregated tabular policy over Kuhn's information states
    stored = RunDirectory(run_dir)
    for population in ("player_0", "player_1"):  # PSRO starts from the uniform policy, as OpenSpiel's does
        assert stored.load_policy(f"{population}/0")["initial.uniform"]
        assert not stored.load_policy(f"{population}/1")["initial.uniform"]


@pytest.mark.parametrize("name", ACTOR_CRITIC)
def test_psro_with_box_actions(tmp_path: Path, box_game, name):
    summary, run_dir = run_psro(
        tmp_path, name, env={"name": box_game}, algorithm={"name": name}, solver={"name": "uniform"},
        stopping={"max_iterations": 2}, training={"max_env_steps": 1000, "num_envs": 16},
        evaluation={"episodes_per_entry": 20},
    )
    _check_run(summary, run_dir, 2)
    assert summary["nash_conv"] is None  # sampled evaluation only
    with np.load(run_dir / "payoffs.npz", allow_pickle=False) as data:
        assert data["filled"].all() and np.all(data["payoffs"] <= 0.0)  # rewards are -(a - target)**2
