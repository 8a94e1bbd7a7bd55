"""Tracker ``plots``: redraws the run's PNG plots in the run directory every ``every``
iterations (drawing at most ``max_share`` of the time) and at the end of the run.

``nash_conv.png``, ``payoffs.png`` and ``meta_strategies.png`` (see
:mod:`popmarl_mlflow.plots`); the ``mlflow`` tracker uploads them with the other files.
Drawing happens in a child process started with the run (see
:mod:`popmarl_mlflow.drawing`), off the loop's critical path and its interpreter: the
loop sends it what the history gained and goes on; requests made while it draws replace
each other (only the newest is drawn), and the run's end waits for the last drawing, so
the files are complete when the run returns. A plot that cannot be drawn, or a drawing
process that dies, is reported once and never stops the run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from popmarl.api import RunInfo, Tracker, hookimpl
from popmarl_mlflow.drawing import DrawingProcess, Update
from popmarl_mlflow.sync import read_metrics

log = logging.getLogger("popmarl_mlflow")


#: Seconds the first drawing is assumed to take (three plots, a first one costing more).
FIRST_DRAWING_S = 1.0


@attrs.frozen(kw_only=True)
class PlotsConfig:
    """``every``: redraw every this many iterations (and always at the end of the run).
    ``max_share``: a redraw waits until drawing, itself included, has taken at most this
    share of the run's time (a drawing costs a few tenths of a second of CPU, more as
    populations grow, on a core the loop may want; the first is assumed to take
    :data:`FIRST_DRAWING_S`); the end's drawing never waits."""

    every: int = attrs.field(default=10, validator=attrs.validators.ge(1))
    max_share: float = attrs.field(default=0.05, validator=[attrs.validators.gt(0), attrs.validators.le(1)])


def checkpoint_meta(run_dir: Path) -> dict[str, list[float]]:
    """Each population's current meta-strategy, from the last checkpoint (the mean of the
    mixtures of the seats that draw from it); ``{}`` where the checkpoint has none."""
    from popmarl.api import CheckpointError, PayoffTable

    seats: dict[str, list[np.ndarray]] = {}
    try:
        state = json.loads((run_dir / "checkpoints" / "state.json").read_text(encoding="utf-8"))
        _, ids = PayoffTable.load(run_dir / "payoffs.npz")
        with np.load(run_dir / "checkpoints" / str(state["arrays"]), allow_pickle=False) as arrays:
            for k, axis_ids in enumerate(ids):
                seats.setdefault(axis_ids[0].rsplit("/", 1)[0], []).append(arrays[f"meta_{k}"])
    except (OSError, ValueError, KeyError, IndexError, CheckpointError):
        return {}
    return {population: np.mean(mixtures, axis=0).tolist() for population, mixtures in seats.items()}


class PlotsTracker(Tracker):
    """Keeps the metrics history and meta-strategies of the run and has them drawn."""

    Config = PlotsConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lines: list[dict[str, Any]] | None = None  # None until read from metrics.jsonl
        self._sent = 0  # lines already sent to the drawing process
        self._meta: list[tuple[str, int, list[float]]] = []  # meta-strategies not yet sent
        self._requested: int | None = None  # the last iteration a drawing was requested for
        self._failed = False
        self._drawing: DrawingProcess | None = None
        self._start = time.monotonic()  # the run's start: drawing's share is of the time since

    @hookimpl
    def popmarl_run_start(self, run: RunInfo) -> None:
        self._guarded(self._start_drawing)  # now, so it starts and imports matplotlib meanwhile

    @hookimpl
    def popmarl_iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        self._guarded(self._start_drawing)  # a no-op once started (at the run's start)
        if self._failed:
            return
        run_dir = Path(run.run_dir)
        if self._lines is None:  # the history so far (a resumed run has one)
            self._lines = read_metrics(run_dir)
        if not self._lines or self._lines[-1].get("iteration") != iteration:
            self._lines.append({**metrics, "iteration": iteration})
        if not any(key.startswith("meta_strategy/") for key in metrics):
            self._guarded(lambda: self._record_meta(run_dir, iteration))
        if iteration % self.config.every == 0:
            self._request(run_dir, iteration)
        elif self._drawing is not None:
            self._drawing.poll()
            self._check()

    @hookimpl
    def popmarl_run_end(self, run: RunInfo, summary: Mapping[str, Any]) -> None:
        run_dir = Path(run.run_dir)
        if self._lines is None:
            self._lines = read_metrics(run_dir)
        last = self._lines[-1].get("iteration") if self._lines else None
        if self._requested is None or self._requested != last:
            self._request(run_dir, last)
        if self._drawing is not None:
            self._drawing.close()  # the files exist when the run returns
            self._check()
            self._drawing = None

    def _start_drawing(self) -> None:
        if self._drawing is None and not self._failed:
            self._drawing = DrawingProcess(max_share=self.config.max_share, start=self._start,
                                           estimate=FIRST_DRAWING_S)

    def _request(self, run_dir: Path, iteration: int | None) -> None:
        self._guarded(self._start_drawing)
        if self._failed or self._drawing is None:
            return
        lines = self._lines or []
        self._drawing.send(Update(run_dir=str(run_dir), lines=lines[self._sent:], meta=self._meta, draw=True))
        self._sent, self._meta = len(lines), []
        self._requested = iteration
        self._check()

    def _record_meta(self, run_dir: Path, iteration: int) -> None:
        for population, mixture in checkpoint_meta(run_dir).items():
            self._meta.append((population, iteration, mixture))

    def _check(self) -> None:
        """Report the drawing process's first failure, if any, and stop plotting."""
        if self._drawing is not None and self._drawing.error is not None and not self._failed:
            self._stop(self._drawing.error)

    def _guarded(self, action: Callable[[], None]) -> None:
        if self._failed:
            return
        try:
            action()
        except Exception as exc:  # a plot must never stop the run
            self._stop(f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")

    def _stop(self, reason: str) -> None:
        self._failed = True
        log.warning("popmarl-mlflow: plots stopped (%s); the run goes on without them", reason)
