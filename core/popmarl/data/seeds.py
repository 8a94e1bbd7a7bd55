"""Seeds derived from the run seed, so every task's randomness is reproducible and a
resumed run draws exactly what an uninterrupted one would.

Every seed comes from one :class:`numpy.random.SeedSequence` of the run seed, keyed by a
named **stream** (what the seed is for: ``"psro.train"``, ``"learner.round"``...) and the
stream's ids (iteration, population index, player...). The key is the stream's 64-bit
name hash as two 32-bit words, then one word per id, so two different (stream, ids) never
share a key, whatever their number of ids; and the seed has 64 bits, so two keys
practically never share a seed: no salt arithmetic, nothing that meets once a league
holds 100 players. Every stream of popmarl and its bundled plugins is listed, with what it
seeds, in :data:`STREAMS`; a plugin of its own names its streams after its package.

Derived seeds take 64 bits. A consumer that takes fewer (``numpy.random.RandomState``, an
env seeding a C ``int``) reduces the seed it is given with :func:`seed32` where it uses it.
"""

from __future__ import annotations

import functools
import hashlib
import re

import attrs
import numpy as np

#: The largest seed :func:`stream_seed` gives (seeds are unsigned 64-bit integers).
MAX_SEED = 2**64 - 1
#: Ids of a stream are below this (each enters the key as one 32-bit word).
ID_LIMIT = 2**32
_WORD = ID_LIMIT - 1


@attrs.frozen
class Stream:
    """A seed stream: its name (dotted, lowercase), what its ids are, in order, and what
    its seeds seed."""

    name: str
    ids: tuple[str, ...]
    about: str


#: Every seed stream of popmarl and its bundled plugins (a test checks that each name the
#: code passes to :func:`stream_seed` is listed here).
STREAMS: tuple[Stream, ...] = (
    # The learner loop and backends.
    Stream("learner.round", ("version", "part"),
           "the games a train task plays with its learners' weights `version` (round `version`); the "
           "local backend plays a round in one part (0), the ray backend's lock step in one part per worker"),
    Stream("ray.explore", ("attempt", "batch"),
           "a ray explore call's games outside the lock step: the training attempt and its batch number"),
    Stream("ray.eval_batch", ("batch",),
           "the games of the `batch`-th batch the ray backend cuts the eval tasks of one seed into"),
    # Tools.
    Stream("exploit.train", ("response", "seat"), "the training of `popmarl exploit`'s response `response` in a seat"),
    Stream("exploit.eval", (), "the evaluation games of `popmarl exploit`'s responses and meta-strategy"),
    Stream("tournament.pair", ("digest_high", "digest_low"),
           "the games of one tournament pairing, keyed by the two 32-bit halves of its cache key's digest"),
    # Scenarios.
    Stream("psro.initial", ("population",), "population `population`'s initial policy"),
    Stream("psro.train", ("iteration", "population", "level"),
           "an iteration's training task of a population's best response (its recommendation or level)"),
    Stream("psro.eval", ("iteration",), "the payoff entries an iteration evaluates"),
    Stream("psro.pipeline", ("iteration",), "the payoff entries of an iteration's pipeline (active) learners"),
    Stream("psro.approx_nash_conv", ("iteration",), "an iteration's approximate NashConv (`approx_nash_conv_every`)"),
    Stream("psro.ratings", ("entry",), "a payoff entry's rating games (one id per seat: the entry's index)"),
    Stream("league.player", ("player",), "player `player`'s learner"),
    Stream("league.train", ("iteration", "player"), "an iteration's training task of a player"),
    Stream("league.eval", ("iteration",), "the payoff entries among the frozen players an iteration adds"),
    Stream("league.meet", ("iteration",), "an iteration's games of the learning players against new frozen ones"),
    Stream("league.reset", ("iteration", "player"), "whether a league exploiter resets after a snapshot"),
    Stream("marl.initial", ("population",), "population `population`'s initial policy"),
    Stream("marl.learner", ("population",), "population `population`'s learner"),
    Stream("marl.train", ("iteration",), "an iteration's training task"),
    Stream("marl.eval", ("iteration",), "an iteration's evaluation games"),
    Stream("versus_random", ("iteration", "population"),
           "a population's games against uniformly random play (iteration 0: the uniform policy itself)"),
    Stream("reservoir.train", ("iteration", "part"),
           "the reservoir scenario's training in an iteration: its learner (part 0) and its task (part 1)"),
    Stream("reservoir.eval", ("iteration",), "the reservoir scenario's evaluation of an iteration"),
    Stream("reservoir.draw", ("iteration",), "the reservoir's slot draw of an iteration"),
)

_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")


@functools.lru_cache(maxsize=None)
def stream_key(stream: str) -> int:
    """The 64-bit key of stream ``stream`` (a hash of its name); ValueError for a name
    that is not dotted lowercase words (``psro.train``; a plugin's own streams start with
    its package's name, e.g. ``mypkg.draw``)."""
    if not _NAME.fullmatch(stream):
        raise ValueError(f"seed stream {stream!r}: a name is dotted lowercase words, e.g. mypkg.draw")
    return int.from_bytes(hashlib.blake2b(stream.encode(), digest_size=8).digest(), "big")


def stream_seed(seed: int, stream: str, *ids: int) -> int:
    """The 64-bit seed of ``stream`` for ``ids`` in the run of seed ``seed``: the same
    arguments always give the same seed, and different ones (another stream, other ids,
    more or fewer ids) practically never do. ``seed`` is a non-negative integer (below
    2**128, where the key's words start), each id one in ``[0, 2**32)``."""
    key = stream_key(stream)
    words = [int(i) for i in ids]
    if any(not 0 <= w < ID_LIMIT for w in words):
        raise ValueError(f"seed stream {stream!r}: ids must lie in [0, 2**32), not {tuple(ids)}")
    sequence = np.random.SeedSequence(int(seed), spawn_key=(key & _WORD, key >> 32, *words))
    return int(sequence.generate_state(1, np.uint64)[0])


def seed32(seed: int) -> int:
    """A seed below 2**31 determined by ``seed`` (any non-negative integer), for consumers
    that take no more: ``numpy.random.RandomState`` (32 bits), envs that keep their seed in
    a C ``int``."""
    return int(np.random.SeedSequence(int(seed)).generate_state(1)[0] >> 1)

