"""Drawing the plots in a child process, so that matplotlib's import and the drawings
run beside the loop (on another core) instead of sharing its interpreter.

:class:`DrawingProcess` (the run's side) starts a fresh interpreter (never a ``fork``:
the run may hold torch or ray threads; and not multiprocessing's ``spawn`` either,
which re-runs the user's main script in the child: a script calling ``popmarl.run``
without an ``if __name__ == "__main__"`` guard would run twice), sends it what the
history gained since the last update and, at the end, waits for it to draw the last
one. The child (:func:`serve`) keeps the history and hands snapshots to a
:class:`Drawer`, which draws the newest within its share of the run's time; it reports
each drawing and the first failure back. The child exits as soon as the run's end of
the pipe closes, so it never outlives the run's process, however that ends.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import attrs

log = logging.getLogger("popmarl_mlflow")


@attrs.frozen(kw_only=True)
class Snapshot:
    """What one drawing needs, copied when it is requested (the loop goes on meanwhile)."""

    run_dir: Path
    lines: list[dict[str, Any]]
    meta: dict[str, dict[int, list[float]]]


def draw(snapshot: Snapshot) -> None:
    """Write every plot the snapshot's run directory has data for."""
    from popmarl_mlflow import plots

    run_dir, lines = snapshot.run_dir, snapshot.lines
    plots.nash_conv(lines, run_dir / plots.NASH_CONV)
    if (run_dir / "payoffs.npz").is_file():
        plots.payoffs(run_dir / "payoffs.npz", run_dir / plots.PAYOFFS)
    plots.meta_strategies(plots.meta_history(lines) or snapshot.meta, run_dir / plots.META_STRATEGIES)
    rated = plots.ratings_history(lines)
    if rated:
        plots.ratings(rated, run_dir / plots.RATINGS)


@attrs.frozen(kw_only=True)
class Update:
    """The run's news for the drawing process: metrics lines and meta-strategies
    ``(population, iteration, mixture)`` new since the last update; ``draw`` asks for a
    drawing of the history with them."""

    run_dir: str
    lines: list[dict[str, Any]]
    meta: list[tuple[str, int, list[float]]]
    draw: bool


#: How long the run's end waits for the last drawing before it stops the drawing process.
CLOSE_TIMEOUT_S = 120.0


class DrawingProcess:
    """The run's handle on the drawing process (see the module). :meth:`send` and
    :meth:`close` never raise for the child's sake: its failure, or its death, is kept
    in :attr:`error` (the first one only); :attr:`drawn` lists the iterations drawn."""

    def __init__(self, *, max_share: float, start: float, estimate: float) -> None:
        requests, to_child = os.pipe()
        from_child, results = os.pipe()
        self.error: str | None = None
        self.drawn: list[int | None] = []
        args = {"requests": requests, "results": results, "elapsed": time.monotonic() - start,
                "max_share": max_share, "estimate": estimate, "path": sys.path}
        try:
            # A session of its own: a Ctrl-C at the terminal stops the run, which then
            # has its last drawing made, rather than killing the drawing process too.
            self._process = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(args)],
                                             stdin=subprocess.DEVNULL, pass_fds=(requests, results),
                                             start_new_session=True)
        except BaseException:
            for fd in (requests, to_child, from_child, results):
                os.close(fd)
            raise
        os.close(requests)  # the child's ends: only the child holds them, so EOF means gone
        os.close(results)
        self._requests = Connection(to_child, readable=False)
        self._results = Connection(from_child, writable=False)

    @property
    def pid(self) -> int:
        return self._process.pid

    def send(self, update: Update) -> None:
        """Pass ``update`` on (pickled here: a few kB, the history's growth since the last)."""
        self.poll()
        if self.error is None:
            try:
                self._requests.send(update)
            except OSError:  # the child is gone; close() tells how
                self._lost()

    def poll(self) -> None:
        """Take in what the child has reported so far, without waiting."""
        try:
            while self._results.poll():
                self._report(self._results.recv())
        except (EOFError, OSError):
            self._lost()

    def close(self) -> None:
        """Have the child draw what is pending, wait for it to exit, take in its reports."""
        try:
            self._requests.send(None)
        except OSError:
            pass
        self._requests.close()
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        try:  # until the child closes its end: it has reported everything by then
            while self._results.poll(max(0.0, deadline - time.monotonic())):
                self._report(self._results.recv())
            self._process.kill()  # a drawing stuck past the deadline must not hold up the run's end
            if self.error is None:
                self.error = f"the drawing process was still drawing after {CLOSE_TIMEOUT_S:g} s; stopped it"
        except (EOFError, OSError):
            pass
        self._results.close()
        if self._process.wait() != 0:
            self._lost()

    def _report(self, report: tuple[Any, ...]) -> None:
        if report[0] == "drawn":
            _, iteration, seconds = report
            self.drawn.append(iteration)
            log.debug("popmarl-mlflow: plots of iteration %s drawn in %.2f s by process %s",
                      iteration, seconds, self._process.pid)
        elif self.error is None:
            self.error = str(report[1])

    def _lost(self) -> None:
        try:
            code: int | None = self._process.wait(timeout=5)  # a pipe broken by a child that is exiting
        except subprocess.TimeoutExpired:
            code = None
        if self.error is None:
            self.error = f"the drawing process exited with code {code}"


#: How much lower the drawing process's priority is than the run's: when they compete
#: for a core (matplotlib's import and the drawings during the loop; the loop's BLAS
#: threads), the loop goes first; at the run's end, when the run waits, it has a core.
NICENESS = 10
#: The child's program: lower priority, the run's import path, then :func:`serve`
#: (argv[1]: its JSON arguments).
_CHILD = (f"import os; os.nice({NICENESS}); import json, sys; args = json.loads(sys.argv[1]); "
          "sys.path[:] = args.pop('path'); from popmarl_mlflow.drawing import serve; serve(**args)")


def serve(*, requests: int, results: int, elapsed: float, max_share: float, estimate: float) -> None:
    """The drawing process, reading updates from file descriptor ``requests`` and
    reporting to ``results``: keep the history the updates bring, draw it with a
    :class:`Drawer`; on ``None`` draw what is pending and exit, on the run's end of the
    pipe closing (it died, or ended without closing) exit at once."""
    from popmarl_mlflow import plots

    updates, reports = Connection(requests, writable=False), Connection(results, readable=False)
    lines: list[dict[str, Any]] = []
    meta: dict[str, dict[int, list[float]]] = {}
    failed = False

    def guarded(action: Callable[[], None]) -> None:
        nonlocal failed
        if not failed:
            try:
                action()
            except Exception as exc:  # reported once; the run goes on without plots
                failed = True
                reports.send(("failed", f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"))

    def draw_reported(snapshot: Snapshot) -> None:
        begun = time.monotonic()
        guarded(lambda: draw(snapshot))
        if not failed:
            iteration = snapshot.lines[-1].get("iteration") if snapshot.lines else None
            reports.send(("drawn", iteration, time.monotonic() - begun))

    drawer = Drawer(draw_reported, max_share=max_share, start=time.monotonic() - elapsed, estimate=estimate,
                    prepare=lambda: guarded(plots.prepare))
    while True:
        try:
            update = updates.recv()
        except EOFError:  # the run's process is gone: so are we, drawing or not
            os._exit(0)
        if update is None:
            break
        lines.extend(update.lines)
        for population, iteration, mixture in update.meta:
            meta.setdefault(population, {})[iteration] = mixture
        if update.draw:
            drawer.request(Snapshot(run_dir=Path(update.run_dir), lines=list(lines),
                                    meta={p: dict(m) for p, m in meta.items()}))
    drawer.close()
    reports.close()
    os._exit(0)  # everything is written (atomically, synced): skip the interpreter's teardown


class Drawer:
    """A background thread drawing the newest requested snapshot while drawing stays
    within ``max_share`` of the time since ``start``: a request waits until the time
    spent drawing, plus the next drawing's estimate (the last one's duration; at first
    ``estimate``), is at most that share; requests meanwhile replace each other.
    :meth:`close` draws what is pending at once. matplotlib is used only through Agg
    figures (no pyplot, no global state), one drawing at a time. ``clock`` reads the time
    (``start`` is on its scale): the run's monotonic clock, or a test's own."""

    def __init__(self, draw: Callable[[Snapshot], None], *, max_share: float = 1.0,
                 start: float | None = None, estimate: float = 0.0,
                 prepare: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._draw = draw
        self._prepare = prepare
        self._share = max_share
        self._clock = clock
        self._start = clock() if start is None else start
        self._estimate = estimate
        self._pending: Snapshot | None = None
        self._closing = False
        self._ready = threading.Condition()
        # A daemon: its process exits without waiting for it; the files are written
        # atomically, so a drawing cut off leaves the previous one.
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
                    left = self._start + (spent + estimate) / self._share - self._clock()
                    if left <= 0:
                        break
                    self._ready.wait(left)
                snapshot, self._pending = self._pending, None
            if snapshot is None:  # closing, nothing left to draw
                return
            begun = self._clock()
            self._draw(snapshot)
            estimate = self._clock() - begun
            spent += estimate
