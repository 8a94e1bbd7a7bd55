"""Slow checks (tox envs ``plugins`` and ``slow``): a run that starts its own Ray shuts it down; the
``marl`` scenario's co-training on a learner actor."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ray_helpers import ray_backend, run, with_bandit

pytestmark = pytest.mark.slow


def test_a_run_starts_its_own_ray_and_shuts_it_down(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import ray, popmarl
        from popmarl.config.schema import validate
        config = {{"env": {{"name": "matrix", "params": {{"game": "rps"}}}}, "algorithm": "exact_matrix_br",
                  "stopping": {{"max_iterations": 2}}, "trackers": [],
                  "backend": {{"name": "ray", "params": {{"num_cpus": 1, "num_rollout_workers": 1}}}}}}
        for k in range(2):
            summary = popmarl.run(validate(config), out={str(tmp_path)!r} + f"/run{{k}}")
            print(summary["status"], ray.is_initialized())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["completed", "False", "completed", "False"]


def test_marl_co_training_runs_on_a_learner_actor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_bandit(monkeypatch)
    config = {"scenario": "marl", "env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 4}},
              "algorithm": "bandit", "stopping": {"max_iterations": 2}, "training": {"max_env_steps": 2000},
              "trackers": [], "backend": ray_backend(num_rollout_workers=1)}
    summary = run(config, tmp_path / "run")
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert summary["env_steps"] >= 2 * 2000
