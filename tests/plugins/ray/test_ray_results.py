"""The ray backend gives the runs of the local backend: the same populations and
NashConv with exact algorithms, the same run directory; learners learn on it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import ray

from popmarl.gametheory.payoffs import PayoffTable
from popmarl.runs.rundir import RunDirectory
from ray_helpers import KillingBackend, installed, ray_backend, run, with_bandit, with_killing_backend

KUHN = {"env": {"name": "openspiel", "params": {"game": "kuhn_poker"}}, "solver": {"name": "uniform"},
        "trackers": []}
needs_openspiel = pytest.mark.skipif(not installed("envs", "openspiel"), reason="popmarl-openspiel not installed")
needs_tianshou = pytest.mark.skipif(not installed("algorithms", "dqn"), reason="popmarl-tianshou not installed")


def _table(run_dir: Path) -> PayoffTable:
    return PayoffTable.load(run_dir / "payoffs.npz")[0]


@needs_openspiel
def test_kuhn_exact_br_equals_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_killing_backend(monkeypatch, {})  # kills nothing; notes the worker pids at each call
    config = {**KUHN, "algorithm": {"name": "exact_br"}, "stopping": {"max_iterations": 3}}
    local = run({**config, "backend": "local"}, tmp_path / "local")
    remote = run({**config, "backend": {"name": "ray_killing", "params": {"num_rollout_workers": 2}}}, tmp_path / "ray")
    assert KillingBackend.last is not None
    assert len(set(KillingBackend.last.seen_workers)) == 1  # the actors are created once and reused
    # exact_br is asked, not trained: 3 best_respond and 3+ evaluate calls
    assert KillingBackend.last.calls["best_respond"] == 3 and KillingBackend.last.calls["train"] == 0
    assert len(KillingBackend.last.seen_workers) >= 6
    assert remote["status"] == "completed" and remote["iterations"] == 3
    assert remote["populations"] == local["populations"]
    assert remote["nash_conv"] == pytest.approx(local["nash_conv"], abs=1e-12)
    assert remote["exploitability"] == pytest.approx(local["exploitability"], abs=1e-12)
    assert ray.is_initialized()  # the session's Ray is reused, not shut down
    np.testing.assert_allclose(_table(tmp_path / "ray").values, _table(tmp_path / "local").values, atol=1e-12)
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == sorted(p.name for p in (tmp_path / "local").iterdir())


@needs_openspiel
@needs_tianshou
def test_kuhn_dqn_psro_on_ray(tmp_path: Path) -> None:
    config = {**KUHN, "stopping": {"max_iterations": 2},
              "algorithm": {"name": "dqn", "params": {"hidden": [32], "learning_starts": 200, "batch_size": 32}},
              "training": {"max_env_steps": 1500, "episodes_per_update": 32},
              "evaluation": {"exact": "never", "episodes_per_entry": 200},
              "backend": ray_backend(num_rollout_workers=1)}
    summary = run(config, tmp_path / "ray")
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert [len(p["policies"]) for p in summary["populations"].values()] == [3, 3]
    assert 0.0 <= summary["nash_conv"] < 3.0  # Kuhn's payoffs are within [-2, 2]
    assert _table(tmp_path / "ray").filled.all()
    line = json.loads((tmp_path / "ray" / "metrics.jsonl").read_text().splitlines()[-1])
    for population in ("player_0", "player_1"):
        assert line[f"train/{population}/updates"] >= 3
        assert line[f"train/{population}/gradient_steps"] > 0
        assert "dropped_episodes" in {k.rsplit("/", 1)[1] for k in line if k.startswith(f"train/{population}/")}
    assert summary["env_steps"] >= 2 * 2 * 1500


def test_self_play_learners_learn_their_own_seat_on_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each seat is paid 1 for its own action only (seat 0 for action 0, seat 1 for 1). With
    self_play 1 a learner plays its own seat against a copy of itself and learns only from
    that seat: its bandit's values are exactly 1 and 0 (from both seats, about 0.5 each)."""
    with_bandit(monkeypatch)
    payoffs = np.zeros((2, 2, 2))
    payoffs[0, 0, :] = 1.0
    payoffs[1, :, 1] = 1.0
    np.save(tmp_path / "own.npy", payoffs)
    config = {"env": {"name": "matrix", "params": {"game": "file", "path": str(tmp_path / "own.npy")}},
              "algorithm": {"name": "bandit"}, "solver": {"name": "uniform"}, "stopping": {"max_iterations": 1},
              "training": {"max_env_steps": 2000, "episodes_per_update": 50, "self_play": 1.0},
              "trackers": [], "backend": ray_backend(num_rollout_workers=1)}
    summary = run(config, tmp_path / "run")
    assert summary["status"] == "completed"
    policies = RunDirectory(tmp_path / "run")
    for population, action in (("player_0", 0), ("player_1", 1)):
        weights = policies.load_policy(f"{population}/1")
        assert weights["n"].sum() > 0
        np.testing.assert_array_equal(weights["q"], np.eye(2)[action])
