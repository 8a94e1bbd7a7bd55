"""Fixtures of the popmarl-mlflow tests: a real ``mlflow server`` on 127.0.0.1, local
sqlite stores, and in-process popmarl runs (so MLflow is imported once per session).

The server takes seconds to boot, so it is launched as soon as collection shows a test
needs it, and boots while the tests before that run. A fresh MLflow sqlite store costs
seconds of schema migrations, so one empty store is migrated per session and copied.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mlflow_helpers import MlflowServer, config, sqlite_uri

if importlib.util.find_spec("mlflow") is None or importlib.util.find_spec("popmarl_mlflow") is None:
    collect_ignore_glob = ["test_*.py"]  # the plugin is not installed here

_servers: list[MlflowServer] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if any("mlflow_server" in getattr(item, "fixturenames", ()) for item in session.items):
        server = MlflowServer(Path(tempfile.mkdtemp(prefix="popmarl-mlflow-server-")))
        server.launch()
        _servers.append(server)


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _servers:
        server = _servers.pop()
        server.kill()
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="session")
def mlflow_server() -> MlflowServer:
    """The session's real MLflow tracking server, answering. A test that kills it must
    :meth:`~MlflowServer.start` it again. Killed at the end of the session."""
    if not _servers:  # e.g. requested by a test that collection did not see
        server = MlflowServer(Path(tempfile.mkdtemp(prefix="popmarl-mlflow-server-")))
        server.launch()
        _servers.append(server)
    _servers[0].wait()
    return _servers[0]


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty, migrated MLflow sqlite store to copy."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(tracking_uri=sqlite_uri(path)).search_experiments()
    return path


@pytest.fixture
def fresh_store(template_db: Path) -> Callable[[Path], str]:
    """``fresh_store(folder)`` puts an empty store at ``folder/mlflow.db``; returns its URI."""

    def make(folder: Path) -> str:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(template_db, folder / "mlflow.db")
        return sqlite_uri(folder / "mlflow.db")

    return make


@pytest.fixture
def run_popmarl() -> Callable[..., dict[str, Any]]:
    """``run_popmarl(out, trackers, iterations=4, resume=False)`` runs popmarl in-process
    and returns its summary."""
    import popmarl

    def run(out: Path, trackers: list[Any], *, iterations: int = 4, resume: bool = False) -> dict[str, Any]:
        cfg = config(trackers, stopping={"max_iterations": iterations})
        if resume:
            return popmarl.run(cfg, resume=str(out))
        return popmarl.run(cfg, out=str(out))

    return run
