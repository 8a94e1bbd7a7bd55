"""The n-player payoff table of the meta-game, grown one policy per population at a time.

Axis ``k`` (``k``-th env agent) indexes the pool of the population mapped to that agent;
``values[k, i_1, ..., i_n]`` is agent ``k``'s expected return when agent ``j`` plays its
``i_j``-th policy. Only entries never evaluated are evaluated again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from popmarl.data.atomic import write_npz
from popmarl.data.tasks import EvalTask
from popmarl.errors import CheckpointError

if TYPE_CHECKING:
    from popmarl.interfaces.backend import Backend


@attrs.frozen(kw_only=True)
class PayoffTable:
    """Payoffs and which entries are known. Immutable: :meth:`grow` and :meth:`fill`
    return new tables."""

    agents: tuple[str, ...]
    values: np.ndarray
    filled: np.ndarray

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
        return attrs.evolve(self, values=values, filled=filled)

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

    def save(self, path: str | os.PathLike[str], policy_ids: Sequence[Sequence[str]]) -> None:
        """Write ``payoffs.npz`` atomically, with each axis's policy ids."""
        arrays = {f"policy_ids_{k}": np.array(list(ids), dtype=str) for k, ids in enumerate(policy_ids)}
        write_npz(path, {"payoffs": self.values, "filled": self.filled,
                         "agents": np.array(self.agents, dtype=str), **arrays})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> tuple[PayoffTable, list[list[str]]]:
        """Read a table written by :meth:`save` (no pickles), with its policy ids."""
        try:
            with np.load(path, allow_pickle=False) as data:
                agents = tuple(str(a) for a in data["agents"])
                table = cls(agents=agents, values=data["payoffs"], filled=data["filled"].astype(bool))
                ids = [[str(p) for p in data[f"policy_ids_{k}"]] for k in range(len(agents))]
        except (OSError, ValueError, KeyError, EOFError) as exc:
            raise CheckpointError(f"{path}: not a readable payoff table ({exc})") from None
        if table.values.shape != (len(agents), *table.filled.shape):
            raise CheckpointError(f"{path}: payoff array shape {table.values.shape} does not match its agents")
        return table, ids


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
    table = table.fill([(r.index, r.returns) for r in results])
    return table, sum(r.env_steps for r in results), sum(r.exact for r in results)
