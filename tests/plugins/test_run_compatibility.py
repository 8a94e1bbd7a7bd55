"""Run directories written by the main of before joint trajectories and the one learner
loop (commit 0a989c3: ``tests/data/main-0a989c3``) resume: their learner checkpoints
(dqn's replay buffer and optimiser, ppo's trainer state) load into today's learners,
which train on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from popmarl.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "main-0a989c3"


@pytest.mark.parametrize(("name", "iterations"), [("psro_kuhn_dqn", 2), ("marl_spread_ppo", 1)])
def test_a_run_directory_of_the_earlier_main_resumes(tmp_path: Path, name: str, iterations: int) -> None:
    run_dir = tmp_path / name
    shutil.copytree(DATA / name, run_dir)
    before = len((run_dir / "metrics.jsonl").read_text().splitlines())
    assert main(["run", "--resume", str(run_dir), "--set", f"stopping.max_iterations={iterations + 1}"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iterations"] == iterations + 1
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == before + 1
    trained = [k for k in metrics[-1] if k.startswith("train/") and k.endswith("/updates")]
    assert trained and all(metrics[-1][k] > 0 for k in trained)
