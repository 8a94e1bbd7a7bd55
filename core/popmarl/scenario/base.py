"""The base of iterative scenarios (psro, league, marl, and outside ones): it owns the
loop, and a scenario fills a few fixed hooks.

The base announces the run, starts or restores the state, and loops until a stopping
condition; each iteration it asks the scenario for the iteration's work
(:meth:`IterativeScenario.iterate`) and its metrics (:meth:`IterativeScenario.report`),
then closes the iteration itself: the common metrics (iteration, env steps, times),
the history, the checkpoint, ``metrics.jsonl`` and the hooks. It publishes policies
(the scenario's copy, the backend's, the run directory's file and the ``policy_added``
hook), restores a checkpoint (the state read back by the state's own codec, its policies
put back on the backend) and always writes ``summary.json``. Every lifecycle hook
(``run_start``, ``policy_added``, ``checkpoint``, ``iteration_end``, ``run_end``) is fired
here, never by a scenario.

A scenario's hooks, in the order the base calls them:

* :meth:`~IterativeScenario.prepare`: derive settings from the config (the ``check*``
  methods only check);
* :meth:`~IterativeScenario.start` (a fresh run: the state at iteration 0, its first
  policies published) or, on resume, the state's
  :meth:`~IterationState.from_checkpoint` and :meth:`~IterativeScenario.restored`;
* per iteration, :meth:`~IterativeScenario.iterate` (train, evaluate, solve; returns the
  :class:`Work` done), :meth:`~IterativeScenario.report` (the metrics line's own keys)
  and :meth:`~IterativeScenario.newest_policies` (what the base measures against random
  play where no exact NashConv exists);
* after every checkpoint, :meth:`~IterativeScenario.write_outputs` (files derived from
  the state, e.g. ``payoffs.npz``);
* at the end, :meth:`~IterativeScenario.finish` and :meth:`~IterativeScenario.details`
  (``summary.json``'s own keys).

A scenario's state is an :class:`IterationState` subclass: a typed record whose
:meth:`~IterationState.to_checkpoint` and :meth:`~IterationState.from_checkpoint` are the
one place it is written and read.
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import attrs
import numpy as np

from popmarl.config.schema import StoppingConfig
from popmarl.data.learners import LearnerState
from popmarl.data.policies import Weights
from popmarl.errors import Terminated
from popmarl.interfaces.policy import Policy
from popmarl.interfaces.scenario import RunContext, Scenario
from popmarl.scenario.progress import measure_progress

log = logging.getLogger("popmarl")

#: The keys of ``state.json`` that the base writes and reads for every scenario.
COMMON_KEYS = ("iteration", "history_length", "env_steps", "wall_time_s")


@attrs.define(kw_only=True)
class IterationState:
    """What the state of every iterative scenario holds (each adds its own fields): the
    iterations done, their metrics lines, the env steps and wall time so far, and the
    learners' states after the last iteration (restored on resume).

    A subclass writes its own fields with :meth:`to_checkpoint` and reads them back with
    :meth:`from_checkpoint` (the one place for both), and names the policies a resumed
    run puts back on the backend (:meth:`held_policies`)."""

    iteration: int = 0
    history: list[dict[str, Any]] = attrs.field(factory=list)
    env_steps: int = 0
    wall_time_s: float = 0.0
    learners: dict[str, LearnerState] = attrs.field(factory=dict)

    def to_checkpoint(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The subclass's own fields: JSON-able values for ``state.json`` and arrays for
        the checkpoint's ``.npz`` (the base adds the common fields and the learners)."""
        return {}, {}

    @classmethod
    def from_checkpoint(cls, common: dict[str, Any], saved: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                        scenario: Any) -> IterationState:
        """The state that :meth:`to_checkpoint` wrote: ``common`` holds the base's fields
        (iteration, history, env steps, wall time, learners), ``saved`` and ``arrays`` the
        checkpoint, ``scenario`` the running scenario (its ``ctx`` and ``config``)."""
        return cls(**common)

    def held_policies(self) -> Iterable[str]:
        """The policies a resumed run puts back on the backend (and the scenario's copies)."""
        return ()


@attrs.frozen(kw_only=True)
class Work:
    """What one iteration did: its env steps (training and evaluation, counted in the
    run's ``env_steps``) and whatever the scenario's :meth:`IterativeScenario.report`
    needs of it (its train results, timings...)."""

    env_steps: int
    details: Any = None


S = TypeVar("S", bound=IterationState)


class IterativeScenario(Scenario, Generic[S]):
    """A scenario that runs iterations from a checkpointed state; the base owns the loop
    (see the module docstring for the hooks a scenario fills). It always writes
    ``summary.json`` (status ``completed``, ``stopped`` or ``failed``; a stopped run's
    ``stop_reason`` is e.g. ``interrupted`` (Ctrl-C) or ``terminated`` (SIGTERM), a failed
    run's ``error: Type: message`` of the error that stopped it) and fires ``run_end``. The
    error that stopped a run is the one raised, whatever fails after it."""

    #: The scenario's state record.
    State: ClassVar[type[IterationState]] = IterationState

    #: The stopping conditions of a run whose config sets none (see
    #: :class:`~popmarl.config.schema.StoppingConfig`).
    default_stopping: ClassVar[StoppingConfig] = StoppingConfig(max_iterations=10)

    ctx: RunContext

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: The scenario's copy of every policy it published (frozen, for exact measures).
        self.policies: dict[str, Policy] = {}
        self.session_start = time.monotonic()
        self.base_wall_time = 0.0

    # -- the hooks a scenario fills ---------------------------------------------------
    def prepare(self) -> None:
        """Derive what the run needs from ``self.ctx`` before the state is built."""

    @abstractmethod
    def start(self) -> S:
        """The state of a fresh run at iteration 0, its first policies published
        (:meth:`publish`); the base commits it as the first checkpoint."""

    def restored(self, state: S) -> None:
        """Work after a resumed run's state is read and its policies are back on the
        backend (e.g. noting which learners are to be rebuilt from the checkpoint)."""

    @abstractmethod
    def iterate(self, state: S, iteration: int) -> Work:
        """Iteration ``iteration``'s work on ``state`` (train, evaluate, solve, publish new
        policies); the base then sets ``state.iteration`` and adds the env steps."""

    def report(self, state: S, work: Work) -> dict[str, Any]:
        """The iteration's metrics besides those the base adds (``iteration``,
        ``env_steps``, ``iteration_env_steps``, ``iteration_time_s``, ``wall_time_s``)."""
        return {}

    def newest_policies(self, state: S) -> dict[str, str]:
        """Each population's newest policy (on the backend), which the base plays against
        uniformly random play every ``evaluation.versus_random_every`` iterations where
        the env computes no exact NashConv (:mod:`popmarl.scenario.progress`); none: not
        measured."""
        return {}

    def write_outputs(self, state: S) -> None:
        """Write the files derived from ``state`` (after each checkpoint, and on resume,
        where a kill may have left them behind)."""

    def details(self, state: S) -> dict[str, Any]:
        """``summary.json``'s keys besides those every summary has (status, iterations,
        env steps...)."""
        return {}

    def finish(self, state: S) -> None:
        """Work at the end of a run with a state (e.g. exporting the final policy)."""

    # -- stopping ---------------------------------------------------------------------
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

    # -- what the base does -----------------------------------------------------------
    def publish(self, pid: str, weights: Weights, *, announce: bool = True) -> None:
        """Hold policy ``pid`` (the scenario's frozen copy in :attr:`policies`) and put it
        on the backend; ``announce``: a policy new to the run, also saved to the run
        directory and announced to the ``policy_added`` hooks (not one restored from a
        checkpoint, nor a copy the run keeps for the backend only)."""
        ctx = self.ctx
        population = pid.rsplit("/", 1)[0]
        self.policies[pid] = ctx.populations[population].frozen(weights)
        ctx.backend.add_policy(pid, weights)
        if announce:
            ctx.run_dir.save_policy(pid, weights)
            ctx.hooks.policy_added(ctx.info, population, pid)

    def loop(self, state: S) -> tuple[str, str]:
        """Iterate until :meth:`stop_reason` gives the run's ``(status, reason)``, and
        return that. Each iteration: the scenario's work and metrics, then the tail."""
        while (stop := self.stop_reason(state.iteration, state.history)) is None:
            iteration = state.iteration + 1
            t0 = self.elapsed()
            work = self.iterate(state, iteration)
            state.iteration = iteration
            state.env_steps += work.env_steps
            metrics = {"iteration": iteration, **self.report(state, work)}
            metrics.update(measure_progress(self.ctx, self.newest_policies(state), metrics))
            metrics.update(env_steps=state.env_steps, iteration_env_steps=work.env_steps,
                           iteration_time_s=self.elapsed() - t0, wall_time_s=self.elapsed())
            self.end_iteration(state, metrics)
        return stop

    def end_iteration(self, state: S, metrics: dict[str, Any]) -> None:
        """Close iteration ``state.iteration``: its metrics line joins the history, the
        state takes the run's wall time and is checkpointed; only then does the line go
        to ``metrics.jsonl`` and the ``iteration_end`` hooks (a resume drops what an
        interrupted iteration wrote past its checkpoint)."""
        state.history.append(metrics)
        state.wall_time_s = self.elapsed()
        self.checkpoint(state)
        self.ctx.run_dir.append_metrics(metrics)
        self.ctx.hooks.iteration_end(self.ctx.info, state.iteration, metrics)

    def checkpoint(self, state: S) -> None:
        """Commit ``state`` (the common fields, the state's own, the learners' states and
        the iteration's history line), then write the derived files and fire the
        ``checkpoint`` hook."""
        own, arrays = state.to_checkpoint()
        saved = {"iteration": state.iteration, "history_length": len(state.history), "env_steps": state.env_steps,
                 "wall_time_s": state.wall_time_s, **own}
        new_lines = state.history[-1:] if state.iteration else []
        path = self.ctx.run_dir.commit(saved, arrays, new_lines, learners=state.learners)
        self.write_outputs(state)
        self.ctx.hooks.checkpoint(self.ctx.info, str(path))

    def fresh(self) -> S:
        """A fresh run's state (:meth:`start`), committed as the first checkpoint."""
        state = self.start()
        state.wall_time_s = self.elapsed()
        self.checkpoint(state)
        return state

    def resume(self) -> S:
        """The last checkpoint's state: what an interrupted iteration left past it is
        dropped, the wall time carried over, the learners' states and the state's
        policies read back (the policies put on the backend), the derived files written."""
        ctx = self.ctx
        saved, state = self.committed()
        ctx.run_dir.truncate_history(saved["history"])
        ctx.run_dir.restore_metrics(saved["history"])
        self.base_wall_time = float(saved["wall_time_s"])
        for pid in state.held_policies():
            self.publish(pid, ctx.run_dir.load_policy(pid), announce=False)
        self.restored(state)
        self.write_outputs(state)
        return state

    def committed(self) -> tuple[dict[str, Any], S]:
        """The last checkpoint: its saved fields and the state it holds (read by the
        state's codec, with the learners' states)."""
        ctx = self.ctx
        saved, arrays = ctx.run_dir.load_state()
        common = {"iteration": int(saved["iteration"]), "history": saved["history"],
                  "env_steps": int(saved["env_steps"]), "wall_time_s": float(saved["wall_time_s"]),
                  "learners": ctx.run_dir.load_learners(saved)}
        return saved, self.State.from_checkpoint(common, saved, arrays, self)  # type: ignore[return-value]

    def _last_committed(self, state: S | None) -> S | None:
        """What a run that stops with an error or an interrupt reports and finishes with:
        its last committed state (``state`` may be half-way through an iteration, e.g.
        holding a new policy that its meta-strategy does not cover yet); None where none
        was committed or it cannot be read (the error that stops the run is the one
        reported)."""
        if state is None:
            return None
        try:
            return self.committed()[1]
        except Exception as exc:
            log.warning("popmarl: the last checkpoint could not be read for the summary: %s", describe(exc))
            return None

    def base_summary(self, status: str, reason: str) -> dict[str, Any]:
        """The keys every ``summary.json`` has, before any state exists."""
        return {
            "scenario": self.ctx.info.scenario, "status": status, "stop_reason": reason,
            "seed": self.ctx.config.seed, "iterations": 0, "populations": {}, "nash_conv": None,
            "exploitability": None, "env_steps": 0, "wall_time_s": self.elapsed(),
        }

    def summary(self, state: S | None, status: str, reason: str) -> dict[str, Any]:
        """``summary.json``: :meth:`base_summary` and, given a state, its iterations and
        env steps and the scenario's :meth:`details`."""
        summary = self.base_summary(status, reason)
        if state is not None:
            summary.update({"iterations": state.iteration, "env_steps": state.env_steps, **self.details(state)})
        return summary

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
            self.prepare()
            state = self.resume() if context.resume else self.fresh()
            status, reason = self.loop(state)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM under `popmarl run`
            self._end(self._last_committed(state), "stopped",
                      "terminated" if isinstance(exc, Terminated) else "interrupted", exc)
            raise
        except BaseException as exc:
            self._end(self._last_committed(state), "failed", f"error: {describe(exc)}", exc)
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
