"""Tracker ``console``: a live progress display of the run.

On a terminal: a live panel redrawn each iteration; elsewhere (logs, CI): one plain line
per iteration. Each row shows the iteration (of ``stopping.max_iterations``), the number of
policies in each population, what tells the run's progress (:func:`popmarl.api.headline`:
NashConv where the env computes it; else each figure the metrics hold, labelled, with the
iteration it was measured at: approximate NashConv, the newest policies' oracle gains, the
main agents' Elo, win / draw / loss against random play, returns or a team's return), the
iteration's env steps per second (for an iteration that took none, exact oracles with
exact evaluation: the best responses computed and payoff entries evaluated exactly) and
the run's wall time at the end of that iteration, over every session of a resumed run.
The last line gives the same figures for the run's last iteration.

A closed stream (``popmarl run ... | head -2``) silences the display, never the run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.live import Live
from rich.table import Table

from popmarl.api import ProgressFigure, RunInfo, Tracker, headline, hookimpl


@attrs.frozen(kw_only=True)
class ConsoleConfig:
    """``live``: redraw in place on a terminal; ``stream``: stdout or stderr."""

    live: bool = True
    stream: str = attrs.field(default="stdout", validator=attrs.validators.in_(("stdout", "stderr")))


def _fmt(value: Any, spec: str = ".6f") -> str:
    return "–" if value is None else format(value, spec)


def _progress(lines: Sequence[Mapping[str, Any]]) -> str:
    """The labelled figures that tell the progress at the last of ``lines``."""
    return "; ".join(map(str, headline(lines)))


def _summary_figures(summary: Mapping[str, Any]) -> list[ProgressFigure]:
    """The figures of a run's end told by its summary alone (a resumed run that stopped
    before its first new iteration): NashConv, else each population's mean return."""
    iterations = summary.get("iterations")
    line: dict[str, Any] = {"iteration": iterations, "nash_conv": summary.get("nash_conv"),
                            **{f"mean_return/{p}": v for p, v in (summary.get("mean_returns") or {}).items()
                               if v is not None},
                            **{f"win_rate/{p}": v for p, v in (summary.get("win_rates") or {}).items()}}
    return headline([line]) if iterations else [ProgressFigure(label="progress", text="–")]


def _exact_work(best_responses: Any, entries: Any, *, short: bool = False) -> str | None:
    """What exact oracles and exact evaluation computed instead of env steps (None: nothing)."""
    if not best_responses and not entries:
        return None
    return f"{best_responses} BR, {entries} entries" if short else f"{best_responses} best responses, {entries} entries"


class _Console(Console):
    """A rich Console that goes quiet when its reader goes away: rich's default raises
    SystemExit, which would end the run for want of a display."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        # Later flushes of the stream (ours, or the interpreter's at exit) go to /dev/null
        # rather than raising again (the Python docs' "Note on SIGPIPE").
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.file.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError):  # a stream with no file descriptor: quiet is enough
            pass


class ConsoleTracker(Tracker):
    """Shows progress as the run goes, then the final summary and where the run directory is."""

    Config = ConsoleConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        stream = sys.stdout if self.config.stream == "stdout" else sys.stderr
        self.console = _Console(file=stream, highlight=False, soft_wrap=True)  # no hard breaks in logs
        self._live: Live | None = None
        self._history: list[Mapping[str, Any]] = []
        #: Each history line's progress, as printed (it depends on the lines before it).
        self._progress: list[str] = []

    @hookimpl
    def popmarl_run_start(self, run: RunInfo) -> None:
        self._max = run.config.get("stopping", {}).get("max_iterations")
        verb = "resuming" if run.resumed else "starting"
        self.console.print(f"popmarl: {verb} {run.scenario} in {run.run_dir} (seed {run.seed})")
        if self.config.live and self.console.is_terminal:
            self._live = Live(self._table(), console=self.console, refresh_per_second=4)
            self._live.start()

    def _table(self) -> Table:
        """The last 12 rows, headed as the newest row's work is."""
        table = Table(title="popmarl", expand=False)
        last = self._history[-1] if self._history else {}
        work = "exact work" if self._exact(last, short=True) else "env steps/s"
        for column in ("iteration", "policies", "progress", work, "elapsed"):
            table.add_column(column, justify="right")
        for m, progress in zip(self._history[-12:], self._progress[-12:]):
            it, sizes, _, elapsed = self._cells(m)
            table.add_row(it, sizes, progress, self._exact(m, short=True) or self._rate(m), elapsed)
        return table

    @staticmethod
    def _exact(m: Mapping[str, Any], *, short: bool = False) -> str | None:
        """An iteration's exact work, if it took no env steps."""
        if m.get("iteration_env_steps"):
            return None
        return _exact_work(m.get("exact_best_responses"), m.get("exact_entries"), short=short)

    @staticmethod
    def _rate(m: Mapping[str, Any]) -> str:
        return _fmt(m.get("steps_per_s"), ",.0f") if m.get("iteration_env_steps") else "–"

    def _cells(self, m: Mapping[str, Any]) -> tuple[str, str, str, str]:
        sizes = ", ".join(f"{k.split('/', 1)[1]} {v}" for k, v in m.items() if k.startswith("population_size/"))
        of = f"/{self._max}" if self._max else ""
        exact = self._exact(m)
        work = f"exact: {exact}" if exact else f"env steps/s {self._rate(m)}"
        return (f"{m['iteration']}{of}", sizes, work,
                _fmt(m.get("wall_time_s"), ".1f") + "s" * (m.get("wall_time_s") is not None))

    @hookimpl
    def popmarl_iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        self._history.append(metrics)
        self._progress.append(_progress(self._history))
        if self._live is not None:
            self._live.update(self._table())
            return
        it, sizes, work, elapsed = self._cells(metrics)
        self.console.print(f"iteration {it}  policies {sizes}  {self._progress[-1]}  {work}  elapsed {elapsed}")

    @hookimpl
    def popmarl_run_end(self, run: RunInfo, summary: Mapping[str, Any]) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        last = self._history[-1] if self._history else {}
        seen = last.get("iteration") is not None and last.get("iteration") == summary.get("iterations")
        progress = self._progress[-1] if seen else "; ".join(map(str, _summary_figures(summary)))
        exact = None if summary.get("env_steps") else _exact_work(summary.get("exact_best_responses"),
                                                                  summary.get("exact_entries"))
        work = f"exact: {exact}" if exact else f"env steps {summary.get('env_steps')}"
        self.console.print(
            f"popmarl: {summary.get('status')} after {summary.get('iterations')} iterations; {progress}; "
            f"{work}; {summary.get('wall_time_s', 0):.1f}s; summary in {run.run_dir}/summary.json"
        )
        where = Path(run.run_dir)
        self.console.print(f"popmarl: run directory {where.resolve()}; look at it with: popmarl show {where}")
