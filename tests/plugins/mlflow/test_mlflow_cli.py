"""The command line: bad tracker params, ``popmarl sync-mlflow``, plugin listing, and
that installing the plugin keeps ``popmarl`` light."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from popmarl.cli import main


def test_bad_tracker_param_exits_2_in_a_real_process(tmp_path: Path, write_config: Callable[..., Path],
                                                     run_cli: Callable[..., Any]) -> None:
    tracker = {"name": "mlflow", "params": {"experimnt": "x"}}
    result = run_cli("run", write_config(trackers=["console", tracker]), "--out", tmp_path / "run")
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1, result
    assert "trackers[1].params.experimnt: unknown key (did you mean 'experiment'?)" in result.stderr, result
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("tracker", "key"), [
    ({"name": "mlflow", "params": {"http_timeout_s": "soon"}}, "trackers[1].params.http_timeout_s: must be an integer"),
    ({"name": "mlflow", "params": {"tracking_uri": 5000}}, "trackers[1].params.tracking_uri: must be a string"),
    ({"name": "mlflow", "params": {"http_retries": -1}}, "trackers[1].params.http_retries: must be >= 0"),
    ({"name": "plots", "params": {"every": 0}}, "trackers[1].params.every: must be >= 1"),
    ({"name": "plots", "params": {"evry": 2}}, "trackers[1].params.evry: unknown key (did you mean 'every'?)"),
    ({"name": "plots", "params": {"max_share": 0}}, "trackers[1].params.max_share: must be > 0, got 0.0"),
    ({"name": "plots", "params": {"max_share": 1.5}}, "trackers[1].params.max_share: must be <= 1, got 1.5"),
])
def test_bad_tracker_params_exit_2(tracker: dict[str, Any], key: str, tmp_path: Path,
                                   write_config: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(write_config(trackers=["console", tracker])), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and key in err, err
    assert not (tmp_path / "run").exists()


def test_sync_of_a_missing_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync-mlflow", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err == f"popmarl: error: {tmp_path / 'nothing'}: no such run directory\n"
    (tmp_path / "empty").mkdir()
    assert main(["sync-mlflow", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err.startswith(f"popmarl: error: {tmp_path / 'empty' / 'config.yaml'}: missing")


def test_listed_in_help_and_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "sync-mlflow" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["sync-mlflow", "--help"])
    sync_help = capsys.readouterr().out
    assert "RUN_DIR" in sync_help and "--tracking-uri URI" in sync_help and "--experiment NAME" in sync_help
    assert main(["plugins"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["tracker", "mlflow", "popmarl-mlflow", "0.1.0"] in rows
    assert ["tracker", "plots", "popmarl-mlflow", "0.1.0"] in rows
    assert ["hooks", "mlflow", "popmarl-mlflow", "0.1.0"] in rows


def test_importing_the_plugin_imports_neither_mlflow_nor_matplotlib() -> None:
    code = ("import sys, popmarl_mlflow.commands, popmarl_mlflow.tracker, popmarl_mlflow.plots_tracker, "
            "popmarl_mlflow.sync, popmarl_mlflow.plots, popmarl_mlflow.drawing; "
            "print(sorted(m for m in ('mlflow', 'matplotlib', 'sqlalchemy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
