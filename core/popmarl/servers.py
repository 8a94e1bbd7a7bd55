"""The episode (data) server and the parameter (policy) server.

Episodes flow from rollout workers to a learner's trainer; weights flow from the trainer
to the workers with a version number and are pulled only when newer. On the local
backend these are these in-process objects; the ray backend runs them as actors with
the same methods.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from popmarl.records import Episode, Weights


class ParameterServer:
    """The newest weights of each learning policy, by key, with a version number."""

    def __init__(self) -> None:
        self._store: dict[str, tuple[int, Weights]] = {}

    def push(self, key: str, weights: Weights) -> int:
        """Publish new weights for ``key``; return their version (1, 2, ...)."""
        version = self.version(key) + 1
        self._store[key] = (version, weights)
        return version

    def version(self, key: str) -> int:
        """The newest version of ``key`` (0 when nothing was pushed)."""
        entry = self._store.get(key)
        return 0 if entry is None else entry[0]

    def pull(self, key: str, have: int) -> tuple[int, Weights] | None:
        """``(version, weights)`` if newer than ``have``, else None (nothing to copy)."""
        entry = self._store.get(key)
        if entry is None or entry[0] <= have:
            return None
        return entry


class EpisodeServer:
    """A FIFO of finished episodes between workers and a trainer (bounded; the oldest
    are dropped first when full)."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._queue: deque[Episode] = deque(maxlen=capacity)

    def put(self, episodes: Sequence[Episode]) -> None:
        self._queue.extend(episodes)

    def take(self, max_items: int | None = None) -> list[Episode]:
        """Remove and return up to ``max_items`` episodes (all when None), oldest first."""
        n = len(self._queue) if max_items is None else min(max_items, len(self._queue))
        return [self._queue.popleft() for _ in range(n)]

    def __len__(self) -> int:
        return len(self._queue)
