"""The parameter server and the episode server, run as Ray actors.

They exist only where there are processes: the learner actor publishes versioned
weights to the parameter server (``push``/``version``/``pull``) and the rollout workers
queue the episodes they play on the episode server (``put``/``take``), both keyed by
stream: one per learner of a training attempt (``<attempt>/<learner key>``). Weights
travel as object references (each version is put in the object store once, by the
learner); episodes travel as the batches a worker played (a learner's own decisions, or
its joint view), each with the weights version it was played with and the number of
games in it, and a learner waits on its queue instead of polling.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

import attrs
import ray

from popmarl.api import EpisodeBatch, JointEpisodes, PlayedGames

WeightsRef = list[ray.ObjectRef]  # wrapped in a list so Ray passes the reference, not the value
#: What a worker played for one learner in one call.
Played = EpisodeBatch | JointEpisodes


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
    """What a learner takes: fresh batches with the weights version each was played
    with (``parts``), and its stream's running totals (games and env steps played, games
    dropped as stale or for lack of room); ``closed`` once the stream is closed (the
    attempt is over: its learner stops)."""

    parts: tuple[tuple[int, Played], ...]
    env_steps: int
    played: int
    dropped: int
    closed: bool = False
    #: The fresh games: who played each seat, and the returns.
    games: PlayedGames = attrs.field(factory=PlayedGames)


NEW, OPEN, CLOSED = "new", "open", "closed"
#: How many closed keys the episode server remembers (to refuse their late episodes).
CLOSED_MEMORY = 4096


@attrs.define
class Quota:
    """An on-policy learner's wish: ``remaining`` more games of weights ``version``
    (``chunks``: the reservations made of it so far)."""

    version: int
    remaining: int
    chunks: int = 0


class _Stream:
    """One learner's queue of ``(version, batch, games)`` and its totals (in games)."""

    def __init__(self, capacity: int) -> None:
        self.quota: Quota | None = None  # only an on-policy learner's stream has one
        self.state = NEW
        self.queue: deque[tuple[int, Played, int, PlayedGames]] = deque()
        self.capacity = capacity
        self.held = 0  # games queued
        self.env_steps = self.played = self.dropped = 0
        self.waiting = 0  # wait_open calls on the stream
        self.changed = asyncio.Condition()

    def add(self, version: int, batch: Played, games: int, env_steps: int, played: PlayedGames) -> None:
        self.env_steps += env_steps
        self.played += games
        self.queue.append((version, batch, games, played))
        self.held += games
        while self.held > self.capacity and len(self.queue) > 1:
            _, _, dropped, _ = self.queue.popleft()
            self.held -= dropped
            self.dropped += dropped

    def drop_older(self, min_version: int) -> None:
        kept = [item for item in self.queue if item[0] >= min_version]
        self.dropped += self.held - sum(item[2] for item in kept)
        self.queue = deque(kept)
        self.held = sum(item[2] for item in kept)

    def fresh(self, min_version: int) -> int:
        return sum(games for version, _, games, _ in self.queue if version >= min_version)


class EpisodeServerActor:
    """Per stream (key), a bounded FIFO of episode batches from rollout workers to one
    learner (``capacity`` games). A key is opened by its learner when it starts training by rollouts and
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

    async def open(self, key: str, want: tuple[int, int] | None = None) -> None:
        """Start accepting episodes for ``key`` (not once it was closed); an on-policy
        learner's stream opens with its first wish, ``want``: ``(version, games)`` (see
        :meth:`want`), so that no worker finds it open without one and plays it unlimited."""
        if key in self._closed:
            return
        stream = self._stream(key)
        async with stream.changed:
            if want is not None:
                stream.quota = Quota(version=want[0], remaining=want[1])
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

    async def want(self, key: str, version: int, games: int) -> None:
        """An on-policy learner wants ``games`` games played with its weights
        ``version`` (and, until its next call, no others): workers reserve them before
        playing (:meth:`reserve`), so nothing is played that it would drop as stale."""
        stream = self._streams.get(key)
        if stream is None or stream.state != OPEN:
            return
        async with stream.changed:
            stream.quota = Quota(version=version, remaining=games)
            stream.changed.notify_all()

    async def reserve(self, items: Sequence[tuple[str, int]], games: int, timeout_s: float) -> tuple[int, int]:
        """How many games a worker holding weights ``version`` of each stream ``key``
        (``items``) may play now, at most ``games``, and the number of this reservation
        among those of the quota's version (-1 where no stream has a quota). A stream
        without a quota takes any number; one with a quota, what is left of it, and only
        from a worker that has its version (none to an older one: it pulls the newer
        weights first). Waits up to ``timeout_s`` while a quota is used up (its learner is
        updating); 0 games once a stream is closed."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            limited = []
            for key, version in items:
                stream = self._streams.get(key)
                if stream is None or stream.state != OPEN:
                    return 0, -1
                if stream.quota is not None:
                    if stream.quota.version != version:
                        return 0, -1
                    limited.append(stream)
            if not limited:
                return games, -1
            if all(stream.quota is not None and stream.quota.remaining > 0 for stream in limited):
                granted = min(games, *(stream.quota.remaining for stream in limited if stream.quota is not None))
                chunk = limited[0].quota.chunks if limited[0].quota is not None else -1
                for stream in limited:
                    if stream.quota is not None:
                        stream.quota.remaining -= granted
                        stream.quota.chunks += 1
                return granted, chunk
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return 0, -1
            waiting = next(stream for stream in limited if stream.quota is None or stream.quota.remaining <= 0)
            async with waiting.changed:
                try:
                    await asyncio.wait_for(waiting.changed.wait(), left)
                except asyncio.TimeoutError:
                    pass

    async def put(self, key: str, version: int, batch: Played, games: int, env_steps: int,
                  played: PlayedGames | None = None) -> bool:
        """Queue ``batch`` (``games`` games, ``env_steps`` env steps, the games themselves:
        ``played``) played with weights ``version``; False if ``key`` is not open."""
        stream = self._streams.get(key)
        if stream is None:
            return False
        async with stream.changed:
            if stream.state != OPEN:
                return False
            stream.add(version, batch, games, env_steps, played if played is not None else PlayedGames())
            stream.changed.notify_all()
            return True

    async def put_many(self, items: Sequence[tuple[str, int, Played]], games: int, env_steps: int,
                       played: PlayedGames | None = None) -> bool:
        """:meth:`put` of each ``(key, version, batch)`` (one call for a task's learners:
        the same games); False if any key is not open."""
        accepted = [await self.put(key, version, batch, games, env_steps, played)
                    for key, version, batch in items]
        return all(accepted)

    async def take(self, key: str, *, min_items: int, min_version: int, timeout_s: float) -> Batch:
        """Drop the queued batches older than ``min_version``, wait up to ``timeout_s``
        for ``min_items`` fresh games, and return every fresh batch queued (none, and zero
        totals, for a key that is not open)."""
        stream = self._streams.get(key)
        if stream is None:
            return Batch(parts=(), env_steps=0, played=0, dropped=0, closed=key in self._closed)
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
            parts = tuple((version, batch) for version, batch, _, _ in stream.queue)
            games = PlayedGames.join([item[3] for item in stream.queue])
            stream.queue.clear()
            stream.held = 0
            return Batch(parts=parts, env_steps=stream.env_steps, played=stream.played,
                         dropped=stream.dropped, closed=stream.state == CLOSED, games=games)
