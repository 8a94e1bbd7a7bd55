"""An MLflow outage never stops a run: one warning, everything kept in the run
directory, and ``popmarl sync-mlflow`` uploads it later without duplicates."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

import popmarl
from mlflow_helpers import (
    PLOTS_AT_END,
    MlflowServer,
    artifact_paths,
    client,
    free_port,
    iterations_in,
    mlflow_run_id,
    mlflow_tracker,
    steps,
)
from popmarl.cli import main

RUN_FILES = {"config.yaml", "summary.json", "metrics.jsonl", "payoffs.npz"}
PLOTS = {"nash_conv.png", "payoffs.png", "meta_strategies.png"}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "popmarl_mlflow" and r.levelname == "WARNING"]


def check_complete_run_dir(run_dir: Path, iterations: int, files: set[str] = RUN_FILES) -> None:
    assert files <= {p.name for p in run_dir.iterdir()}
    assert iterations_in(run_dir) == list(range(1, iterations + 1))
    assert (run_dir / "checkpoints" / "policies" / "player_1" / f"{iterations}.npz").is_file()


def sync(run_dir: Path, uri: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``popmarl sync-mlflow RUN_DIR --tracking-uri URI``; its one output line."""
    assert main(["sync-mlflow", str(run_dir), "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out.strip()
    assert out.count("\n") == 0, out
    return out


def check_synced(uri: str, run_dir: Path, iterations: int, files: set[str] = RUN_FILES) -> None:
    run_id = mlflow_run_id(run_dir, uri)
    assert steps(uri, run_id) == list(range(1, iterations + 1))
    run = client(uri).get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["env.params.game"] == "rps"
    assert run.data.tags["popmarl.seed"] == "0"
    assert files | {"checkpoints/policies/player_0/0.npz"} <= artifact_paths(uri, run_id)


def test_unreachable_from_the_start(tmp_path: Path, fresh_store: Callable[[Path], str],
                                    run_popmarl: Callable[..., dict[str, Any]], caplog: pytest.LogCaptureFixture,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    run_dir = tmp_path / "run"
    start = time.monotonic()
    summary = run_popmarl(run_dir, [PLOTS_AT_END, mlflow_tracker(closed)], iterations=4)
    assert time.monotonic() - start < 60
    assert summary["status"] == "completed"
    [warning] = warnings_of(caplog)
    assert closed in warning and f"popmarl sync-mlflow {run_dir}" in warning and "\n" not in warning
    check_complete_run_dir(run_dir, 4, RUN_FILES | PLOTS)
    assert not (run_dir / "mlflow_run.json").exists()

    capsys.readouterr()
    assert main(["sync-mlflow", str(run_dir)]) == 1  # the config's tracking URI: still down
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"popmarl: error: sync-mlflow {run_dir}: "), err
    store = fresh_store(tmp_path / "store")
    out = sync(run_dir, store, capsys)
    assert "created MLflow run" in out and "4 new iterations" in out
    check_synced(store, run_dir, 4, RUN_FILES | PLOTS)
    out = sync(run_dir, store, capsys)  # again: the same run, nothing twice
    assert "updated MLflow run" in out and "0 new iterations" in out and "0 new params" in out
    check_synced(store, run_dir, 4, RUN_FILES | PLOTS)


def test_resume_with_tracking_back_catches_up(tmp_path: Path, fresh_store: Callable[[Path], str],
                                              run_popmarl: Callable[..., dict[str, Any]],
                                              caplog: pytest.LogCaptureFixture) -> None:
    run_dir = tmp_path / "run"
    run_popmarl(run_dir, [mlflow_tracker(f"http://127.0.0.1:{free_port()}")], iterations=2)
    assert len(warnings_of(caplog)) == 1
    store = fresh_store(tmp_path / "store")
    summary = run_popmarl(run_dir, [mlflow_tracker(store)], iterations=4, resume=True)
    assert summary["status"] == "completed" and len(warnings_of(caplog)) == 1
    assert steps(store, mlflow_run_id(run_dir, store)) == [1, 2, 3, 4]


def test_server_killed_mid_run(tmp_path: Path, mlflow_server: MlflowServer, monkeypatch: pytest.MonkeyPatch,
                               run_popmarl: Callable[..., dict[str, Any]], caplog: pytest.LogCaptureFixture,
                               capsys: pytest.CaptureFixture[str]) -> None:
    @attrs.frozen(kw_only=True)
    class KillConfig:
        at_iteration: int = 2

    class KillServer(popmarl.Tracker):
        """Kills the tracking server when an iteration ends."""

        Config = KillConfig

        @popmarl.hookimpl
        def popmarl_iteration_end(self, run: Any, iteration: int, metrics: Mapping[str, Any]) -> None:
            if iteration == self.config.at_iteration:
                mlflow_server.kill()

    monkeypatch.setattr(popmarl, "trackers", popmarl.trackers.with_component("kill_server", KillServer))
    run_dir = tmp_path / "run"
    try:
        summary = run_popmarl(run_dir, [mlflow_tracker(mlflow_server.uri, experiment="killed"),
                                        {"name": "kill_server", "params": {"at_iteration": 2}}], iterations=5)
        assert mlflow_server.proc is None
        assert summary["status"] == "completed"
        [warning] = warnings_of(caplog)
        assert mlflow_server.uri in warning and "sync-mlflow" in warning
        check_complete_run_dir(run_dir, 5)
    finally:
        mlflow_server.start()  # the same port and store: the same MLflow run
    run_id = mlflow_run_id(run_dir, mlflow_server.uri)
    before = steps(mlflow_server.uri, run_id)
    assert before and before == list(range(1, len(before) + 1)) and len(before) < 5
    out = sync(run_dir, mlflow_server.uri, capsys)
    assert f"{5 - len(before)} new iterations" in out and f"{mlflow_server.uri}/#/experiments/" in out
    check_synced(mlflow_server.uri, run_dir, 5)
    assert [r.info.run_id for r in client(mlflow_server.uri).search_runs(
        [client(mlflow_server.uri).get_experiment_by_name("killed").experiment_id])] == [run_id]
