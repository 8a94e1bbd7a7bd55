"""What the asynchronous learner learns from: ``keep: best`` keeps the version that
played best (as on the local backend), and on-policy learners update only on episodes
of their current weights."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

import learning_schedule
import popmarl
from learning_schedule import ScheduleAlgorithm
from ray_helpers import ray_backend, run

ray.cloudpickle.register_pickle_by_value(sys.modules[learning_schedule.__name__])  # the actors cannot import it

RPS = {"env": {"name": "matrix", "params": {"game": "rps"}}, "solver": {"name": "uniform"}, "trackers": []}


@pytest.fixture
def with_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("schedule", ScheduleAlgorithm))


def _policy(run_dir: Path, policy: str) -> dict[str, np.ndarray]:
    with np.load(run_dir / "checkpoints" / "policies" / f"{policy}.npz") as data:
        return {k: data[k] for k in data.files}


def test_keep_best_keeps_the_version_that_played_best(tmp_path: Path, with_schedule: None) -> None:
    """Versions play rock, paper, scissors in turn against rock: every paper version wins
    all its episodes; the weights kept must be paper's, as on the local backend (the
    sliding window of the past kept the weights after the best window's update)."""
    config: dict[str, Any] = {
        **RPS, "algorithm": {"name": "schedule", "params": {"schedule": [0, 1, 2]}},
        "training": {"max_env_steps": None, "max_episodes": 160, "episodes_per_update": 4, "window": 4,
                     "keep": "best"},
        "stopping": {"max_iterations": 1}, "backend": ray_backend(num_rollout_workers=2),
    }
    summary = run(config, tmp_path / "ray")
    assert summary["status"] == "completed"
    for population in ("player_0", "player_1"):
        np.testing.assert_array_equal(_policy(tmp_path / "ray", f"{population}/1")["probs"], np.eye(3)[1])
