"""benchmarks/defaults.py runs end to end at tiny size and prints its JSON last line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("popmarl_tianshou")
pytest.importorskip("popmarl_openspiel")
pytest.importorskip("popmarl_pettingzoo")

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "defaults.py"


def test_defaults_benchmark_tiny_run(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--checks", "kuhn", "user_game", "--algorithms", "dqn",
         "--set", "stopping.max_iterations=1", "--set", "training.max_env_steps=500",
         "--out", str(tmp_path), "--json", "--jobs", "2"],
        capture_output=True, text=True, timeout=900, check=True)
    rows = json.loads(result.stdout.strip().splitlines()[-1])["results"]
    assert [(r["check"], r["algorithm"], r["seed"], r["iterations"]) for r in rows] == [
        ("kuhn", "dqn", 0, 1), ("user_game", "dqn", 0, 1)]
    kuhn, nim = rows
    assert {"figure", "target", "met", "wall_s", "cpu_s", "env_steps", "reached_at", "curve"} <= set(kuhn)
    assert kuhn["target"] == 0.1 and kuhn["met"] == (kuhn["reached_at"] is not None)
    assert 0.0 <= kuhn["figure"] <= 0.92 and len(kuhn["curve"]) == 1 and kuhn["env_steps"] > 0
    assert set(nim["seats"]) == {"first", "second"}
    assert nim["seats"]["first"]["perfect"] == 1.0
    for seat in nim["seats"].values():
        assert 0.0 <= seat["win"] <= 1.0 and seat["win"] + seat["loss"] <= 1.0
    assert (tmp_path / "kuhn-dqn-0" / "metrics.jsonl").exists()
