"""Tracker ``jsonl``: every lifecycle event as one JSON line, for machines to follow.

Writes ``events.jsonl`` in the run directory (or ``params.path``): run start, each
policy added, each checkpoint, each iteration's end and the run's end, each with a UTC
timestamp. An iteration's metrics are not copied: its event names the iteration, whose
line in ``metrics.jsonl`` (part of every run directory, tracker or not) is line
``iteration`` (no file of a run directory repeats another).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from popmarl.api import RunInfo, Tracker, hookimpl, json_default


@attrs.frozen(kw_only=True)
class JsonlConfig:
    """``path``: the event file; relative paths are inside the run directory."""

    path: str = "events.jsonl"


class JsonlTracker(Tracker):
    """Appends one JSON object per hook call to the event file."""

    Config = JsonlConfig
    _path: Path

    def _write(self, event: str, **fields: Any) -> None:
        line = {"event": event, "time": time.time(), **fields}
        with open(self._path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, default=json_default) + "\n")

    @hookimpl
    def popmarl_run_start(self, run: RunInfo) -> None:
        self._path = Path(run.run_dir) / self.config.path
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._write("run_start", run_dir=run.run_dir, scenario=run.scenario, seed=run.seed,
                    start_iteration=run.start_iteration, resumed=run.resumed)

    @hookimpl
    def popmarl_policy_added(self, run: RunInfo, population: str, policy_id: str) -> None:
        self._write("policy_added", population=population, policy_id=policy_id)

    @hookimpl
    def popmarl_checkpoint(self, run: RunInfo, path: str) -> None:
        self._write("checkpoint", path=path)

    @hookimpl
    def popmarl_iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        self._write("iteration_end", iteration=iteration)

    @hookimpl
    def popmarl_run_end(self, run: RunInfo, summary: Mapping[str, Any]) -> None:
        self._write("run_end", status=summary.get("status"), iterations=summary.get("iterations"))
