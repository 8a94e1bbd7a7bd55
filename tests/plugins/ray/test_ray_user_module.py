"""A PettingZoo game of the user's own (``env.params.module``), in the directory the run
starts in, reaches the Ray actors: they rebuild the env in processes whose working
directory and ``sys.path`` are not the driver's, from the directory saved in the config."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import popmarl

from ray_helpers import ray_backend

pytest.importorskip("popmarl_pettingzoo")

USER_GAME = Path(__file__).parents[1] / "pettingzoo" / "user_nim.py"


def test_the_actors_import_the_users_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           request: pytest.FixtureRequest) -> None:
    games = tmp_path / "games"
    games.mkdir()
    (games / "blotto_ray.py").write_text(USER_GAME.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(games)
    monkeypatch.setattr(sys, "path", [*sys.path])  # undo what the driver's import adds
    request.addfinalizer(lambda: sys.modules.pop("blotto_ray", None))
    raw = {"env": {"name": "pettingzoo", "params": {"module": "blotto_ray:Nim", "kwargs": {"tokens": 5}}},
           "algorithm": "random", "solver": "uniform", "stopping": {"max_iterations": 1}, "trackers": [],
           "evaluation": {"episodes_per_entry": 8, "num_envs": 2, "exact": "never"},
           "backend": ray_backend(num_rollout_workers=1, num_cpus_per_learner=0.5)}
    summary = popmarl.run(popmarl.validate(raw), out=str(tmp_path / "run"))
    assert summary["status"] == "completed" and summary["iterations"] == 1
    assert summary["env_steps"] > 0  # episodes played on the rollout worker
