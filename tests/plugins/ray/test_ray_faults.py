"""Faults: killed rollout workers and learners are replaced and their work retried, with
no payoff entry lost or counted twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from popmarl.payoffs import PayoffTable
from ray_helpers import MATRIX_EXACT, KillingBackend, kill_pid, run, with_bandit, with_killing_backend

#: Payoff entries filled by sampling on the workers (pure strategies: the samples are exact).
SAMPLED = {**MATRIX_EXACT, "evaluation": {"exact": "never", "episodes_per_entry": 2000}}


def _killing(**params: Any) -> dict[str, Any]:
    return {"name": "ray_killing", "params": {"num_rollout_workers": 2, **params}}


def _table(run_dir: Path) -> PayoffTable:
    return PayoffTable.load(run_dir / "payoffs.npz")[0]


def test_killed_workers_and_learner_are_replaced_and_nothing_is_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def kill_worker_now(backend: KillingBackend) -> None:  # dead before the call: the batches sent to it fail
        kill_pid(backend.worker_pids()[0])

    def kill_worker_during(backend: KillingBackend) -> None:  # dies while playing, if its batch is long enough
        kill_pid(backend.worker_pids()[1], delay_s=0.05)

    def kill_learner(backend: KillingBackend) -> None:  # its train task is retried on a new learner
        kill_pid(backend.learner_pids()["player_0"])

    with_killing_backend(monkeypatch, {("evaluate", 2): kill_worker_now, ("evaluate", 3): kill_worker_during,
                                       ("train", 2): kill_learner})
    killed = run({**SAMPLED, "backend": _killing()}, tmp_path / "killed")
    assert KillingBackend.last is not None and KillingBackend.last.replacements >= 2
    local = run({**SAMPLED, "backend": "local"}, tmp_path / "local")
    assert killed["status"] == "completed"
    table, reference = _table(tmp_path / "killed"), _table(tmp_path / "local")
    assert table.filled.all() and table.values.shape == (2, 4, 4)
    np.testing.assert_array_equal(table.values, reference.values)
    assert killed["populations"] == local["populations"]  # the new learner got every frozen policy
    assert killed["nash_conv"] == pytest.approx(local["nash_conv"], abs=1e-12)
    assert killed["env_steps"] == local["env_steps"]  # no entry played into the totals twice


def test_async_learners_learn_even_when_actors_die(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_bandit(monkeypatch)

    def kill_mid_training(backend: KillingBackend) -> None:
        kill_pid(backend.learner_pids()["player_1"], delay_s=0.3)
        kill_pid(backend.worker_pids()[0], delay_s=0.5)

    with_killing_backend(monkeypatch, {("train", 2): kill_mid_training})
    config = {**MATRIX_EXACT, "algorithm": {"name": "bandit"}, "stopping": {"max_iterations": 2},
              "training": {"max_env_steps": 4000, "episodes_per_update": 50, "window": 200},
              "backend": _killing(max_staleness=1)}
    summary = run(config, tmp_path / "run")
    assert summary["status"] == "completed"
    assert _table(tmp_path / "run").filled.all()
    assert [len(p["policies"]) for p in summary["populations"].values()] == [3, 3]
    first = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    for population in ("player_0", "player_1"):
        assert first[f"train/{population}/updates"] >= 5  # many updates while the workers played
        # A best response to a uniform opponent beats it (the bandit learned something).
        assert first[f"train/{population}/window_return"] > 0.1
