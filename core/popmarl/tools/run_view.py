"""What ``popmarl show`` tells of a run, read from its files alone (no env is built and no
policy loaded, so that following a run costs little).

A finished run is told by its ``summary.json``; a run that is going or was killed by its
last committed checkpoint (:mod:`popmarl.tools.checkpoint_view`): the same figures and
meta-strategies, those of that iteration. Seat names come from ``payoffs.npz`` where the
run writes one (psro, league); without it a seat's own meta-strategy is not shown.

Its progress is what the console prints (:func:`popmarl.data.headline.headline` of its
committed metrics lines), and ``popmarl exploit``'s result where the run directory has
its ``exploit.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from popmarl.config.loading import read_yaml
from popmarl.data.headline import ProgressFigure, headline
from popmarl.errors import PopmarlError, UserError
from popmarl.gametheory.payoffs import PayoffTable
from popmarl.data.atomic import read_json_lines
from popmarl.runs.rundir import RunDirectory
from popmarl.tools.checkpoint_view import Checkpoint, read_checkpoint
from popmarl.tools.exploit import EXPLOIT_FILE
from popmarl.tools.run_status import RunStatus, run_status

#: The summary's single figures that ``show`` prints, in order (after ``scenario`` and ``status``).
HEADLINE = ("iterations", "nash_conv", "exploitability", "env_steps", "wall_time_s")
#: Further figures where a run has them: exact work, and a marl run's progress per population.
DETAILS = ("exact_best_responses", "exact_entries", "mean_returns", "win_rates", "initial_returns")


@attrs.frozen(kw_only=True)
class RunView:
    """A run as ``show`` prints it: its ``status``, ``scenario``, headline ``figures``
    (:data:`HEADLINE`, :data:`DETAILS` where known), each population's policies and
    meta-strategy (``populations``: ``{"policies": [...], "meta_strategy": [...] or
    None}``), each seat's where known (``meta_strategies``), a joint meta-strategy's
    support, the last committed iteration's metrics line (``metrics``), the figures that
    tell its progress (``progress``) and ``popmarl exploit``'s result (``exploit``: its
    headline from ``exploit.json``, None where there is none)."""

    path: Path
    status: RunStatus
    scenario: str | None
    figures: Mapping[str, Any]
    populations: Mapping[str, Mapping[str, Any]]
    meta_strategies: Mapping[str, list[float]] | None
    joint_meta_strategy: Mapping[str, Any] | None
    metrics: Mapping[str, Any]
    progress: tuple[ProgressFigure, ...] = ()
    exploit: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """One JSON object (``popmarl show --json``)."""
        return {"run": str(self.path), "status": self.status.state, "description": self.status.describe(),
                "iteration": self.status.iteration, "stop_reason": self.status.reason, "scenario": self.scenario,
                **{k: self.figures.get(k) for k in HEADLINE},
                **{k: self.figures[k] for k in DETAILS if k in self.figures},
                "populations": dict(self.populations), "meta_strategies": self.meta_strategies,
                "joint_meta_strategy": self.joint_meta_strategy, "metrics": dict(self.metrics),
                "progress": [f.to_json() for f in self.progress], "exploit": self.exploit}


def view_run(path: str | Path) -> RunView:
    """The run in ``path`` as ``show`` tells it; a UserError if it is no run."""
    run = RunDirectory(path)
    status = run_status(run)
    exploit = read_exploit(run)
    if status.finished:
        summary = run.read_summary()
        lines = _metrics_lines(run)
        return RunView(path=run.path, status=status, scenario=summary.get("scenario"),
                       figures={k: summary.get(k) for k in (*HEADLINE, *DETAILS) if k in summary},
                       populations=summary.get("populations") or {},
                       meta_strategies=summary.get("meta_strategies"),
                       joint_meta_strategy=summary.get("joint_meta_strategy"), metrics=lines[-1] if lines else {},
                       progress=_progress(lines), exploit=exploit)
    checkpoint = read_checkpoint(run)
    if checkpoint is None:
        return RunView(path=run.path, status=status, scenario=_scenario(run), figures={}, populations={},
                       meta_strategies=None, joint_meta_strategy=None, metrics={}, exploit=exploit)
    status, metrics = attrs.evolve(status, iteration=checkpoint.iteration), checkpoint.last_metrics
    seats = _seats(run)
    populations = _populations(checkpoint, seats)
    seat_mixtures = checkpoint.seat_mixtures([p for _, p in seats]) if seats is not None else None
    return RunView(path=run.path, status=status, scenario=_scenario(run), figures=_figures(checkpoint),
                   populations=populations,
                   meta_strategies=None if seats is None or seat_mixtures is None else
                   {a: m.tolist() for (a, _), m in zip(seats, seat_mixtures)},
                   joint_meta_strategy=None if seats is None else
                   checkpoint.joint_meta_strategy([a for a, _ in seats], [p for _, p in seats]),
                   metrics=metrics, progress=_progress(checkpoint.history), exploit=exploit)


def _progress(lines: list[dict[str, Any]]) -> tuple[ProgressFigure, ...]:
    """The figures that tell the progress at the last line, none for a run without one."""
    return tuple(headline(lines)) if lines else ()


def read_exploit(run: RunDirectory) -> dict[str, Any] | None:
    """The headline of ``popmarl exploit``'s ``exploit.json`` in the run directory: its
    ``kind`` (``nash_conv`` or ``cce_gap``), ``value``, ``lower_bound``, ``ci95``, the
    ``iteration`` exploited and the run's ``status`` then; None where there is none or it
    is unreadable."""
    try:
        found = json.loads((run.path / EXPLOIT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("kind"), str):
        return None
    kind = found["kind"]
    return {"kind": kind, "value": found.get(f"approx_{kind}"), "lower_bound": found.get("lower_bound"),
            "ci95": found.get("ci95"), "iteration": found.get("iteration"), "status": found.get("status"),
            "env_steps_per_response": found.get("env_steps_per_response"), "file": EXPLOIT_FILE}


def _metrics_lines(run: RunDirectory) -> list[dict[str, Any]]:
    """A finished run's metrics lines (its ``metrics.jsonl`` holds exactly the committed
    iterations), without any unreadable one; [] where it has none."""
    try:
        return read_json_lines(run.metrics_file)
    except OSError:
        return []


def _scenario(run: RunDirectory) -> str | None:
    """The scenario ``config.yaml`` names."""
    try:
        config = read_yaml(run.config_file)
    except UserError:
        return None
    scenario = config.get("scenario") if isinstance(config, dict) else None
    name = scenario.get("name") if isinstance(scenario, dict) else scenario
    return str(name) if name is not None else None


def _seats(run: RunDirectory) -> list[tuple[str, str]] | None:
    """Each seat and its population, from ``payoffs.npz`` (its agents, and the policy ids
    of each axis), or None where there is none."""
    if not run.payoffs_file.is_file():
        return None
    try:
        table, ids = PayoffTable.load(run.payoffs_file)
    except PopmarlError:
        return None
    if not all(ids):
        return None
    return [(agent, axis[0].rsplit("/", 1)[0]) for agent, axis in zip(table.agents, ids)]


def _populations(checkpoint: Checkpoint, seats: list[tuple[str, str]] | None) -> dict[str, dict[str, Any]]:
    """Each population's policies and meta-strategy (None where only its seats' arrays,
    whose seats are not known, hold it)."""
    try:
        policies = checkpoint.policies()
    except UserError:  # a scenario whose checkpoint has another shape: its summary tells, at its end
        return {}
    try:
        mixtures = checkpoint.population_mixtures([p for _, p in seats] if seats is not None else None)
    except UserError:
        return {p: {"policies": ids, "meta_strategy": None} for p, ids in policies.items()}
    return {p: {"policies": ids, "meta_strategy": meta.tolist()} for p, (ids, meta) in mixtures.items()}


def _figures(checkpoint: Checkpoint) -> dict[str, Any]:
    """The headline figures of the last committed iteration, as ``summary.json`` would
    give them."""
    state, line, history = checkpoint.state, checkpoint.last_metrics, checkpoint.history
    figures: dict[str, Any] = {"iterations": checkpoint.iteration, "nash_conv": line.get("nash_conv"),
                               "exploitability": line.get("exploitability"), "env_steps": state.get("env_steps"),
                               "wall_time_s": state.get("wall_time_s")}
    exact = {k: sum(int(m.get(k, 0) or 0) for m in history) for k in ("exact_best_responses", "exact_entries")}
    if any(exact.values()):
        figures.update(exact)
    populations = [key.split("/", 1)[1] for key in line if key.startswith("mean_return/")]
    for key, prefix in (("mean_returns", "mean_return/"), ("win_rates", "win_rate/")):
        found = {p: line[prefix + p] for p in populations if prefix + p in line}
        if found:
            figures[key] = found
    if isinstance(state.get("initial_returns"), dict):
        figures["initial_returns"] = state["initial_returns"]
    return figures
