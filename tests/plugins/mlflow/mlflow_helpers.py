"""Helpers of the popmarl-mlflow tests: a real ``mlflow server`` subprocess, in-process
run configs, and queries of what MLflow holds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

#: A small run: rock-paper-scissors, exact best responses, uniform meta-solver.
BASE: dict[str, Any] = {
    "env": {"name": "matrix", "params": {"game": "rps"}},
    "algorithm": {"name": "exact_matrix_br"},
    "solver": {"name": "uniform"},
    "stopping": {"max_iterations": 4},
}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The plots tracker drawing only at the end of a run (drawing costs ~0.5 s of CPU).
PLOTS_AT_END = {"name": "plots", "params": {"every": 1000}}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sqlite_uri(path: Path) -> str:
    return f"sqlite:///{path}"


class MlflowServer:
    """A real ``mlflow server`` subprocess (in its own process group) on 127.0.0.1, with a
    sqlite backend store and proxied artifacts under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "server.db"
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        """Start the server process (it answers some seconds later; see :meth:`wait`)."""
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        with open(self.root / "server.log", "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", sqlite_uri(self.db),
                 "--artifacts-destination", str(self.root / "artifacts"), "--host", "127.0.0.1",
                 "--port", str(self.port), "--workers", "1"],
                cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def wait(self, timeout: float = 120) -> None:
        """Wait until ``/health`` answers; raise with the server's log if it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server is not running: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"mlflow server did not answer within {timeout}s: {self.log_tail()}")

    def start(self) -> None:
        self.launch()
        self.wait()

    def kill(self) -> None:
        """Kill the server's process group (the server and its uvicorn worker) at once."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def log_tail(self) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


def config(trackers: list[Any], **overrides: Any) -> Any:
    """A validated RunConfig of :data:`BASE` with ``trackers`` and top-level ``overrides``."""
    from popmarl.config.schema import validate

    return validate({**BASE, "trackers": trackers, **overrides})


def mlflow_tracker(uri: str | None = None, **params: Any) -> dict[str, Any]:
    """The config entry of an mlflow tracker."""
    if uri is not None:
        params["tracking_uri"] = uri
    return {"name": "mlflow", "params": params}


def mlflow_run_id(run_dir: Path, uri: str) -> str:
    """The MLflow run id recorded in ``run_dir/mlflow_run.json`` for ``uri``."""
    record = json.loads((run_dir / "mlflow_run.json").read_text())
    return str(record[uri]["run_id"])


def client(uri: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def steps(uri: str, run_id: str, key: str = "nash_conv") -> list[int]:
    """The steps of every point of metric ``key``, sorted (duplicates kept)."""
    return sorted(m.step for m in client(uri).get_metric_history(run_id, key))


def artifact_paths(uri: str, run_id: str, path: str | None = None) -> set[str]:
    """Every artifact file of the run, recursively."""
    found: set[str] = set()
    for info in client(uri).list_artifacts(run_id, path):
        if info.is_dir:
            found |= artifact_paths(uri, run_id, info.path)
        else:
            found.add(info.path)
    return found


def iterations_in(run_dir: Path) -> list[int]:
    """The iterations of ``metrics.jsonl``."""
    return [json.loads(line)["iteration"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
