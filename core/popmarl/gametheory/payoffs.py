"""The n-player payoff table of the meta-game, grown one policy per population at a time.

Axis ``k`` (``k``-th env agent) indexes the pool of the population mapped to that agent;
``values[k, i_1, ..., i_n]`` is agent ``k``'s expected return when agent ``j`` plays its
``i_j``-th policy. Only entries never evaluated are evaluated again. A table grown by
:func:`evaluate_missing` knows each axis's policy ids, which its file (``payoffs.npz``)
records with it.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from popmarl.data.atomic import FAST_DEFLATE_LEVEL, write_npz
from popmarl.data.tasks import EvalTask
from popmarl.errors import CheckpointError

if TYPE_CHECKING:
    from popmarl.interfaces.backend import Backend


@attrs.frozen(kw_only=True)
class PayoffTable:
    """Payoffs and which entries are known, and where known each axis's policy ids
    (``policy_ids``; None until :func:`evaluate_missing` grows the table to them).
    Immutable: :meth:`grow` and :meth:`fill` return new tables."""

    agents: tuple[str, ...]
    values: np.ndarray
    filled: np.ndarray
    policy_ids: tuple[tuple[str, ...], ...] | None = attrs.field(default=None, eq=False)

    @classmethod
    def empty(cls, agents: Sequence[str]) -> PayoffTable:
        n = len(agents)
        shape = (0,) * n
        return cls(agents=tuple(agents), values=np.zeros((n, *shape)), filled=np.zeros(shape, bool))

    @property
    def shape(self) -> tuple[int, ...]:
        """Pool size along each agent's axis."""
        return tuple(self.filled.shape)

    @property
    def complete(self) -> bool:
        return bool(self.filled.all())

    def grow(self, shape: Sequence[int]) -> PayoffTable:
        """A table of the larger ``shape``; the new entries are unknown."""
        shape = tuple(shape)
        if len(shape) != len(self.agents) or any(n < o for n, o in zip(shape, self.shape)):
            raise ValueError(f"cannot grow a payoff table of shape {self.shape} to {shape}")
        old = tuple(slice(0, s) for s in self.shape)
        values = np.zeros((len(self.agents), *shape))
        values[(slice(None), *old)] = self.values
        filled = np.zeros(shape, bool)
        filled[old] = self.filled
        return attrs.evolve(self, values=values, filled=filled, policy_ids=None)

    def missing(self) -> Iterator[tuple[int, ...]]:
        """The indices of the entries not yet evaluated, in row-major order."""
        for index in np.argwhere(~self.filled):
            yield tuple(int(i) for i in index)

    def fill(self, entries: Sequence[tuple[tuple[int, ...], np.ndarray]]) -> PayoffTable:
        """A table with each ``(index, returns per agent)`` entry set."""
        values = self.values.copy()
        filled = self.filled.copy()
        for index, returns in entries:
            entry: tuple[slice | int, ...] = (slice(None), *index)
            values[entry] = returns
            filled[index] = True
        return attrs.evolve(self, values=values, filled=filled)

    def with_ids(self, policy_ids: Sequence[Sequence[str]]) -> PayoffTable:
        """This table, with ``policy_ids`` (one list per axis, as long as the axis) its axes'."""
        ids = tuple(tuple(str(p) for p in axis) for axis in policy_ids)
        if tuple(len(axis) for axis in ids) != self.shape:
            raise ValueError(f"policy ids of {[len(axis) for axis in ids]} policies for a table of shape {self.shape}")
        return attrs.evolve(self, policy_ids=ids)

    def file_arrays(self, policy_ids: Sequence[Sequence[str]] | None = None) -> dict[str, np.ndarray]:
        """The arrays of ``payoffs.npz``: ``payoffs``, ``filled``, ``agents``, each axis's
        ``policy_ids_<k>`` (``policy_ids``, or the table's own) and ``digest``, a hash of
        them all (:func:`table_digest`) that tells whether a file already holds the table."""
        ids = self.policy_ids if policy_ids is None else policy_ids
        if ids is None:
            raise ValueError("a payoff table's file needs its axes' policy ids")
        arrays = {"payoffs": self.values, "filled": self.filled,
                  "agents": np.array(self.agents, dtype=str),
                  **{f"policy_ids_{k}": np.array(list(axis), dtype=str) for k, axis in enumerate(ids)}}
        return {**arrays, "digest": np.array(table_digest(arrays))}

    def save(self, path: str | os.PathLike[str], policy_ids: Sequence[Sequence[str]] | None = None) -> None:
        """Write ``payoffs.npz`` atomically (:meth:`file_arrays`), unless the file already
        holds this table (its digest says so): the table of a run's checkpoint is committed
        with it (:meth:`popmarl.runs.rundir.RunDirectory.commit`), and saving it again
        after the commit leaves the file as it is. Deflated at zlib's fastest level: a run
        rewrites the growing table each iteration."""
        arrays = self.file_arrays(policy_ids)
        if stored_digest(path) != str(arrays["digest"]):
            write_npz(path, arrays, level=FAST_DEFLATE_LEVEL)

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], agents: Sequence[str] | None = None) -> PayoffTable:
        """The table of :meth:`file_arrays` (``agents`` where they lack theirs), with its
        policy ids where they hold them."""
        names = tuple(str(a) for a in arrays["agents"]) if "agents" in arrays else tuple(agents or ())
        keys = [f"policy_ids_{k}" for k in range(len(names))]
        ids = tuple(tuple(str(p) for p in arrays[key]) for key in keys) if all(k in arrays for k in keys) else None
        return cls(agents=names, values=arrays["payoffs"], filled=np.asarray(arrays["filled"]).astype(bool),
                   policy_ids=ids)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> tuple[PayoffTable, list[list[str]]]:
        """Read a table written by :meth:`save` (no pickles), with its policy ids."""
        try:
            with np.load(path, allow_pickle=False) as data:
                table = cls.from_arrays({key: data[key] for key in data.files})
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"{path}: not a readable payoff table ({exc})") from None
        if table.policy_ids is None:
            raise CheckpointError(f"{path}: not a readable payoff table (no policy ids)")
        if table.values.shape != (len(table.agents), *table.filled.shape):
            raise CheckpointError(f"{path}: payoff array shape {table.values.shape} does not match its agents")
        return table, [list(axis) for axis in table.policy_ids]


def table_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """A SHA-256 of a payoff table's arrays (every key but ``digest``, in order): of their
    names, dtypes, shapes and bytes."""
    digest = hashlib.sha256()
    for key, value in arrays.items():
        if key != "digest":
            value = np.ascontiguousarray(value)
            digest.update(f"{key}:{value.dtype.str}:{value.shape};".encode())
            digest.update(value.tobytes())
    return digest.hexdigest()


def stored_digest(path: str | os.PathLike[str]) -> str | None:
    """The ``digest`` a payoff table file records (reading that alone), or None where
    there is no such file, or it records none (written before digests) or is unreadable."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return str(data["digest"]) if "digest" in data.files else None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None


def evaluate_missing(table: PayoffTable, axis_ids: Sequence[Sequence[str]], *, backend: Backend,
                     agents: Sequence[str], episodes: int, seed: int) -> tuple[PayoffTable, int, int]:
    """``table`` grown to the pools ``axis_ids`` (one list of policy ids per seat) with only
    its missing entries evaluated on ``backend`` (returns only; ``episodes`` each from
    ``seed``, or exactly where the env allows); returns it, the env steps sampled and how
    many entries were evaluated exactly."""
    table = table.grow([len(ids) for ids in axis_ids])
    tasks = [EvalTask(index=index, profile={a: axis_ids[k][i] for k, (a, i) in enumerate(zip(agents, index))},
                      episodes=episodes, seed=seed, outcomes=False)
             for index in table.missing()]
    results = backend.evaluate(tasks)
    table = table.fill([(r.index, r.returns) for r in results]).with_ids(axis_ids)
    return table, sum(r.env_steps for r in results), sum(r.exact for r in results)
