"""MLflow 3 refuses directory stores (``./mlruns``): such a ``tracking_uri`` is a config
error before anything is written, not a run that goes on untracked, and ``sync-mlflow``
refuses it too, so its hint never names a store that cannot work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from popmarl.cli import main
from popmarl.config.schema import validate

from mlflow_helpers import BASE

REFUSED = "must be a database or server URI (sqlite:///PATH.db, http://HOST:PORT), got"


@pytest.mark.parametrize("uri", ["./mlruns", "mlruns", "/tmp/somewhere/mlruns", "file:///tmp/somewhere/mlruns"])
def test_a_directory_store_is_a_config_error(uri: str, tmp_path: Path, write_config: Callable[..., Path],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    tracker = {"name": "mlflow", "params": {"tracking_uri": uri}}
    assert main(["run", str(write_config(trackers=["console", tracker])), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"trackers[1].params.tracking_uri: {REFUSED} {uri!r}: MLflow 3 refuses the directory store" in err
    assert not (tmp_path / "run").exists()


def test_mlflow_allow_file_store_lets_it_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    config = validate({**BASE, "trackers": [{"name": "mlflow", "params": {"tracking_uri": "./mlruns"}}]})
    assert config.trackers[0].params["tracking_uri"] == "./mlruns"


def test_sync_refuses_a_directory_store(tmp_path: Path, run_popmarl: Callable[..., dict[str, Any]],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    run_popmarl(tmp_path / "run", [], iterations=1)
    assert main(["sync-mlflow", str(tmp_path / "run"), "--tracking-uri", "./mlruns"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("popmarl: error: sync-mlflow --tracking-uri: ")
    assert f"{REFUSED} './mlruns'" in err and "pass --tracking-uri sqlite:///PATH.db" in err
    assert not (tmp_path / "run" / "mlflow_run.json").exists()
