"""Tracker ``console``: a live progress display of the run.

On a terminal: a live panel redrawn each iteration; elsewhere (logs, CI): one plain line
per iteration. Each row shows the iteration (of ``stopping.max_iterations``), the number of
policies in each population, NashConv, the iteration's env steps per second (``–`` for an
iteration that took no env steps: exact oracles with exact evaluation) and the run's wall
time at the end of that iteration, over every session of a resumed run.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.live import Live
from rich.table import Table

from popmarl.hookspec import hookimpl
from popmarl.records import RunInfo
from popmarl.tracker import Tracker


@attrs.frozen(kw_only=True)
class ConsoleConfig:
    """``live``: redraw in place on a terminal; ``stream``: stdout or stderr."""

    live: bool = True
    stream: str = attrs.field(default="stdout", validator=attrs.validators.in_(("stdout", "stderr")))


def _fmt(value: Any, spec: str = ".6f") -> str:
    return "–" if value is None else format(value, spec)


def _fmt_nash_conv(value: float | None) -> str:
    """Six decimals, or scientific notation below 1e-4 (an exact equilibrium's 1e-12)."""
    return _fmt(value, ".2e" if value is not None and 0 < abs(value) < 1e-4 else ".6f")


class ConsoleTracker(Tracker):
    """Shows progress as the run goes, then the final summary and where the run directory is."""

    Config = ConsoleConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        stream = sys.stdout if self.config.stream == "stdout" else sys.stderr
        self.console = Console(file=stream, highlight=False, soft_wrap=True)  # no hard breaks in logs
        self._live: Live | None = None
        self._history: list[Mapping[str, Any]] = []

    @hookimpl
    def popmarl_run_start(self, run: RunInfo) -> None:
        self._max = run.config.get("stopping", {}).get("max_iterations")
        verb = "resuming" if run.resumed else "starting"
        self.console.print(f"popmarl: {verb} {run.scenario} in {run.run_dir} (seed {run.seed})")
        if self.config.live and self.console.is_terminal:
            self._live = Live(self._table(), console=self.console, refresh_per_second=4)
            self._live.start()

    def _table(self) -> Table:
        table = Table(title="popmarl", expand=False)
        for column in ("iteration", "policies", "nash_conv", "env steps/s", "elapsed"):
            table.add_column(column, justify="right")
        for m in self._history[-12:]:
            table.add_row(*self._cells(m))
        return table

    def _cells(self, m: Mapping[str, Any]) -> list[str]:
        sizes = ", ".join(f"{k.split('/', 1)[1]} {v}" for k, v in m.items() if k.startswith("population_size/"))
        of = f"/{self._max}" if self._max else ""
        # Exact oracles and exact evaluation take no env steps: no rate to show.
        rate = _fmt(m.get("steps_per_s"), ",.0f") if m.get("iteration_env_steps") else "–"
        return [f"{m['iteration']}{of}", sizes, _fmt_nash_conv(m.get("nash_conv")), rate,
                _fmt(m.get("wall_time_s"), ".1f") + "s" * (m.get("wall_time_s") is not None)]

    @hookimpl
    def popmarl_iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        self._history.append(metrics)
        if self._live is not None:
            self._live.update(self._table())
            return
        it, sizes, nash, sps, elapsed = self._cells(metrics)
        self.console.print(f"iteration {it}  policies {sizes}  nash_conv {nash}  env steps/s {sps}  elapsed {elapsed}")

    @hookimpl
    def popmarl_run_end(self, run: RunInfo, summary: Mapping[str, Any]) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        self.console.print(
            f"popmarl: {summary.get('status')} after {summary.get('iterations')} iterations; "
            f"nash_conv {_fmt_nash_conv(summary.get('nash_conv'))}; env steps {summary.get('env_steps')}; "
            f"{summary.get('wall_time_s', 0):.1f}s; summary in {run.run_dir}/summary.json"
        )
        where = Path(run.run_dir)
        self.console.print(f"popmarl: run directory {where.resolve()}; look at it with: popmarl show {where}")
