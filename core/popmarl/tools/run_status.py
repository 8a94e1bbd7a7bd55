"""Where a run stands: finished (``summary.json`` says how), going, or killed.

A finished run's status is its ``summary.json``'s (``completed``, ``stopped``, ``failed``).
A run with no summary of its current session is ``running`` while the process named in its
``.process.json`` (:mod:`popmarl.runs.process_file`) is alive on this host, ``interrupted``
once it is gone (``kill -9``, a crash: continue it with ``--resume``), and ``unknown`` where
it was started on another host, whose processes this one cannot see. The iteration of an
unfinished run is its last committed checkpoint's: what every reading command reads.

Reading the status writes nothing, and a run that commits meanwhile changes nothing read.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

import attrs

from popmarl.errors import UserError
from popmarl.runs.process_file import is_alive, read_record
from popmarl.runs.rundir import RunDirectory

#: What a run's status may be.
State = Literal["completed", "stopped", "failed", "running", "interrupted", "unknown"]
#: The states of a run whose ``summary.json`` is its last session's.
FINISHED: tuple[State, ...] = ("completed", "stopped", "failed")


@attrs.frozen(kw_only=True)
class RunStatus:
    """A run's ``state`` and the ``iteration`` it reflects (a finished run's last, else its
    last committed one; None before the first commit); ``reason``: a finished run's
    ``stop_reason``; ``pid`` and ``host``: the process of a run that is going or was
    killed, as its ``.process.json`` names it."""

    state: State
    iteration: int | None
    reason: str | None = None
    pid: int | None = None
    host: str | None = None

    @property
    def finished(self) -> bool:
        """Whether ``summary.json`` tells the run's end (its meta-strategies are read there)."""
        return self.state in FINISHED

    def describe(self) -> str:
        """One line: ``completed``; ``running, iteration 12``; ``interrupted at iteration 5:
        continue with --resume``; ..."""
        at = "no iteration committed yet" if self.iteration is None else f"iteration {self.iteration}"
        if self.state == "completed":
            return "completed"
        if self.state == "stopped":
            return f"stopped ({self.reason}) at iteration {self.iteration}: continue with --resume"
        if self.state == "failed":
            return f"failed at iteration {self.iteration} ({self.reason})"
        if self.state == "running":
            return f"running, {at}"
        if self.state == "interrupted":
            if self.iteration is None:
                return "interrupted before its first checkpoint: start it again with --resume"
            return f"interrupted at iteration {self.iteration}: continue with --resume"
        return f"running or interrupted (started on host {self.host}), {at}"

    def to_json(self) -> dict[str, Any]:
        """The status as plain data (``popmarl show --json``, ``eval --json``)."""
        return {"state": self.state, "iteration": self.iteration, "reason": self.reason, "pid": self.pid,
                "host": self.host, "description": self.describe()}


def run_status(run: RunDirectory) -> RunStatus:
    """The status of the run in ``run`` (a UserError if it is no run, or its summary is
    unreadable)."""
    if not run.path.is_dir():
        raise UserError(f"{run.path}: no such run directory")
    record = read_record(run.path)  # before the summary: a run that ends writes that first
    summary, summary_ns = _summary(run)
    if record is not None:
        alive = is_alive(record)
        if alive or alive is None:
            return RunStatus(state="running" if alive else "unknown", iteration=committed_iteration(run),
                             pid=record.pid, host=record.host)
        if summary is None or summary_ns < record.written_ns:  # killed; any summary is an earlier session's
            return RunStatus(state="interrupted", iteration=committed_iteration(run), pid=record.pid,
                             host=record.host)
    if summary is not None:
        state = summary.get("status")
        if state not in FINISHED:
            raise UserError(f"{run.summary_file}: status {state!r} is none of {', '.join(FINISHED)}")
        return RunStatus(state=state, iteration=int(summary.get("iterations") or 0),
                         reason=summary.get("stop_reason"))
    iteration = committed_iteration(run)
    if iteration is None and not run.config_file.is_file():
        raise UserError(f"{run.path}: not a run directory (no summary.json, checkpoint or config.yaml)")
    # Killed, by a popmarl that wrote no .process.json, or before it was written.
    return RunStatus(state="interrupted", iteration=iteration)


def _summary(run: RunDirectory) -> tuple[dict[str, Any] | None, int]:
    """``summary.json`` and its modification time, or (None, 0) where there is none."""
    try:
        with open(run.summary_file, "rb") as f:
            written = os.fstat(f.fileno()).st_mtime_ns
            text = f.read()
    except FileNotFoundError:
        return None, 0
    except OSError as exc:
        raise UserError(f"{run.summary_file}: unreadable ({exc.strerror})") from None
    try:
        summary = json.loads(text.decode("utf-8"))
    except ValueError as exc:
        raise UserError(f"{run.summary_file}: not JSON ({exc.__class__.__name__})") from None
    if not isinstance(summary, dict):
        raise UserError(f"{run.summary_file}: not a JSON object")
    return summary, written


def committed_iteration(run: RunDirectory) -> int | None:
    """The iteration of the last committed checkpoint (``state.json`` alone), or None."""
    try:
        state = json.loads(run.state_file.read_text(encoding="utf-8"))
        return int(state["iteration"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{run.state_file}: corrupt checkpoint state ({exc.__class__.__name__})") from None
