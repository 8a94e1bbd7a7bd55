"""Failures: which errors are faults of a process or machine (retried on a fresh actor),
one-line errors, replacement and retries.

Ray's own exceptions carry remote tracebacks many lines long; the user gets one line
(the full text stays in the exception's ``detail``). What a component raises in an actor
is not retried, as it would fail again: an error raised on purpose (a
:class:`popmarl.api.UserError`) is re-raised as is, anything else (a plugin's bug)
ends the run as a :class:`RemotePluginError` that carries the remote traceback.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import ray
from ray.exceptions import (
    ActorUnschedulableError,
    GetTimeoutError,
    LocalRayletDiedError,
    NodeDiedError,
    ObjectLostError,
    ObjectStoreFullError,
    OutOfDiskError,
    OutOfMemoryError,
    RayActorError,
    RayError,
    RaySystemError,
    RayTaskError,
    RpcError,
    TaskCancelledError,
    TaskUnschedulableError,
    UnserializableException,
    WorkerCrashedError,
)

from popmarl.api import PopmarlError, UserError
from popmarl_ray.feed import AttemptClosedError, StalledError

ActorHandle = Any
log = logging.getLogger("popmarl_ray")
#: How long a server may take to answer ``ready`` before it is taken for hung.
SERVER_PROBE_S = 30.0


class RayBackendError(UserError):
    """A Ray failure the backend could not recover from (one line; ``detail`` holds Ray's
    full message)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class RayConnectionError(UserError):
    """No Ray to connect to at the configured address."""


class RemotePluginError(PopmarlError):
    """A component's error raised in an actor that is neither a fault nor a
    :class:`~popmarl.api.UserError` (a plugin's bug): not retried, as it would fail
    again. The first line names it (``TypeError: ...``: the run's ``stop_reason``), the
    next ones hold the remote traceback (the CLI prints it); ``cause`` is the exception."""

    def __init__(self, exc: RayTaskError) -> None:
        super().__init__(f"{first_line(exc)}\n{remote_traceback(exc)}")
        self.cause = root_cause(exc)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CARETS = re.compile(r"^\s*[\^~]+[\s\^~]*$")


def remote_traceback(exc: RayTaskError) -> str:
    """Ray's text of a task error, plain: without its colours, or the markers left under
    the source lines of Ray's own frames it hides."""
    lines: list[str] = []
    for line in _ANSI.sub("", str(exc)).strip().splitlines():
        source = bool(lines) and lines[-1].startswith("    ") and not _CARETS.match(lines[-1])
        if _CARETS.match(line) and not source:
            continue
        lines.append(line)
    return "\n".join(lines)


class LateError(Exception):
    """An actor ran past its deadline (``task_timeout_s``): it is taken for hung."""


#: What a remote call fails with, raised in the driver or in the called actor, when a
#: process or machine fails (an actor or worker that died, a node or an out-of-memory
#: kill, a lost object, a call past its deadline), and a learner's attempt the driver
#: stopped (a server it used was replaced, or no episodes came): retried on a fresh actor.
FAULTS: tuple[type[BaseException], ...] = (
    RayActorError, WorkerCrashedError, LocalRayletDiedError, NodeDiedError, OutOfMemoryError, OutOfDiskError,
    ObjectStoreFullError, ObjectLostError, TaskCancelledError, GetTimeoutError, RaySystemError, RpcError,
    ActorUnschedulableError, TaskUnschedulableError, LateError, StalledError, AttemptClosedError,
)


def late(what: str, slot: int, doing: str, timeout_s: float) -> LateError:
    """The error of the actor of ``what`` in ``slot`` that spent ``timeout_s`` on ``doing``."""
    return LateError(f"{what} {slot} hung: {doing} for {timeout_s:g} s (task_timeout_s)")


def first_line(exc: BaseException) -> str:
    """A one-line description of ``exc`` (of its remote cause for a task error)."""
    cause = root_cause(exc)
    if cause is not exc:
        if isinstance(cause, RayError):
            return first_line(cause)
        return ": ".join(filter(None, [type(cause).__name__, _head(str(cause))]))
    if isinstance(exc, RayActorError):
        lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("\t")]
        return " ".join(lines[:2]) or type(exc).__name__
    return _head(str(exc)) or type(exc).__name__


def _head(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def root_cause(exc: BaseException) -> BaseException:
    """What the innermost remote task raised (``exc`` itself unless a task error): an actor
    whose call to another actor failed raises that call's task error."""
    while isinstance(exc, RayTaskError) and isinstance(exc.cause, BaseException) and exc.cause is not exc:
        exc = exc.cause
    return exc


def raise_if_user_error(exc: BaseException) -> None:
    """Re-raise the component's own error when a remote task failed on bad input."""
    cause = root_cause(exc)
    if cause is not exc and isinstance(cause, UserError):
        raise cause from None


def raise_if_plugin_error(exc: BaseException) -> None:
    """End the run when a remote task failed on the component's own error, not a fault:
    re-raise a :class:`~popmarl.api.UserError` as is, anything else as a
    :class:`RemotePluginError`."""
    raise_if_user_error(exc)
    if isinstance(exc, RayTaskError) and not is_ray_failure(exc):
        raise RemotePluginError(exc) from None


@contextmanager
def plugin_errors() -> Iterator[None]:
    """Around a backend call (a ``with`` block, or a decorator): a component's own error
    raised in an actor ends the call as :func:`raise_if_plugin_error` says (the
    schedulers re-raise such errors at once, see :func:`is_ray_failure`); faults the
    retries did not absorb pass unchanged."""
    try:
        yield
    except RayTaskError as exc:
        raise_if_plugin_error(exc)
        raise


def actor_died(exc: BaseException) -> bool:
    """Whether ``exc`` says the called actor itself is dead (not that its method raised)."""
    return isinstance(exc, RayActorError) and not isinstance(exc, RayTaskError)


def is_ray_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a fault of a process or machine, to retry: a Ray error about
    the call (a dead actor, a lost object, a timeout, ...), or a task error whose
    innermost cause is one of :data:`FAULTS` (e.g. the actor called a dead server). Not
    what a component raised (a bug or a user error): it would fail again."""
    if isinstance(exc, RayTaskError):
        cause = root_cause(exc)
        return cause is not exc and isinstance(cause, FAULTS)
    return isinstance(exc, (RayError, *FAULTS)) and not isinstance(exc, UnserializableException)


def outcome(ref: ray.ObjectRef) -> tuple[Any, BaseException | None]:
    """A finished call's value and None, or None and the fault of a process or machine it
    failed with (:func:`is_ray_failure`: the caller retries the work); any other error, a
    component's, is raised."""
    try:
        return ray.get(ref), None
    except Exception as exc:
        if not is_ray_failure(exc):
            raise
        return None, exc


class Retries:
    """Counts failures per task; the one past ``limit`` ends the run with one line."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        self.counts: dict[Hashable, int] = {}

    def failed(self, key: Hashable, exc: BaseException) -> None:
        """Record a failure of ``key``; raise :class:`RayBackendError` when out of retries
        (a component's own error at once: :func:`raise_if_plugin_error`)."""
        raise_if_plugin_error(exc)
        count = self.counts.get(key, 0) + 1
        self.counts[key] = count
        if count > self.limit:
            raise RayBackendError(f"ray backend: {self.what} failed {count} times: {first_line(exc)}",
                                  detail=str(exc)) from None


class ActorGroup:
    """A fixed number of interchangeable actors, one per slot. A dead (or hung) actor is replaced
    in its slot by a fresh one that ``restore`` gives the frozen policies again, and that
    is waited for (up to ``start_timeout_s``), so that its first call's deadline does not
    include its start; the slot's generation tells calls made to the old actor from
    calls made to the new one."""

    def __init__(self, *, what: str, size: int, make: Callable[[int], ActorHandle],
                 restore: Callable[[ActorHandle], None], start_timeout_s: float = 300.0) -> None:
        self.what = what
        self._make = make
        self._restore = restore
        self.start_timeout_s = start_timeout_s
        self.handles: list[ActorHandle] = [make(slot) for slot in range(size)]
        self.generations = [0] * size
        self.replaced = 0

    def __len__(self) -> int:
        return len(self.handles)

    def handle(self, slot: int) -> ActorHandle:
        return self.handles[slot]

    def replace(self, slot: int, generation: int) -> bool:
        """Replace the actor of ``slot`` if it is still the one of ``generation``."""
        if generation != self.generations[slot]:
            return False
        kill(self.handles[slot])
        fresh = self._make(slot)
        self._restore(fresh)
        self.handles[slot] = fresh
        self.generations[slot] += 1
        self.replaced += 1
        try:
            ray.get(fresh.ready.remote(), timeout=self.start_timeout_s)
        except GetTimeoutError:
            raise RayBackendError(f"ray backend: the new {self.what} {slot} did not start within "
                                  f"{self.start_timeout_s:g} s (start_timeout_s)") from None
        except RayError as exc:
            raise_if_plugin_error(exc)
            raise RayBackendError(f"ray backend: the new {self.what} {slot} failed to start: {first_line(exc)}",
                                  detail=str(exc)) from None
        return True

    def ready_refs(self) -> list[ray.ObjectRef]:
        """One ``ready`` call per actor (each returns its process id)."""
        return [h.ready.remote() for h in self.handles]

    def close(self) -> None:
        for handle in self.handles:
            kill(handle)
        self.handles = []


def kill(handle: ActorHandle) -> None:
    """Kill an actor, alive or not."""
    try:
        ray.kill(handle, no_restart=True)
    except Exception:  # already gone, or Ray shutting down
        pass


class Servers:
    """The run's parameter server and episode server. A dead (or unanswering) one is
    replaced by a fresh, empty one; ``on_replace`` hands the new pair to every actor
    that calls them. ``generation`` tells calls made before a replacement from later ones."""

    NAMES = {"params": "parameter server", "data": "episode server"}

    def __init__(self, *, make: dict[str, Callable[[], ActorHandle]],
                 on_replace: Callable[[ActorHandle, ActorHandle], None]) -> None:
        self._make = make
        self._on_replace = on_replace
        self.params: ActorHandle = make["params"]()
        self.data: ActorHandle = make["data"]()
        self.generation = 0
        self.replaced = 0

    def ready_refs(self) -> list[ray.ObjectRef]:
        return [self.params.ready.remote(), self.data.ready.remote()]

    def revive(self) -> list[str]:
        """Replace each server that is dead or does not answer; the names of those replaced."""
        dead = [name for name in self.NAMES if not _answers(getattr(self, name))]
        for name in dead:
            kill(getattr(self, name))
            setattr(self, name, self._make[name]())
            message = (f"ray backend: the {self.NAMES[name]} died; replaced it (the training attempts in flight "
                       "restart)")
            log.warning(message)
        if dead:
            ray.get(self.ready_refs(), timeout=SERVER_PROBE_S)
            self.generation += 1
            self.replaced += len(dead)
            self._on_replace(self.params, self.data)
        return [self.NAMES[name] for name in dead]

    def close(self) -> None:
        kill(self.params)
        kill(self.data)


def _answers(handle: ActorHandle) -> bool:
    try:
        ray.get(handle.ready.remote(), timeout=SERVER_PROBE_S)
    except (GetTimeoutError, RayActorError):
        return False
    return True
