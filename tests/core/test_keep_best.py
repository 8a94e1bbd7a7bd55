"""``training.keep: best`` keeps the weights that played the best window: each version of
the weights is scored on its own episodes (popmarl.engine.kept_weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from testkit.run_files import read_metrics, read_npz, tree_digest
from learning_schedule import ScheduleAlgorithm

PAPER = np.eye(3)[1]


@pytest.fixture
def with_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("schedule", ScheduleAlgorithm))


def _config(keep: str, **training: Any) -> dict[str, Any]:
    # rock-paper-scissors; both learners train against the initial policy (rock, never a
    # random move) and play rock, paper, scissors with versions 1, 2, 3: version 2 alone
    # wins its episodes.
    return {"algorithm": {"name": "schedule", "params": {"schedule": [0, 1, 2]}},
            "training": {"max_env_steps": None, "max_episodes": 12, "episodes_per_update": 4, "window": 4,
                         "keep": keep, "opponent_epsilon": 0.0, **training},
            "stopping": {"max_iterations": 1}}


def test_keep_best_keeps_the_version_that_played_the_best_window(tmp_path: Path, runner_in: Any,
                                                                  with_schedule: None) -> None:
    runner_in(tmp_path, "best", **_config("best"))
    runner_in(tmp_path, "last", **_config("last"))
    for population in ("player_0", "player_1"):
        best = read_npz(tmp_path / "best" / "checkpoints" / "policies" / population / "1.npz")
        np.testing.assert_array_equal(best["probs"], PAPER)  # version 2, not the weights after its update
        last = read_npz(tmp_path / "last" / "checkpoints" / "policies" / population / "1.npz")
        np.testing.assert_array_equal(last["probs"], np.eye(3)[0])  # version 4: three updates
    line = read_metrics(tmp_path / "best")[-1]
    assert line["train/player_0/kept_version"] == 2 and line["train/player_0/kept_window_return"] == 1.0
    assert line["train/player_0/updates"] == 3
    assert "train/player_0/kept_version" not in read_metrics(tmp_path / "last")[-1]


def test_keep_best_needs_a_window_one_version_can_fill(tmp_path: Path, runner_in: Any,
                                                       with_schedule: None) -> None:
    with pytest.raises(popmarl.ConfigError, match=r"^training\.window: keep: best scores each version .* at most "
                                                  r"4, got 5$"):
        runner_in(tmp_path, **_config("best", window=5))
    assert tree_digest(tmp_path / "run") == {}
