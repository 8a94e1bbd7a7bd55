"""Every config the README and the docs show runs as shown (see tests/readme_configs.py for how a
fragment becomes a config, and the short overrides), here those on the local backend:
each completes, and each ``mlflow`` tracker records a finished MLflow run. A tracking
server at ``http://127.0.0.1:5000`` is this session's server; a sqlite store starts as a
copy of an empty migrated one (migrating costs seconds). tests/plugins/ray runs the Ray
blocks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import popmarl
from popmarl.config.schema import validate

from mlflow_helpers import client, config, mlflow_run_id
from popmarl_mlflow.connection import resolve_tracking_uri
from readme_configs import pages_text, readme_configs, short

LOCAL = [c for c in readme_configs() if not c.uses_ray]
README_SERVER = "http://127.0.0.1:5000"


def test_the_readme_shows_configs_of_both_kinds() -> None:
    assert len(LOCAL) >= 2 and any(c.uses_ray for c in readme_configs())


@pytest.mark.parametrize("shown", LOCAL, ids=[c.where for c in LOCAL])
def test_a_readme_config_runs(shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              request: pytest.FixtureRequest) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths in the config (sqlite:///runs/...) land here
    config = short(shown.config)
    config["trackers"] = [{"name": t} if isinstance(t, str) else t for t in config.get("trackers", [])]
    run_dir = tmp_path / "runs" / "readme"
    stores = []
    for tracker in config["trackers"]:
        if tracker["name"] != "mlflow":
            continue
        params = tracker.setdefault("params", {})
        if params.get("tracking_uri") == README_SERVER:
            params["tracking_uri"] = request.getfixturevalue("mlflow_server").uri
        uri = resolve_tracking_uri(params.get("tracking_uri"), run_dir)
        if uri.startswith("sqlite:///"):
            request.getfixturevalue("fresh_store")(Path(uri.removeprefix("sqlite:///")).parent)
        stores.append(uri)
    summary = popmarl.run(validate(config), out="runs/readme")
    assert summary["status"] == "completed" and summary["iterations"] == 1
    assert (run_dir / "summary.json").is_file()
    for uri in stores:
        run = client(uri).get_run(mlflow_run_id(run_dir, uri))
        assert run.info.status == "FINISHED" and run.data.tags["popmarl.status"] == "completed"


def test_the_readme_names_what_a_tracked_run_leaves_and_reads_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        fresh_store: Callable[[Path], str]) -> None:
    """Every file a run with the ``jsonl`` and ``mlflow`` trackers leaves, in its directory and
    beside it, is named in the README or the docs, and their ``mlflow runs list`` lists the run."""
    monkeypatch.chdir(tmp_path)
    fresh_store(tmp_path / "runs")
    popmarl.run(config(["jsonl", "mlflow"], stopping={"max_iterations": 1}), out="runs/rps")
    readme = pages_text()
    runs = tmp_path / "runs"
    left = [p.name for p in (runs / "rps").iterdir()] + [p.name for p in runs.iterdir() if p.name != "rps"]
    assert [name for name in left if name not in readme] == []
    (command,) = re.findall(r"^MLFLOW_TRACKING_URI=\S+ mlflow runs list --experiment-id \S+$", readme, re.MULTILINE)
    shell = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    listed = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=shell, capture_output=True, text=True, timeout=900)
    assert listed.returncode == 0, listed.stderr
    assert mlflow_run_id(runs / "rps", f"sqlite:///{runs / 'mlflow.db'}") in listed.stdout
