"""Tracker ``plots``: redraws the run's PNG plots in the run directory every iteration.

``nash_conv.png``, ``payoffs.png`` and ``meta_strategies.png`` (see
:mod:`popmarl_mlflow.plots`); the ``mlflow`` tracker uploads them with the other files.
A plot that cannot be drawn is reported once and never stops the run.
"""

from __future__ import annotations

import json
import logging
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


@attrs.frozen(kw_only=True)
class PlotsConfig:
    """``every``: redraw every this many iterations (and always at the end of the run)."""

    every: int = attrs.field(default=1, validator=attrs.validators.ge(1))


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
        self._drawn: int | None = None  # the last iteration drawn
        self._failed = False

    @hookimpl
    def popmarl_iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        run_dir = Path(run.run_dir)
        if self._lines is None:  # the history so far (a resumed run has one)
            self._lines = read_metrics(run_dir)
        if not self._lines or self._lines[-1].get("iteration") != iteration:
            self._lines.append({**metrics, "iteration": iteration})
        if not any(key.startswith("meta_strategy/") for key in metrics):
            self._guarded(lambda: self._record_meta(run_dir, iteration))
        if iteration % self.config.every == 0:
            self._guarded(lambda: self.draw(run_dir))
            self._drawn = iteration

    @hookimpl
    def popmarl_run_end(self, run: RunInfo, summary: Mapping[str, Any]) -> None:
        run_dir = Path(run.run_dir)
        if self._lines is None:
            self._lines = read_metrics(run_dir)
        last = self._lines[-1].get("iteration") if self._lines else None
        if self._drawn is None or self._drawn != last:
            self._guarded(lambda: self.draw(run_dir))

    def _record_meta(self, run_dir: Path, iteration: int) -> None:
        for population, mixture in checkpoint_meta(run_dir).items():
            self._meta.setdefault(population, {})[iteration] = mixture

    def draw(self, run_dir: Path) -> None:
        """Write every plot the run directory has data for."""
        lines = self._lines or []
        plots.nash_conv(lines, run_dir / plots.NASH_CONV)
        if (run_dir / "payoffs.npz").is_file():
            plots.payoffs(run_dir / "payoffs.npz", run_dir / plots.PAYOFFS)
        plots.meta_strategies(plots.meta_history(lines) or self._meta, run_dir / plots.META_STRATEGIES)

    def _guarded(self, action: Callable[[], None]) -> None:
        if self._failed:
            return
        try:
            action()
        except Exception as exc:  # a plot must never stop the run
            self._failed = True
            log.warning("popmarl-mlflow: plots stopped (%s: %s); the run goes on without them",
                        type(exc).__name__, " ".join(str(exc).split())[:200])
