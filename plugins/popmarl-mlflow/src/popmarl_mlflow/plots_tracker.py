"""Tracker ``plots``: redraws the run's PNG plots in the run directory every ``every``
iterations (drawing at most ``max_share`` of the time) and at the end of the run.

``nash_conv.png``, ``payoffs.png`` and ``meta_strategies.png`` (see
:mod:`popmarl_mlflow.plots`); the ``mlflow`` tracker uploads them with the other files.
Drawing happens on a background thread, off the loop's critical path: the loop hands it
a snapshot of the history and goes on; requests made while it draws replace each other
(only the newest is drawn), and the run's end waits for the last drawing, so the files
are complete when the run returns. A plot that cannot be drawn is reported once and
never stops the run.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from popmarl.hookspec import hookimpl
from popmarl.records import RunInfo
from popmarl.tracker import Tracker
from popmarl_mlflow import plots
from popmarl_mlflow.sync import read_metrics

log = logging.getLogger("popmarl_mlflow")


#: Seconds the first drawing is assumed to take (matplotlib's import and three plots).
FIRST_DRAWING_S = 1.0


@attrs.frozen(kw_only=True)
class PlotsConfig:
    """``every``: redraw every this many iterations (and always at the end of the run).
    ``max_share``: a redraw waits until drawing, itself included, has taken at most this
    share of the run's time (a drawing costs a few tenths of a second of CPU, more as
    populations grow, and shares the interpreter with the loop; the first is assumed to
    take :data:`FIRST_DRAWING_S`); the end's drawing never waits."""

    every: int = attrs.field(default=10, validator=attrs.validators.ge(1))
    max_share: float = attrs.field(default=0.05, validator=[attrs.validators.gt(0), attrs.validators.le(1)])


@attrs.frozen(kw_only=True)
class Snapshot:
    """What one drawing needs, copied when it is requested (the loop goes on meanwhile)."""

    run_dir: Path
    lines: list[dict[str, Any]]
    meta: dict[str, dict[int, list[float]]]


def checkpoint_meta(run_dir: Path) -> dict[str, list[float]]:
    """Each population's current meta-strategy, from the last checkpoint (the mean of the
    mixtures of the seats that draw from it); ``{}`` where the checkpoint has none."""
    from popmarl.errors import CheckpointError
    from popmarl.payoffs import PayoffTable

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
    """Keeps the metrics history and meta-strategies of the run and draws them."""

    Config = PlotsConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lines: list[dict[str, Any]] | None = None  # None until read from metrics.jsonl
        self._meta: dict[str, dict[int, list[float]]] = {}
        self._requested: int | None = None  # the last iteration a drawing was requested for
        self._failed = False
        self._drawer: Drawer | None = None
        self._start = time.monotonic()  # the run's start: drawing's share is of the time since

    @hookimpl
    def popmarl_iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        run_dir = Path(run.run_dir)
        self._start_drawer()  # from the first iteration on, so it imports matplotlib meanwhile
        if self._lines is None:  # the history so far (a resumed run has one)
            self._lines = read_metrics(run_dir)
        if not self._lines or self._lines[-1].get("iteration") != iteration:
            self._lines.append({**metrics, "iteration": iteration})
        if not any(key.startswith("meta_strategy/") for key in metrics):
            self._guarded(lambda: self._record_meta(run_dir, iteration))
        if iteration % self.config.every == 0:
            self._request(run_dir, iteration)

    @hookimpl
    def popmarl_run_end(self, run: RunInfo, summary: Mapping[str, Any]) -> None:
        run_dir = Path(run.run_dir)
        if self._lines is None:
            self._lines = read_metrics(run_dir)
        last = self._lines[-1].get("iteration") if self._lines else None
        if self._requested is None or self._requested != last:
            self._request(run_dir, last)
        if self._drawer is not None:
            self._drawer.close()  # the files exist when the run returns
            self._drawer = None

    def _start_drawer(self) -> Drawer:
        if self._drawer is None:
            self._drawer = Drawer(lambda snapshot: self._guarded(lambda: self.draw(snapshot)),
                                  max_share=self.config.max_share, start=self._start, estimate=FIRST_DRAWING_S,
                                  prepare=lambda: self._guarded(plots.prepare))
        return self._drawer

    def _request(self, run_dir: Path, iteration: int | None) -> None:
        if self._failed:
            return
        self._start_drawer().request(Snapshot(run_dir=run_dir, lines=list(self._lines or ()),
                                      meta={p: dict(m) for p, m in self._meta.items()}))
        self._requested = iteration

    def _record_meta(self, run_dir: Path, iteration: int) -> None:
        for population, mixture in checkpoint_meta(run_dir).items():
            self._meta.setdefault(population, {})[iteration] = mixture

    @staticmethod
    def draw(snapshot: Snapshot) -> None:
        """Write every plot the snapshot's run directory has data for."""
        run_dir, lines = snapshot.run_dir, snapshot.lines
        plots.nash_conv(lines, run_dir / plots.NASH_CONV)
        if (run_dir / "payoffs.npz").is_file():
            plots.payoffs(run_dir / "payoffs.npz", run_dir / plots.PAYOFFS)
        plots.meta_strategies(plots.meta_history(lines) or snapshot.meta, run_dir / plots.META_STRATEGIES)

    def _guarded(self, action: Callable[[], None]) -> None:
        if self._failed:
            return
        try:
            action()
        except Exception as exc:  # a plot must never stop the run
            self._failed = True
            log.warning("popmarl-mlflow: plots stopped (%s: %s); the run goes on without them",
                        type(exc).__name__, " ".join(str(exc).split())[:200])


class Drawer:
    """A background thread drawing the newest requested snapshot while drawing stays
    within ``max_share`` of the time since ``start``: a request waits until the time
    spent drawing, plus the next drawing's estimate (the last one's duration; at first
    ``estimate``, for matplotlib's import), is at most that share; requests meanwhile
    replace each other. :meth:`close` draws what is pending at once. matplotlib is used
    only here and only through Agg figures (no pyplot, no global state), one drawing at
    a time."""

    def __init__(self, draw: Callable[[Snapshot], None], *, max_share: float = 1.0,
                 start: float | None = None, estimate: float = 0.0,
                 prepare: Callable[[], None] | None = None) -> None:
        self._draw = draw
        self._prepare = prepare
        self._share = max_share
        self._start = time.monotonic() if start is None else start
        self._estimate = estimate
        self._pending: Snapshot | None = None
        self._closing = False
        self._ready = threading.Condition()
        # A daemon: a run that dies without run_end must not hang on a drawing; the
        # files are written atomically, so a drawing cut off leaves the previous one.
        self._thread = threading.Thread(target=self._work, name="popmarl-plots", daemon=True)
        self._thread.start()

    def request(self, snapshot: Snapshot) -> None:
        """Draw ``snapshot`` next, in place of any request not yet started."""
        with self._ready:
            self._pending = snapshot
            self._ready.notify()

    def close(self) -> None:
        """Draw what is pending now, then stop the thread and wait for it."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        self._thread.join()

    def _work(self) -> None:
        spent, estimate = 0.0, self._estimate
        if self._prepare is not None:
            self._prepare()
        while True:
            with self._ready:
                while not self._closing:
                    if self._pending is None:
                        self._ready.wait()
                        continue
                    left = self._start + (spent + estimate) / self._share - time.monotonic()
                    if left <= 0:
                        break
                    self._ready.wait(left)
                snapshot, self._pending = self._pending, None
            if snapshot is None:  # closing, nothing left to draw
                return
            begun = time.monotonic()
            self._draw(snapshot)
            estimate = time.monotonic() - begun
            spent += estimate
