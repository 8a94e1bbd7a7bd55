"""The base of iterative scenarios (psro, league, marl): announce, initialise or restore,
loop, commit, and always write ``summary.json``."""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import attrs

from popmarl.config.schema import StoppingConfig
from popmarl.data.learners import LearnerState
from popmarl.data.policies import Weights
from popmarl.errors import Terminated
from popmarl.interfaces.scenario import RunContext, Scenario

log = logging.getLogger("popmarl")


@attrs.define(kw_only=True)
class IterationState:
    """What the state of every iterative scenario holds (each adds its own): the iterations
    done, their metrics lines, the env steps and wall time so far, and the learners' states
    after the last iteration (restored on resume)."""

    iteration: int
    history: list[dict[str, Any]]
    env_steps: int = 0
    wall_time_s: float = 0.0
    learners: dict[str, LearnerState] = attrs.field(factory=dict)


S = TypeVar("S", bound=IterationState)


class IterativeScenario(Scenario):
    """A scenario that runs iterations from a checkpointed state: it announces the run,
    initialises or restores its state, loops, and always writes ``summary.json`` (status
    ``completed``, ``stopped`` or ``failed``; a stopped run's ``stop_reason`` is e.g. ``interrupted``
    (Ctrl-C) or ``terminated`` (SIGTERM), a failed run's ``error: Type: message`` of the error
    that stopped it) and fires ``run_end``. The error that stopped a run is the one raised,
    whatever fails after it."""

    @abstractmethod
    def initialise(self) -> Any:
        """The state of a fresh run (committed as the first checkpoint)."""

    @abstractmethod
    def restore(self) -> Any:
        """The state of the last checkpoint of a resumed run."""

    @abstractmethod
    def loop(self, state: Any) -> tuple[str, str]:
        """Iterate until a stopping condition; return ``(status, reason)``."""

    @abstractmethod
    def summary(self, state: Any, status: str, reason: str) -> dict[str, Any]:
        """The content of ``summary.json`` (``state`` is None if none was built)."""

    #: The stopping conditions of a run whose config sets none (see
    #: :class:`~popmarl.config.schema.StoppingConfig`).
    default_stopping: ClassVar[StoppingConfig] = StoppingConfig(max_iterations=10)

    @property
    def stopping(self) -> StoppingConfig:
        """The stopping conditions in force: the config's, with this scenario's defaults."""
        return self.ctx.config.stopping.with_defaults(self.default_stopping)

    def stop_reason(self, iteration: int, history: Sequence[Mapping[str, Any]] = ()) -> tuple[str, str] | None:
        """``(status, reason)`` if the run stops before iteration ``iteration + 1`` by the
        stopping conditions in force (``target_nash_conv``: by the last ``history`` line's
        ``nash_conv``, where known; ``patience``: by its last lines' ``oracle_gain_share``),
        else None."""
        stopping = self.stopping
        nash_conv = history[-1].get("nash_conv") if history else None
        if stopping.target_nash_conv is not None and nash_conv is not None and nash_conv <= stopping.target_nash_conv:
            return "completed", "target_nash_conv"
        if stopping.patience is not None and len(history) >= stopping.patience:
            gains = [line.get("oracle_gain_share") for line in history[-stopping.patience:]]
            if all(g is not None and g <= stopping.min_gain for g in gains):
                return "completed", "converged"
        if stopping.max_iterations is not None and iteration >= stopping.max_iterations:
            return "completed", "max_iterations"
        if stopping.max_wall_time_s is not None and self.elapsed() >= stopping.max_wall_time_s:
            return "stopped", "max_wall_time_s"
        return None

    def finish(self, state: Any) -> None:
        """Work at the end of a run with a state (e.g. exporting the final policy)."""

    def base_summary(self, status: str, reason: str) -> dict[str, Any]:
        """The keys every ``summary.json`` has, before any state exists."""
        return {
            "scenario": self.ctx.info.scenario, "status": status, "stop_reason": reason,
            "seed": self.ctx.config.seed, "iterations": 0, "populations": {}, "nash_conv": None,
            "exploitability": None, "env_steps": 0, "wall_time_s": self.elapsed(),
        }

    def summary_with(self, state: S | None, status: str, reason: str,
                     details: Callable[[S], Mapping[str, Any]]) -> dict[str, Any]:
        """``summary.json`` as :meth:`base_summary` has it and, given a state, with its
        iterations and env steps and the scenario's ``details`` of it."""
        summary = self.base_summary(status, reason)
        if state is not None:
            summary.update({"iterations": state.iteration, "env_steps": state.env_steps, **details(state)})
        return summary

    def commit(self, saved: Mapping[str, Any], arrays: Mapping[str, Any], history: list[dict[str, Any]],
               after: Callable[[], None] | None = None, learners: Mapping[str, LearnerState] | None = None) -> None:
        """Checkpoint (``saved["iteration"]`` decides whether the last history line is
        new), with the ``learners``' states if given, then run ``after`` (derived files)
        and fire the checkpoint hook."""
        new_lines = history[-1:] if saved["iteration"] else []
        path = self.ctx.run_dir.commit(saved, arrays, new_lines, learners=learners)
        if after is not None:
            after()
        self.ctx.hooks.checkpoint(self.ctx.info, str(path))

    def loop_until_stopped(self, state: S, iterate: Callable[[S], None]) -> tuple[str, str]:
        """Run ``iterate`` (one iteration) until :meth:`stop_reason` gives the run's
        ``(status, reason)``, and return that."""
        while (stop := self.stop_reason(state.iteration, state.history)) is None:
            iterate(state)
        return stop

    def end_iteration(self, state: S, metrics: dict[str, Any], commit: Callable[[S], None]) -> None:
        """Close iteration ``state.iteration``: its metrics line joins the history, the
        state takes the run's wall time and ``commit`` checkpoints it; only then does the
        line go to ``metrics.jsonl`` and the ``iteration_end`` hooks (a resume drops what
        an interrupted iteration wrote past its checkpoint)."""
        state.history.append(metrics)
        state.wall_time_s = self.elapsed()
        commit(state)
        self.ctx.run_dir.append_metrics(metrics)
        self.ctx.hooks.iteration_end(self.ctx.info, state.iteration, metrics)

    def publish(self, pid: str, weights: Weights, *, announce: bool = True) -> None:
        """Put policy ``pid`` on the backend; ``announce``: a policy new to the run, also
        saved to the run directory and announced to the ``policy_added`` hooks (not one
        restored from a checkpoint, nor a copy the run keeps for the backend only)."""
        ctx = self.ctx
        ctx.backend.add_policy(pid, weights)
        if announce:
            ctx.run_dir.save_policy(pid, weights)
            ctx.hooks.policy_added(ctx.info, pid.rsplit("/", 1)[0], pid)

    def resumed(self, saved: Mapping[str, Any]) -> dict[str, Any]:
        """Continue from a checkpoint's ``saved`` state (:meth:`resume_history`) and return
        the :class:`IterationState` fields it holds, with the learners' states read back."""
        self.resume_history(saved)
        return {"iteration": int(saved["iteration"]), "history": saved["history"], "env_steps": int(saved["env_steps"]),
                "wall_time_s": float(saved["wall_time_s"]), "learners": self.ctx.run_dir.load_learners(saved)}

    def resume_history(self, saved: Mapping[str, Any]) -> None:
        """Drop whatever an interrupted iteration left past the checkpoint, and carry the
        run's wall time over."""
        self.ctx.run_dir.truncate_history(saved["history"])
        self.ctx.run_dir.restore_metrics(saved["history"])
        self.base_wall_time = float(saved["wall_time_s"])

    def elapsed(self) -> float:
        """Wall time of the run so far, over every session of it."""
        return self.base_wall_time + time.monotonic() - self.session_start

    def run(self, context: RunContext) -> dict[str, Any]:
        self.ctx = context
        self.session_start = time.monotonic()
        self.base_wall_time = 0.0
        state = None
        try:
            context.hooks.run_start(context.info)
            state = self.restore() if context.resume else self.initialise()
            status, reason = self.loop(state)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM under `popmarl run`
            self._end(state, "stopped", "terminated" if isinstance(exc, Terminated) else "interrupted", exc)
            raise
        except BaseException as exc:
            self._end(state, "failed", f"error: {describe(exc)}", exc)
            raise
        return self._end(state, status, reason, None)

    def _end(self, state: Any, status: str, reason: str, error: BaseException | None) -> dict[str, Any]:
        """Finish (with a state), write ``summary.json`` and fire ``run_end``. While ``error``
        propagates, a failure here is logged and noted on it, never raised over it; after
        a clean loop, a failing ``finish`` makes the run ``failed`` and is raised once the
        summary is written."""
        finish_error: Exception | None = None
        if state is not None:
            try:
                self.finish(state)
            except Exception as exc:
                if error is not None:
                    _note(error, "finishing the run", exc)
                else:
                    finish_error = exc
                    status, reason = "failed", f"error: finishing the run: {describe(exc)}"
        raised = error if error is not None else finish_error
        try:
            summary = self.summary(state, status, reason)
        except Exception as exc:
            if raised is None:
                raise
            _note(raised, "building the summary", exc)
            summary = self.base_summary(status, reason)
        for step, action in (("writing summary.json", self.ctx.run_dir.write_summary),
                             ("the run_end hooks", lambda s: self.ctx.hooks.run_end(self.ctx.info, s))):
            try:
                action(summary)
            except Exception as exc:
                if raised is None:
                    raise
                _note(raised, step, exc)
        if finish_error is not None:
            raise finish_error
        return summary


def describe(exc: BaseException) -> str:
    """``Type: first line of the message``, for summaries and notes."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _note(error: BaseException, step: str, exc: Exception) -> None:
    """Log a failure that happened while ``error`` propagates, and note it on ``error``."""
    log.warning("popmarl: %s failed too, after %s: %s", step, describe(error), describe(exc), exc_info=exc)
    error.add_note(f"then {step} failed too: {describe(exc)}")
