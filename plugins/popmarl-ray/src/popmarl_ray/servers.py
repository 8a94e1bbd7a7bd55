"""The parameter server and the episode server, run as Ray actors.

They exist only where there are processes: the learner actor publishes versioned
weights to the parameter server (``push``/``version``/``pull``) and the rollout workers
queue the episodes they play on the episode server (``put``/``take``), both keyed by the
training attempt. Weights travel as object references (each version is put in the
object store once, by the learner), episodes carry the weights version they were played
with, and a learner waits on its queue instead of polling.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

import attrs
import ray

from popmarl.records import Episode

WeightsRef = list[ray.ObjectRef]  # wrapped in a list so Ray passes the reference, not the value


class ParameterServerActor:
    """The newest weights (an object reference) of each training attempt, by key, with a
    version number; workers pull them only when newer than the copy they hold."""

    def __init__(self) -> None:
        self._store: dict[str, tuple[int, WeightsRef]] = {}

    def push(self, key: str, weights: WeightsRef) -> int:
        """Publish new weights for ``key``; return their version (1, 2, ...)."""
        version = self.version(key) + 1
        self._store[key] = (version, weights)
        return version

    def version(self, key: str) -> int:
        """The newest version of ``key`` (0 when nothing was pushed)."""
        entry = self._store.get(key)
        return 0 if entry is None else entry[0]

    def pull(self, key: str, have: int) -> tuple[int, WeightsRef] | None:
        """``(version, weights)`` if newer than ``have``, else None (nothing to copy)."""
        entry = self._store.get(key)
        if entry is None or entry[0] <= have:
            return None
        return entry

    def ready(self) -> int:
        import os

        return os.getpid()

    def drop(self, key: str) -> None:
        """Forget ``key`` (its training is over), releasing its weights."""
        self._store.pop(key, None)

    def size(self) -> int:
        """How many keys hold weights."""
        return len(self._store)


@attrs.frozen(kw_only=True)
class Batch:
    """What a learner takes: fresh episodes and the weights version each was played
    with, and its key's running totals (episodes and env steps played, episodes dropped
    as stale or for lack of room); ``closed`` once the key is closed (the attempt is
    over: its learner stops)."""

    episodes: tuple[Episode, ...]
    versions: tuple[int, ...]
    env_steps: int
    played: int
    dropped: int
    closed: bool = False


NEW, OPEN, CLOSED = "new", "open", "closed"
#: How many closed keys the episode server remembers (to refuse their late episodes).
CLOSED_MEMORY = 4096


class _Stream:
    """One training attempt's queue of ``(version, episode)`` and its totals."""

    def __init__(self, capacity: int) -> None:
        self.state = NEW
        self.queue: deque[tuple[int, Episode]] = deque()
        self.capacity = capacity
        self.env_steps = self.played = self.dropped = 0
        self.waiting = 0  # wait_open calls on the stream
        self.changed = asyncio.Condition()

    def add(self, version: int, episodes: Sequence[Episode], env_steps: int) -> None:
        self.env_steps += env_steps
        self.played += len(episodes)
        self.queue.extend((version, e) for e in episodes)
        while len(self.queue) > self.capacity:
            self.queue.popleft()
            self.dropped += 1

    def drop_older(self, min_version: int) -> None:
        kept = [item for item in self.queue if item[0] >= min_version]
        self.dropped += len(self.queue) - len(kept)
        self.queue = deque(kept)

    def fresh(self, min_version: int) -> int:
        return sum(1 for version, _ in self.queue if version >= min_version)


class EpisodeServerActor:
    """Per training attempt (key), a bounded FIFO of episodes from rollout workers to one
    learner. A key is opened by its learner when it starts training by rollouts and
    closed when it stops; episodes put to a key that is not open are refused. A closed
    key's stream is dropped at once (the last ``CLOSED_MEMORY`` closed keys are
    remembered, so late episodes and reopening stay refused), and a stream only waited
    on is dropped when its wait times out: streams do not pile up over a run. An async
    actor: a waiting ``take`` or ``wait_open`` does not block ``put``."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._streams: dict[str, _Stream] = {}
        self._closed: dict[str, None] = {}  # insertion-ordered: the oldest is forgotten first

    async def ready(self) -> int:
        import os

        return os.getpid()

    async def size(self) -> int:
        """How many streams are held (open, or waited on)."""
        return len(self._streams)

    def _stream(self, key: str) -> _Stream:
        if key not in self._streams:
            self._streams[key] = _Stream(self.capacity)
        return self._streams[key]

    async def open(self, key: str) -> None:
        """Start accepting episodes for ``key`` (not once it was closed)."""
        if key in self._closed:
            return
        stream = self._stream(key)
        async with stream.changed:
            stream.state = OPEN
            stream.changed.notify_all()

    async def close(self, key: str) -> None:
        """Stop accepting episodes for ``key`` and drop its stream (idempotent)."""
        self._closed[key] = None
        while len(self._closed) > CLOSED_MEMORY:
            del self._closed[next(iter(self._closed))]
        stream = self._streams.pop(key, None)
        if stream is not None:
            async with stream.changed:
                stream.state = CLOSED
                stream.queue.clear()
                stream.changed.notify_all()

    async def wait_open(self, key: str, timeout_s: float) -> str:
        """Wait until ``key`` is opened or closed; return its state (``new`` on timeout)."""
        if key in self._closed:
            return CLOSED
        stream = self._stream(key)
        stream.waiting += 1
        try:
            async with stream.changed:
                try:
                    await asyncio.wait_for(stream.changed.wait_for(lambda: stream.state != NEW), timeout_s)
                except asyncio.TimeoutError:
                    pass
                return stream.state
        finally:
            stream.waiting -= 1
            if stream.state == NEW and not stream.waiting and self._streams.get(key) is stream:
                del self._streams[key]

    async def put(self, key: str, version: int, episodes: Sequence[Episode], env_steps: int) -> bool:
        """Queue ``episodes`` played with weights ``version``; False if ``key`` is not open."""
        stream = self._streams.get(key)
        if stream is None:
            return False
        async with stream.changed:
            if stream.state != OPEN:
                return False
            stream.add(version, episodes, env_steps)
            stream.changed.notify_all()
            return True

    async def take(self, key: str, *, min_items: int, min_version: int, timeout_s: float) -> Batch:
        """Drop the queued episodes older than ``min_version``, wait up to ``timeout_s``
        for ``min_items`` fresh ones, and return every fresh episode queued (none, and
        zero totals, for a key that is not open)."""
        stream = self._streams.get(key)
        if stream is None:
            return Batch(episodes=(), versions=(), env_steps=0, played=0, dropped=0, closed=key in self._closed)
        async with stream.changed:
            stream.drop_older(min_version)
            try:
                await asyncio.wait_for(
                    stream.changed.wait_for(lambda: stream.state == CLOSED or stream.fresh(min_version) >= min_items),
                    timeout_s,
                )
            except asyncio.TimeoutError:
                pass
            stream.drop_older(min_version)
            versions = tuple(v for v, _ in stream.queue)
            episodes = tuple(e for _, e in stream.queue)
            stream.queue.clear()
            return Batch(episodes=episodes, versions=versions, env_steps=stream.env_steps, played=stream.played,
                         dropped=stream.dropped, closed=stream.state == CLOSED)
