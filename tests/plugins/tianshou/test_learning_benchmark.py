"""``benchmarks/learning.py`` runs end to end at a tiny size: every algorithm and game it
is asked for gets its three throughputs, its torch floor and the bound Tianshou's loss
sets, and ``--json`` ends with them as one object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("popmarl_tianshou")
pytest.importorskip("shimmy")

SCRIPT = Path(__file__).parents[3] / "benchmarks" / "learning.py"


def test_learning_benchmark_json_last_line() -> None:
    steps = 400
    done = subprocess.run([sys.executable, str(SCRIPT), "--algorithms", "dqn", "a2c", "--games", "leduc", "tictactoe",
                           "--steps", str(steps), "--json"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(results) == {"dqn", "a2c"}
    for algorithm, games in results.items():
        assert set(games) == {"leduc", "tictactoe"}
        for row in games.values():
            for key in ("train_steps_per_s", "rollout_steps_per_s", "tianshou_steps_per_s"):
                assert row[key] > 0
            assert row["train_env_steps"] >= steps and row["tianshou_env_steps"] >= steps
            assert row["train_over_rollout"] == pytest.approx(row["train_steps_per_s"] / row["rollout_steps_per_s"])
            assert row["train_over_tianshou"] == pytest.approx(row["train_steps_per_s"] / row["tianshou_steps_per_s"])
            assert row["rollout_target"] == (0.25 if algorithm == "dqn" else 0.5)
            assert row["tianshou_target"] == 5.0
            assert ("replay_ratio" in row) == (algorithm == "dqn")
            # The floor adds the bare-torch gradient steps (none yet for dqn at this size:
            # it starts learning after 1000 decisions) to acting at the rollout's speed.
            assert (row["gradient_steps"] > 0) == (algorithm == "a2c")
            assert 0 < row["floor_steps_per_s"] <= row["rollout_steps_per_s"]
            assert row["floor_over_rollout"] == pytest.approx(row["floor_steps_per_s"] / row["rollout_steps_per_s"])
            assert row["train_over_floor"] == pytest.approx(row["train_steps_per_s"] / row["floor_steps_per_s"])
            assert row["floor_target"] == 0.75
            # The loss bound: the floor's time over acting at the rollout's speed plus the
            # CPU time inside Tianshou's _update_with_batch (none before dqn learns).
            loss_s = row["tianshou_loss_cpu_s"]
            assert (loss_s > 0) == (row["gradient_steps"] > 0)
            assert loss_s < row["train_env_steps"] / row["train_steps_per_s"]
            floor_s = row["train_env_steps"] / row["floor_steps_per_s"]
            acting_s = row["train_env_steps"] / row["rollout_steps_per_s"]
            assert row["loss_bound"] == pytest.approx(floor_s / (acting_s + loss_s))


def test_learning_benchmark_runs_reports_medians_and_each_run() -> None:
    """``--runs 3``: each setting measured three times; the row holds the medians, each
    run's rows, and train/floor's lowest and highest; the table says train/floor."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--algorithms", "a2c", "--games", "leduc", "tictactoe",
                           "--steps", "300", "--runs", "3", "--no-tianshou", "--json"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert "train/floor" in lines[0] and "medians of 3 runs" in lines[-2]
    for row in json.loads(lines[-1])["a2c"].values():
        runs = row["runs"]
        assert len(runs) == 3
        for key in ("train_steps_per_s", "rollout_steps_per_s", "floor_steps_per_s", "train_over_floor"):
            assert row[key] == pytest.approx(sorted(run[key] for run in runs)[1])
        ratios = [run["train_over_floor"] for run in runs]
        assert row["train_over_floor_range"] == [min(ratios), max(ratios)]


def test_learning_benchmark_bad_runs_is_one_line_exit_2() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--runs", "0"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2
    assert "--runs: must be at least 1" in done.stderr and "Traceback" not in done.stderr


def test_learning_benchmark_bad_param_is_one_line_exit_2() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--algorithm-param", "lr", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2
    assert "--algorithm-param: expected KEY=VALUE, got 'lr'" in done.stderr
    assert "Traceback" not in done.stderr


def test_learning_benchmark_unknown_param_is_one_line_exit_2() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--algorithms", "ppo", "--games", "leduc", "--algorithm-param",
                           "foo=1"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 2
    assert "error: algorithm.params.foo: unknown key; allowed: lr," in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
