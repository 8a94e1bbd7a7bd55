"""Tracker ``csv``: each iteration's metrics as one row of a CSV file.

The columns are the first iteration's metrics (numbers and strings); a later key the
file has no column for is left out. A resumed run appends to the file.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from popmarl.api import RunInfo, Tracker, hookimpl


@attrs.frozen(kw_only=True)
class CsvConfig:
    """``path``: the CSV file; a relative one is inside the run directory."""

    path: str = "metrics.csv"


class CsvTracker(Tracker):
    """Writes one row per ``iteration_end`` hook."""

    Config = CsvConfig
    config: CsvConfig
    _path: Path

    @hookimpl
    def popmarl_run_start(self, run: RunInfo) -> None:
        self._path = Path(run.run_dir) / self.config.path

    @hookimpl
    def popmarl_iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        row = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
        if self._path.exists():
            with open(self._path, newline="", encoding="utf-8") as f:
                columns = next(csv.reader(f))
            header = False
        else:
            columns, header = list(row), True
        with open(self._path, "a", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            if header:
                writer.writeheader()
            writer.writerow(row)
