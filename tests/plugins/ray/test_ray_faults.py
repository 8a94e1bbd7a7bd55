"""Faults: killed or hung rollout workers and learners are replaced and their work
retried, with no payoff entry lost or counted twice; killed servers are replaced and the
run goes on."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl_ray.backend
from popmarl.gametheory.payoffs import PayoffTable
from ray_helpers import (
    MATRIX_EXACT,
    STOPPED,
    KillingBackend,
    SlowToCloseEpisodeServer,
    kill_pid,
    pid_alive,
    run,
    run_within,
    stop_pid,
    with_bandit,
    with_killing_backend,
)

#: Payoff entries filled by sampling on the workers (pure strategies: the samples are exact).
SAMPLED = {**MATRIX_EXACT, "evaluation": {"exact": "never", "episodes_per_entry": 2000}}


def _killing(**params: Any) -> dict[str, Any]:
    return {"name": "ray_killing", "params": {"num_rollout_workers": 2, **params}}


def _table(run_dir: Path) -> PayoffTable:
    return PayoffTable.load(run_dir / "payoffs.npz")[0]


#: The bandit learning a 8x8 matrix game for ``max_iterations`` PSRO iterations.
LEARNING = {**MATRIX_EXACT, "algorithm": {"name": "bandit"},
            "training": {"max_env_steps": 4000, "episodes_per_update": 50, "window": 200}}


@pytest.fixture(autouse=True)
def no_frozen_processes() -> Iterator[None]:
    """Kill whatever a test froze and Ray did not (a failed test must not leave one)."""
    yield
    for pid in STOPPED:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    STOPPED.clear()


def test_killed_workers_are_replaced_and_nothing_is_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def kill_worker_now(backend: KillingBackend) -> None:  # dead before the call: the batches sent to it fail
        kill_pid(backend.worker_pids()[0])

    def kill_worker_during(backend: KillingBackend) -> None:  # dies while playing, if its batch is long enough
        kill_pid(backend.worker_pids()[1], delay_s=0.05)

    def kill_answering_worker(backend: KillingBackend) -> None:  # its best response is asked again of a new one
        kill_pid(backend.worker_pids()[0])

    with_killing_backend(monkeypatch, {("evaluate", 2): kill_worker_now, ("evaluate", 3): kill_worker_during,
                                       ("best_respond", 2): kill_answering_worker})
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
        # Several updates while the workers played: how many depends on the machine's load
        # (a slower learner takes bigger batches; 4 of up to 40 on a loaded 2-core machine).
        assert first[f"train/{population}/updates"] >= 2
        # A best response to a uniform opponent beats it (the bandit learned something).
        assert first[f"train/{population}/window_return"] > 0.1


def test_a_hung_worker_is_killed_and_its_batch_played_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="popmarl_ray")
    frozen: list[int] = []

    def freeze_worker(backend: KillingBackend) -> None:  # hangs without dying: no error ever comes
        frozen.append(backend.worker_pids()[0])
        stop_pid(frozen[0])

    with_killing_backend(monkeypatch, {("evaluate", 2): freeze_worker})
    # Without the task timeout the run would wait for the frozen worker forever: the bound
    # is a hang guard, far above the seconds it takes.
    hung = run_within({**SAMPLED, "backend": _killing(task_timeout_s=2)}, tmp_path / "hung", 600)
    backend = KillingBackend.last
    assert backend is not None and backend.replacements == 1
    assert frozen[0] not in backend.seen_workers[-1] and not pid_alive(frozen[0])  # killed, and replaced
    local = run({**SAMPLED, "backend": "local"}, tmp_path / "local")
    assert hung["status"] == "completed"
    np.testing.assert_array_equal(_table(tmp_path / "hung").values, _table(tmp_path / "local").values)
    assert hung["env_steps"] == local["env_steps"]  # the late batch counted once
    assert "ray backend: rollout worker 0 hung: one evaluate batch for 2 s (task_timeout_s)" in caplog.text


def test_hung_learner_and_worker_are_replaced_while_training(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with_bandit(monkeypatch)
    frozen: list[int] = []

    def freeze(backend: KillingBackend) -> None:
        frozen.append(backend.learner_pids()["player_1"])  # it stops publishing weights
        frozen.append(backend.worker_pids()[0])  # its explore calls never return
        stop_pid(frozen[0])
        stop_pid(frozen[1], delay_s=0.2)

    with_killing_backend(monkeypatch, {("train", 1): freeze})
    summary = run_within({**LEARNING, "stopping": {"max_iterations": 1}, "backend": _killing(task_timeout_s=2)},
                         tmp_path / "run", 600)
    assert summary["status"] == "completed"
    backend = KillingBackend.last
    assert backend is not None and backend.replacements == 2
    assert not any(pid_alive(pid) for pid in frozen)
    assert [len(p["policies"]) for p in summary["populations"].values()] == [2, 2]
    first = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert first["train/player_1/window_return"] > 0.1  # the restarted attempt learned


def test_a_hung_actor_fails_the_run_with_one_line_once_out_of_retries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def freeze_worker(backend: KillingBackend) -> None:
        stop_pid(backend.worker_pids()[0])

    with_killing_backend(monkeypatch, {("evaluate", 2): freeze_worker})
    with pytest.raises(Exception, match=r"^ray backend: rollout worker failed 1 times: rollout worker 0 hung: one "
                                        r"evaluate batch for 1 s \(task_timeout_s\)$"):
        run_within({**SAMPLED, "backend": _killing(task_timeout_s=1, max_task_retries=0)}, tmp_path / "run", 600)


def test_killed_servers_are_replaced_and_the_run_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    with_bandit(monkeypatch)
    killed: dict[str, int] = {}

    def kill_server(name: str) -> Any:
        def action(backend: KillingBackend) -> None:  # once episodes flow to a learner (a stream is open)
            killed[name] = backend.server_pids()[name]

            def watch() -> None:
                while backend.open_streams()[1] == 0:
                    time.sleep(0.01)
                kill_pid(killed[name])
            threading.Thread(target=watch, daemon=True).start()
        return action

    with_killing_backend(monkeypatch, {("train", 1): kill_server("params"), ("train", 2): kill_server("data")})
    caplog.set_level(logging.WARNING, logger="popmarl_ray")
    summary = run_within({**LEARNING, "stopping": {"max_iterations": 2}, "backend": _killing()}, tmp_path / "run",
                         600)
    assert summary["status"] == "completed"
    backend = KillingBackend.last
    assert backend is not None and backend.replacements == 2  # both servers; no learner or worker
    assert not pid_alive(killed["params"]) and not pid_alive(killed["data"])
    assert "the parameter server died; replaced it" in caplog.text
    assert "the episode server died; replaced it" in caplog.text
    assert [len(p["policies"]) for p in summary["populations"].values()] == [3, 3]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(m[f"train/{p}/updates"] >= 5 for m in metrics for p in ("player_0", "player_1"))
    # Every training attempt's state was dropped from the servers once it ended.
    evaluations = [s for k, s in zip(backend.call_kinds, backend.seen_streams) if k == "evaluate"]
    assert evaluations and all(s == (0, 0) for s in evaluations)


def test_train_returns_once_the_servers_dropped_its_attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The episode server is an async actor: a close sent before the next call may run
    after it. ``train`` waits for its closes, so every evaluation after it finds the
    servers empty even when closing is slow (unawaited closes failed a CI run as a race)."""
    with_bandit(monkeypatch)
    monkeypatch.setattr(popmarl_ray.backend, "EpisodeServerActor", SlowToCloseEpisodeServer)
    with_killing_backend(monkeypatch, {})
    summary = run_within({**LEARNING, "stopping": {"max_iterations": 2}, "backend": _killing()}, tmp_path / "run", 600)
    assert summary["status"] == "completed"
    backend = KillingBackend.last
    assert backend is not None
    evaluations = [s for k, s in zip(backend.call_kinds, backend.seen_streams) if k == "evaluate"]
    assert len(evaluations) == 3 and all(s == (0, 0) for s in evaluations)


def test_marl_learner_rebuilt_from_its_last_state_when_its_actor_dies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """``marl`` co-trains both learners in player_0's learner actor (one task: fed by the
    rollout worker), carried on between iterations; killing that actor between
    iterations 1 and 2 replaces it, the learners are rebuilt from the states iteration 1
    returned, and the run says so."""
    with_bandit(monkeypatch)
    killed: list[int] = []

    def kill_learner_actor(backend: KillingBackend) -> None:
        assert sorted(backend.held_learners()["player_0"]) == ["player_0", "player_1"]
        killed.append(backend.learner_pids()["player_0"])
        kill_pid(killed[0])

    with_killing_backend(monkeypatch, {("train", 2): kill_learner_actor})
    caplog.set_level(logging.WARNING, logger="popmarl_ray")
    config = {"scenario": "marl", "env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 4}},
              "algorithm": "bandit", "stopping": {"max_iterations": 3}, "training": {"max_env_steps": 400},
              "trackers": [], "backend": _killing(num_rollout_workers=1)}
    summary = run_within(config, tmp_path / "run", 600)
    assert summary["status"] == "completed" and summary["iterations"] == 3
    backend = KillingBackend.last
    assert backend is not None and backend.replacements == 1 and not pid_alive(killed[0])
    for key in ("player_0", "player_1"):
        assert (f"ray backend: learner actor for player_0 died and was replaced; learner {key} rebuilt from its "
                "last checkpointed state") in caplog.text
    assert caplog.text.count("rebuilt from its last checkpointed state") == 2  # once, at the replacement
    # Rebuilt from its state, not anew: a bandit's weights count the games it learned
    # from, and each iteration's snapshot carries on from the one before (a learner
    # started afresh after the kill would count about as many as in iteration 1).
    stored = tmp_path / "run" / "checkpoints" / "policies"
    for population in ("player_0", "player_1"):
        counts = []
        for iteration in (1, 2, 3):
            (path,) = stored.glob(f"{population}/*{iteration}.npz")
            with np.load(path) as weights:
                counts.append(float(weights["n"].sum()))
        assert counts[1] > 1.5 * counts[0] and counts[2] > counts[1] + 0.5 * counts[0], counts
