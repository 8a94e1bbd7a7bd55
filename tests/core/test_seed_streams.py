"""Seeds from named streams (:mod:`popmarl.data.seeds`): every stream of the code base over
1,000 iterations x 1,000 players gives distinct seeds, across streams too; ids of other
lengths never meet; malformed names are refused; seeds take 64 bits, and a run seeded past
2**63 runs.

The grid holds millions of seeds, more than :func:`stream_seed` computes in a test's time
(about 10 us each), so :func:`grid_seeds` computes numpy's ``SeedSequence`` for a whole
array of keys at once, checked against :func:`stream_seed` on a sample of every stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from popmarl.data.seeds import ID_LIMIT, MAX_SEED, STREAMS, seed32, stream_key, stream_seed

from testkit.run_files import read_npz, without_times

REPO = Path(__file__).resolve().parents[2]
#: Values of each of a stream's first two ids (iterations, players, populations,
#: versions...), and of its further ids (levels, parts), in the grid.
WIDE, NARROW = 1000, 2
#: Run seeds the grid is checked with: small, 64-bit, past 64 bits.
RUN_SEEDS = (0, 2**63 + 12345)

# numpy's SeedSequence constants (numpy/random/bit_generator.pyx).
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R, _POOL = 0xCA01F9DD, 0x4973F715, 4
_MASK = 2**32 - 1


def _words(value: int) -> list[int]:
    """``value`` as SeedSequence reads an integer: little-endian 32-bit words, one at least."""
    words = []
    while True:
        words.append(value & _MASK)
        value >>= 32
        if not value:
            return words


def _hash_pairs(init: int, mult: int) -> Iterator[np.uint32]:
    """SeedSequence's running hash constant, the same for every key: per hashmix call, the
    constant it xors with, then the one it multiplies by (the former times ``mult``)."""
    h = init
    while True:
        yield np.uint32(h)
        h = (h * mult) & _MASK
        yield np.uint32(h)


def _hashmix(value: np.ndarray, consts: Iterator[np.uint32]) -> np.ndarray:
    value = value ^ next(consts)
    value = value * next(consts)
    return value ^ (value >> np.uint32(16))


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    result = np.uint32(_MIX_MULT_L) * x - np.uint32(_MIX_MULT_R) * y
    return result ^ (result >> np.uint32(16))


def grid_seeds(seed: int, stream: str, ids: np.ndarray) -> np.ndarray:
    """``stream_seed(seed, stream, *row)`` for every row of ``ids`` (shape ``(n, k)``), as
    one array: SeedSequence's entropy mixing and ``generate_state(1, uint64)``, vectorized."""
    n = len(ids)
    key = stream_key(stream)
    run = _words(seed)
    constant = [*run, *[0] * (_POOL - len(run)), key & _MASK, key >> 32]
    entropy = [np.full(n, w, np.uint32) for w in constant] + [ids[:, j].astype(np.uint32) for j in range(ids.shape[1])]
    consts = _hash_pairs(_INIT_A, _MULT_A)
    mixer = [_hashmix(entropy[i], consts) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                mixer[dst] = _mix(mixer[dst], _hashmix(mixer[src], consts))
    for src in range(_POOL, len(entropy)):
        for dst in range(_POOL):
            mixer[dst] = _mix(mixer[dst], _hashmix(entropy[src], consts))
    out = _hash_pairs(_INIT_B, _MULT_B)
    low, high = (_hashmix(mixer[i], out) for i in range(2))
    return low.astype(np.uint64) | (high.astype(np.uint64) << np.uint64(32))


def grid(arity: int) -> np.ndarray:
    """Every id tuple of a stream with ``arity`` ids: :data:`WIDE` values of the first two,
    :data:`NARROW` of the rest, one row each."""
    sizes = [WIDE if j < 2 else NARROW for j in range(arity)]
    if not sizes:
        return np.zeros((1, 0), np.int64)
    return np.stack([axis.ravel() for axis in np.meshgrid(*map(np.arange, sizes), indexing="ij")], axis=1)


@pytest.mark.parametrize("seed", RUN_SEEDS)
def test_every_stream_over_1000_iterations_and_players_gives_distinct_seeds(seed: int) -> None:
    rng = np.random.default_rng(seed32(seed))
    seeds = []
    for stream in STREAMS:
        ids = grid(len(stream.ids))
        values = grid_seeds(seed, stream.name, ids)
        sample = np.unique(np.r_[0, len(ids) - 1, rng.integers(len(ids), size=50)])
        assert [int(values[i]) for i in sample] == [stream_seed(seed, stream.name, *map(int, ids[i])) for i in sample]
        seeds.append(values)
    every = np.sort(np.concatenate(seeds))
    assert len(every) >= 8 * WIDE * WIDE  # the two-id streams' grids at least
    assert not np.any(every[1:] == every[:-1])  # no seed twice


def test_grid_seeds_equals_stream_seed_for_ids_of_every_length() -> None:
    rng = np.random.default_rng(5)
    for seed in (0, 1, 2**32, 2**64 + 3, 2**127):
        for arity in range(5):
            ids = rng.integers(ID_LIMIT, size=(20, arity), dtype=np.uint64)
            got = grid_seeds(seed, "psro.train", ids)
            assert [int(s) for s in got] == [stream_seed(seed, "psro.train", *map(int, row)) for row in ids]


def test_ids_of_other_lengths_never_meet() -> None:
    """A prefix, a zero appended, the ids split or joined: each a seed of its own."""
    keys = [(), (0,), (0, 0), (0, 0, 0), (1,), (1, 0), (0, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1), (7, 3), (7, 3, 0),
            (7, 3, 5), (7,), (3, 7), (2**32 - 1,), (2**32 - 1, 0), (0, 2**32 - 1)]
    for seed in (0, 2**63 + 1):
        seeds = [stream_seed(seed, stream, *ids) for stream in ("psro.train", "league.train") for ids in keys]
        assert len(set(seeds)) == len(seeds)


def test_stream_seed_is_deterministic_and_keyed_by_everything() -> None:
    seed = stream_seed(5, "league.train", 1, 2)
    assert seed == stream_seed(5, "league.train", 1, 2) == stream_seed(np.int64(5), "league.train", np.int32(1), 2)
    others = {stream_seed(6, "league.train", 1, 2), stream_seed(5, "league.train", 2, 1),
              stream_seed(5, "league.reset", 1, 2), stream_seed(5, "league.train", 1, 2, 0)}
    assert seed not in others and len(others) == 4


def test_seeds_take_64_bits_and_seed32_31() -> None:
    seeds = [stream_seed(s, "psro.eval", i) for s in (0, 2**63, 2**64 - 1, 2**64, 10**30) for i in range(200)]
    assert all(0 <= s <= MAX_SEED for s in seeds) and len(set(seeds)) == len(seeds)
    assert max(seeds) >= 2**63 and max(seeds) > 2**62 * 3  # the top bits are used
    small = [seed32(s) for s in (*seeds, 0, 2**200)]
    assert all(0 <= s < 2**31 for s in small) and max(small) >= 2**30
    assert seed32(MAX_SEED) == seed32(MAX_SEED) != seed32(MAX_SEED - 1)
    np.random.RandomState(seed32(MAX_SEED))  # a 32-bit consumer takes it


def test_malformed_stream_names_and_ids_out_of_range_are_refused() -> None:
    for name in ("", "PSRO.train", "psro..train", ".eval", "my pkg"):
        with pytest.raises(ValueError, match="a name is dotted lowercase words"):
            stream_seed(0, name, 1)
    assert stream_seed(0, "mypkg.draw", 1) != stream_seed(0, "mypkg.drew", 1)  # a plugin's own stream
    for ids in ((-1,), (ID_LIMIT,), (0, 2**40)):
        with pytest.raises(ValueError, match="ids must lie"):
            stream_seed(0, "league.train", *ids)


def test_streams_are_named_documented_and_keyed_apart() -> None:
    names = [s.name for s in STREAMS]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z_]+(\.[a-z_]+)*", n) for n in names)
    assert all(s.about and all(re.fullmatch(r"[a-z_]+", i) for i in s.ids) for s in STREAMS)
    assert len({stream_key(n) for n in names}) == len(names)


def _stream_names_in_source() -> Iterator[tuple[Path, str]]:
    """``(file, name)`` of every ``stream_seed(..., "name"`` written in the code base."""
    call = re.compile(r"stream_seed\([^()\"']*?(?:\([^()]*\)[^()\"']*?)*,\s*[\"']([^\"']+)[\"']")
    for root in ("core", "plugins", "contrib"):
        for path in (REPO / root).rglob("*.py"):
            if "build" not in path.parts:
                for name in call.findall(path.read_text(encoding="utf-8")):
                    yield path, name


def test_every_stream_named_in_the_code_is_listed() -> None:
    found = list(_stream_names_in_source())
    listed = {s.name for s in STREAMS}
    assert {"learner.round", "exploit.train", "ray.explore"} <= {name for _, name in found}
    assert [(str(p.relative_to(REPO)), n) for p, n in found if n not in listed] == []


@pytest.mark.parametrize("seed", [2**63 + 7, 2**64 + 7])
def test_a_run_seeded_past_2_63_runs_the_same_each_time(run_inprocess: Callable[..., dict[str, Any]],
                                                        tmp_path: Path, seed: int) -> None:
    """The run seed is the user's, of any size (here as ``--set seed=...`` gives it): the
    seeds derived from it take 64 bits, and a sampled psro run with them completes, the
    same each time."""
    config: dict[str, Any] = {"env": {"name": "matrix", "params": {"game": "random_general_sum", "size": 3}},
                              "algorithm": {"name": "random"}, "stopping": {"max_iterations": 2},
                              "evaluation": {"exact": "never", "episodes_per_entry": 8}}
    first = run_inprocess(out="a", overrides=[f"seed={seed}"], **config)
    again = run_inprocess(out="b", overrides=[f"seed={seed}"], **config)
    assert first["status"] == "completed" and first["iterations"] == 2 and first["seed"] == seed
    assert without_times(first) == without_times(again)
    table, table_again = (read_npz(tmp_path / out / "payoffs.npz")["payoffs"] for out in ("a", "b"))
    np.testing.assert_array_equal(table, table_again)
