"""Tracker ``mlflow``: one MLflow run per popmarl run.

At the start it finds or creates the run's MLflow run (its id is kept in the run
directory's ``mlflow_run.json``, so a resumed run continues it), logs the config as
params and the installed plugins as tags; each iteration logs the metrics line with
``step = iteration``; at the end it uploads the run directory's files and sets the status.

If MLflow cannot be reached, or fails mid-run, the run goes on: one warning, then the
tracker stops calling MLflow for this run. Nothing is lost, since the run directory holds
everything; ``popmarl sync-mlflow RUN_DIR`` uploads it later, without duplicates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from popmarl.api import RunInfo, Tracker, hookimpl
from popmarl_mlflow.connection import (
    DEFAULT_EXPERIMENT,
    HttpLimits,
    display_uri,
    limited,
    open_run,
    refused_store,
    resolve_tracking_uri,
    uninterrupted,
)
from popmarl_mlflow.sync import catch_up, run_tags
from popmarl_mlflow.writer import RunWriter

log = logging.getLogger("popmarl_mlflow")


def _check_store(uri: str | None) -> None:
    problem = refused_store(uri)
    if problem is not None:
        raise ValueError(problem)


@attrs.frozen(kw_only=True)
class MlflowConfig:
    """``tracking_uri``: an MLflow tracking URI (``http://host:5000``, ``sqlite:///path.db``);
    default ``sqlite:///<parent of the run directory>/mlflow.db``. ``experiment``: the
    MLflow experiment (created if missing). ``run_name``: default the run directory's
    name. ``log_checkpoints``: upload the frozen policies. ``http_timeout_s`` and
    ``http_retries``: per-request limits, so an outage costs seconds, not minutes."""

    tracking_uri: str | None = attrs.field(default=None, validator=lambda _i, _a, value: _check_store(value))
    experiment: str = DEFAULT_EXPERIMENT
    run_name: str | None = None
    log_checkpoints: bool = True
    http_timeout_s: int = attrs.field(default=10, validator=attrs.validators.ge(1))
    http_retries: int = attrs.field(default=2, validator=[attrs.validators.ge(0), attrs.validators.le(10)])


class MlflowTracker(Tracker):
    """Mirrors a run into MLflow through an explicit ``MlflowClient`` and run id (no
    global active run), so runs in one process do not interfere."""

    Config = MlflowConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._limits = HttpLimits(timeout_s=self.config.http_timeout_s, retries=self.config.http_retries)
        self._writer: RunWriter | None = None
        self._logged: set[int] | None = None  # None until caught up with metrics.jsonl
        self._failed = False
        self._uri = ""
        self._run_dir = ""

    def _guarded(self, action: Callable[[], None]) -> None:
        """Run ``action`` against MLflow unless it already failed; on failure warn once."""
        if self._failed:
            return
        try:
            with limited(self._limits), uninterrupted():
                action()
        except Exception as exc:  # any failure of the tracking backend must not stop the run
            self._failed = True
            self._writer = None
            reason = " ".join(str(exc).split())
            reason = reason if len(reason) <= 200 else reason[:197] + "..."
            log.warning(
                "popmarl-mlflow: MLflow at %s failed (%s: %s); the run goes on without it and keeps "
                "everything in %s; upload it later with: popmarl sync-mlflow %s --tracking-uri %s",
                display_uri(self._uri), type(exc).__name__, reason, self._run_dir, self._run_dir,
                display_uri(self._uri),
            )

    @hookimpl
    def popmarl_run_start(self, run: RunInfo) -> None:
        self._run_dir = run.run_dir
        self._uri = resolve_tracking_uri(self.config.tracking_uri, run.run_dir)

        def start() -> None:
            from mlflow import MlflowClient

            client = MlflowClient(tracking_uri=self._uri)
            opened = open_run(client, run_dir=run.run_dir, uri=self._uri,
                              experiment=self.config.experiment, run_name=self.config.run_name)
            writer = RunWriter(client, opened.run_id)
            writer.log_config(run.config)
            writer.set_tags(run_tags(run.run_dir, run.config))
            if not opened.created:
                writer.mark_running()
            self._writer = writer

        self._guarded(start)

    def _caught_up(self, writer: RunWriter) -> set[int]:
        """The iterations in MLflow; the first call of a session first logs those of
        ``metrics.jsonl`` that MLflow lacks (earlier outages, a resumed run)."""
        if self._logged is None:
            self._logged, _ = catch_up(writer, self._run_dir)
        return self._logged

    @hookimpl
    def popmarl_iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        def log_iteration() -> None:
            if self._writer is None:
                return
            logged = self._caught_up(self._writer)
            if iteration not in logged:
                self._writer.log_iterations([{**metrics, "iteration": iteration}])
                logged.add(iteration)

        self._guarded(log_iteration)

    @hookimpl(trylast=True)  # after the other trackers wrote their last files (plots, events)
    def popmarl_run_end(self, run: RunInfo, summary: Mapping[str, Any]) -> None:
        def finish() -> None:
            if self._writer is None:
                return
            self._caught_up(self._writer)
            self._writer.log_artifacts(run.run_dir, checkpoints=self.config.log_checkpoints)
            self._writer.finish(summary)

        self._guarded(finish)
