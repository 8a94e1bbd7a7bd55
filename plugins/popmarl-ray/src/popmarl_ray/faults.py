"""Failures: one-line errors, which Ray errors mean a dead actor, replacement and retries.

Ray's own exceptions carry remote tracebacks many lines long; the user gets one line
(the full text stays in the exception's ``detail``). An error a component raised on
purpose (a :class:`popmarl.errors.UserError`) is re-raised as is.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError

from popmarl.errors import UserError

ActorHandle = Any


class RayBackendError(UserError):
    """A Ray failure the backend could not recover from (one line; ``detail`` holds Ray's
    full message)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class RayConnectionError(UserError):
    """No Ray to connect to at the configured address."""


def first_line(exc: BaseException) -> str:
    """A one-line description of ``exc`` (of its remote cause for a task error)."""
    if isinstance(exc, RayTaskError) and exc.cause is not None and not isinstance(exc.cause, RayTaskError):
        cause = exc.cause
        if isinstance(cause, RayError):
            return first_line(cause)
        return f"{type(cause).__name__}: {_head(str(cause))}"
    if isinstance(exc, RayActorError):
        lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("\t")]
        return " ".join(lines[:2]) or type(exc).__name__
    return _head(str(exc)) or type(exc).__name__


def _head(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def raise_if_user_error(exc: BaseException) -> None:
    """Re-raise the component's own error when a remote task failed on bad input."""
    if isinstance(exc, RayTaskError) and isinstance(exc.cause, UserError):
        raise exc.cause from None


def actor_died(exc: BaseException) -> bool:
    """Whether ``exc`` says the called actor itself is dead (not that its method raised)."""
    return isinstance(exc, RayActorError) and not isinstance(exc, RayTaskError)


def is_ray_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure of a remote call (retryable, unless a user error)."""
    return isinstance(exc, RayError)


class Retries:
    """Counts failures per task; the one past ``limit`` ends the run with one line."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        self.counts: dict[Hashable, int] = {}

    def failed(self, key: Hashable, exc: BaseException) -> None:
        """Record a failure of ``key``; raise :class:`RayBackendError` when out of retries."""
        raise_if_user_error(exc)
        count = self.counts.get(key, 0) + 1
        self.counts[key] = count
        if count > self.limit:
            raise RayBackendError(f"ray backend: {self.what} failed {count} times: {first_line(exc)}",
                                  detail=str(exc)) from None


class ActorGroup:
    """A fixed number of interchangeable actors, one per slot. A dead actor is replaced
    in its slot by a fresh one that ``restore`` gives the frozen policies again; the slot's
    generation tells calls made to the old actor from calls made to the new one."""

    def __init__(self, *, what: str, size: int, make: Callable[[int], ActorHandle],
                 restore: Callable[[ActorHandle], None]) -> None:
        self.what = what
        self._make = make
        self._restore = restore
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
