"""Configs and metrics lines become valid MLflow params, metrics and tags."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mlflow.utils.validation import _validate_metric_name, _validate_param_name

from popmarl_mlflow.connection import default_tracking_uri, display_uri, resolve_tracking_uri
from popmarl_mlflow.flatten import MAX_PARAM_VALUE, config_params, metric_values, mlflow_name


def test_config_params_are_dotted_and_yaml_like() -> None:
    params = config_params({
        "seed": 0, "env": {"name": "matrix", "params": {"game": "rps", "path": None, "exact": True}},
        "training": {"lr": 1.0e-3, "hidden": [128, 64]}, "solver": {"params": {}},
        "trackers": [{"name": "console"}, {"name": "mlflow", "params": {"experiment": "x"}}], "tags": [],
    })
    assert params == {
        "seed": "0", "env.name": "matrix", "env.params.game": "rps", "env.params.path": "null",
        "env.params.exact": "true", "training.lr": "0.001", "training.hidden.0": "128", "training.hidden.1": "64",
        "solver.params": "{}", "trackers.0.name": "console", "trackers.1.name": "mlflow",
        "trackers.1.params.experiment": "x", "tags": "[]",
    }


def test_long_values_and_odd_keys_fit_mlflow_limits() -> None:
    params = config_params({"agents": {"mapping": {"player_[01]*": "team", "../x": "y"}}, "blob": "z" * 10_000})
    assert len(params["blob"]) == MAX_PARAM_VALUE and params["blob"].endswith("...")
    for key in params:
        _validate_param_name(key)
    assert params["agents.mapping.player__01__"] == "team"


def test_metric_values_keep_numbers_only() -> None:
    line = {"iteration": 3, "nash_conv": None, "exploitability": 0.25, "population_size/player_0": 4,
            "meta_entropy/p 0": np.float64(1.5), "done": True, "note": "text", "meta_strategy/p": [0.5, 0.5],
            "train": {"p/0": {"loss": 0.1}}, "bad:name*": 2.0, "/lead//trail/": 1.0, "a/../b": 1.0}
    metrics = metric_values(line)
    assert metrics == {"iteration": 3.0, "exploitability": 0.25, "population_size/player_0": 4.0,
                       "meta_entropy/p 0": 1.5, "done": 1.0, "train/p/0/loss": 0.1, "bad_name_": 2.0,
                       "_/lead/_/trail/_": 1.0, "a/_/b": 1.0}
    for key in metrics:
        _validate_metric_name(key)


@pytest.mark.parametrize("name", ["", ".", "..", "/", "a//b", "ä/ü", "x" * 400, "ok/name-1.2 x"])
def test_mlflow_name_is_always_valid(name: str) -> None:
    _validate_metric_name(mlflow_name(name))
    assert len(mlflow_name(name)) <= 250


def test_tracking_uris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_tracking_uri(None, "runs/a") == default_tracking_uri("runs/a") == f"sqlite:///{tmp_path}/runs/mlflow.db"
    assert resolve_tracking_uri("sqlite:///x.db", "r") == f"sqlite:///{tmp_path}/x.db"
    assert resolve_tracking_uri("sqlite:////abs/x.db", "r") == "sqlite:////abs/x.db"
    assert resolve_tracking_uri("http://127.0.0.1:5000", "r") == "http://127.0.0.1:5000"
    assert resolve_tracking_uri("./mlruns", "r") == (tmp_path / "mlruns").as_uri()
    assert display_uri("https://me:secret@host:8443/mlflow") == "https://me:***@host:8443/mlflow"
