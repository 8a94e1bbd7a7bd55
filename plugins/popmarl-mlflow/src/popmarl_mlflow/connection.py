"""Where a run's MLflow data goes: the tracking URI, short HTTP retries, and the MLflow
run that belongs to a popmarl run directory (recorded in ``mlflow_run.json``)."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import attrs

from popmarl.api import write_json

if TYPE_CHECKING:
    from mlflow import MlflowClient

RECORD_FILE = "mlflow_run.json"
DEFAULT_EXPERIMENT = "popmarl"
#: Loggers quieted during our MLflow calls: routine work (creating a sqlite schema) at
#: INFO, and urllib3's per-retry warnings (the tracker reports an outage once itself).
_QUIET = {"mlflow.store.db.utils": logging.WARNING, "alembic": logging.WARNING,
          "urllib3.connectionpool": logging.ERROR}


def default_tracking_uri(run_dir: str | os.PathLike[str]) -> str:
    """A local sqlite store next to the run directory: ``sqlite:///<parent>/mlflow.db``."""
    return f"sqlite:///{Path(run_dir).resolve().parent / 'mlflow.db'}"


def resolve_tracking_uri(uri: str | None, run_dir: str | os.PathLike[str]) -> str:
    """``uri`` with local paths made absolute (so the URI means the same from any
    directory); ``None`` gives :func:`default_tracking_uri`."""
    if not uri:
        return default_tracking_uri(run_dir)
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return f"sqlite:///{Path(uri[len('sqlite:///'):]).resolve()}"
    if ":" in uri or uri == "databricks":
        return uri
    return Path(uri).resolve().as_uri()


def refused_store(uri: str | None) -> str | None:
    """Why MLflow 3 would refuse the store at ``uri``, or None: a plain directory
    (``./mlruns``, ``file:///...``) is its file store, refused unless
    ``MLFLOW_ALLOW_FILE_STORE=true``. Checked before a run starts, so that the run never
    goes on untracked and the ``sync-mlflow`` hint never names a refused store."""
    if not uri or uri == "databricks" or os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("true", "1"):
        return None
    if urlsplit(uri).scheme not in ("", "file"):
        return None
    return (f"must be a database or server URI (sqlite:///PATH.db, http://HOST:PORT), got {uri!r}: MLflow 3 "
            "refuses the directory store (or set MLFLOW_ALLOW_FILE_STORE=true)")


def display_uri(uri: str) -> str:
    """``uri`` without a password, for messages."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def local_artifact_root(uri: str) -> str | None:
    """Where new experiments of a sqlite store keep artifacts: ``mlartifacts`` beside the
    database (MLflow's own default is relative to the working directory). ``None`` for
    other stores, whose server or layout decides."""
    if uri.startswith("sqlite:///"):
        return str(Path(uri[len("sqlite:///"):]).parent / "mlartifacts")
    return None


@attrs.frozen(kw_only=True)
class HttpLimits:
    """How long one MLflow HTTP request may take: ``timeout_s`` per attempt, ``retries``
    extra attempts with a short backoff (MLflow's defaults retry for minutes)."""

    timeout_s: int = 10
    retries: int = 2

    def environ(self) -> dict[str, str]:
        return {
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(self.timeout_s),
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(self.retries),
            "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
            "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
            "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # no "View run at" lines on stdout
        }


@contextmanager
def limited(limits: HttpLimits) -> Iterator[None]:
    """Within the block, MLflow requests use ``limits`` and routine logs are quiet; the
    previous environment and log levels are restored after. (Process-wide while it lasts:
    other threads calling MLflow meanwhile see the same limits.)"""
    saved_env = {key: os.environ.get(key) for key in limits.environ()}
    loggers = [logging.getLogger(name) for name in _QUIET]
    saved_levels = [logger.level for logger in loggers]
    os.environ.update(limits.environ())
    for logger, level in zip(loggers, _QUIET.values(), strict=True):
        logger.setLevel(max(level, logger.getEffectiveLevel()))
    try:
        yield
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for logger, level in zip(loggers, saved_levels, strict=True):
            logger.setLevel(level)


#: The signals that stop a run (Ctrl-C; SIGTERM under ``popmarl run``).
_STOPPING = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Within the block, Ctrl-C and SIGTERM wait until it ends, then arrive as they would
    have: an MLflow write they cut short can leave a sqlite store locked, and the run's
    end (KILLED) could not be written. A second signal meanwhile arrives at once. The
    block is one bounded write (:func:`limited` bounds HTTP calls); only the main thread
    can hold signals, elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in _STOPPING}
    held: list[int] = []

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def hold(signum: int, frame: FrameType | None) -> None:
        if held:  # asked twice: stop now
            restore()
            signal.raise_signal(signum)
        held.append(signum)

    for sig in _STOPPING:
        signal.signal(sig, hold)
    try:
        yield
    finally:
        restore()
        for signum in held[:1]:
            signal.raise_signal(signum)


def read_record(run_dir: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """``mlflow_run.json``: tracking URI -> ``{"experiment_id", "run_id"}``."""
    try:
        data = json.loads((Path(run_dir) / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): dict(v) for k, v in data.items() if isinstance(v, Mapping)} if isinstance(data, dict) else {}


def write_record(run_dir: str | os.PathLike[str], uri: str, *, experiment_id: str, run_id: str) -> None:
    record = read_record(run_dir)
    record[uri] = {"experiment_id": experiment_id, "run_id": run_id}
    write_json(Path(run_dir) / RECORD_FILE, record)


@attrs.frozen(kw_only=True)
class OpenedRun:
    """An MLflow run found or created for a run directory."""

    run_id: str
    experiment_id: str
    created: bool

    def url(self, uri: str) -> str | None:
        """The run's page in the MLflow UI, for tracking servers."""
        if not uri.startswith(("http://", "https://")):
            return None
        return f"{display_uri(uri).rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"


def _run_exists(client: MlflowClient, run_id: str) -> bool:
    """Whether ``run_id`` is in the store and not deleted."""
    from mlflow.exceptions import MlflowException

    try:
        return bool(client.get_run(run_id).info.lifecycle_stage == "active")
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return False
        raise


def _experiment_id(client: MlflowClient, name: str, uri: str) -> str:
    """The id of experiment ``name``, created if missing (another process may race us)."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    try:
        return str(client.create_experiment(name, artifact_location=local_artifact_root(uri)))
    except MlflowException as exc:
        found = client.get_experiment_by_name(name)
        if exc.error_code != "RESOURCE_ALREADY_EXISTS" or found is None:
            raise
        return str(found.experiment_id)


def open_run(client: MlflowClient, *, run_dir: str | os.PathLike[str], uri: str, experiment: str,
             run_name: str | None) -> OpenedRun:
    """The MLflow run of ``run_dir`` in the store at ``uri``: the recorded one if it still
    exists, else a new run in ``experiment`` (created if needed), recorded at once."""
    entry = read_record(run_dir).get(uri)
    if entry and _run_exists(client, entry["run_id"]):
        return OpenedRun(run_id=entry["run_id"], experiment_id=entry["experiment_id"], created=False)
    experiment_id = _experiment_id(client, experiment, uri)
    run = client.create_run(experiment_id, run_name=run_name or Path(run_dir).resolve().name)
    write_record(run_dir, uri, experiment_id=experiment_id, run_id=run.info.run_id)
    return OpenedRun(run_id=run.info.run_id, experiment_id=experiment_id, created=True)
