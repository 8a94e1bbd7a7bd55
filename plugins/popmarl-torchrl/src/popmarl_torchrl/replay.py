"""The replay buffer of the team learners: a ring of team steps in numpy columns, saved
compactly with the trainer's state (``vdn``, ``qmix`` and ``masac`` keep one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from popmarl.api import TRAINER_FILE, CheckpointError, TrainerState, read_npz
from popmarl_torch.state import smallest, successor_rows, with_successor_rows


#: The file of a trainer's state that holds its replay buffer's rows (:meth:`Replay.arrays`).
BUFFER = "buffer.npz"


class Replay:
    """A ring buffer of team steps (numpy columns)."""

    def __init__(self, capacity: int, columns: Mapping[str, tuple[tuple[int, ...], Any]]) -> None:
        self.capacity = capacity
        self.columns = dict(columns)
        self.data = {k: np.zeros((capacity, *shape), dtype) for k, (shape, dtype) in columns.items()}
        self.size = self.insertion = 0

    def add(self, rows: Mapping[str, np.ndarray]) -> None:
        count = len(rows["reward"])
        if count >= self.capacity:
            rows, count = {k: v[-self.capacity:] for k, v in rows.items()}, self.capacity
        at = (self.insertion + np.arange(count)) % self.capacity
        for key, column in self.data.items():
            column[at] = rows[key]
        self.insertion = int((self.insertion + count) % self.capacity)
        self.size = min(self.capacity, self.size + count)

    def sample(self, count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        at = rng.integers(self.size, size=count)
        return {k: v[at] for k, v in self.data.items()}

    def arrays(self) -> dict[str, np.ndarray]:
        """The filled rows, compactly (each column in its smallest lossless dtype; a
        ``next_<c>`` column as the rows that are not column ``c``'s next row, and the mask
        ``next_<c>.follows`` of those that are): :meth:`load` reads them back exactly."""
        columns = {k: v[:self.size] for k, v in self.data.items()}
        out: dict[str, np.ndarray] = {}
        for key, value in columns.items():
            source = columns.get(key.removeprefix("next_")) if key.startswith("next_") else None
            if source is None:
                out[key] = value
            else:
                out[key], out[f"{key}{_FOLLOWS}"] = successor_rows(value, source)
        return {k: smallest(v) for k, v in out.items()}

    def fill(self) -> dict[str, int]:
        """The fill a trainer's ``trainer.json`` records (:meth:`restore` reads it)."""
        return {"size": self.size, "insertion": self.insertion}

    def restore(self, fill: Any, state: TrainerState, name: str = BUFFER) -> None:
        """The buffer of a trainer's state: its :meth:`fill` from ``trainer.json`` and its
        rows from the file ``name`` (a CheckpointError naming the file where either is wrong)."""
        try:
            size, insertion = int(fill["size"]), int(fill["insertion"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"trainer state {TRAINER_FILE}: buffer needs integer size and insertion") from None
        self.load(size, insertion, read_npz(state, name), name)

    def load(self, size: int, insertion: int, arrays: Mapping[str, np.ndarray], name: str) -> None:
        try:
            arrays = _columns_of(arrays, {k: v.dtype for k, v in self.data.items()})
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"trainer state {name}: the replay buffer's columns do not read back "
                                  f"({exc})") from None
        if not (0 <= size <= self.capacity and 0 <= insertion < self.capacity) or set(arrays) != set(self.data):
            raise CheckpointError(f"trainer state {name}: a buffer of {size} steps (insertion {insertion}, columns "
                                  f"{sorted(arrays)}) does not fit this config's buffer of {self.capacity}")
        for key, column in self.data.items():
            value = arrays[key]
            if value.shape != (size, *column.shape[1:]):
                raise CheckpointError(f"trainer state {name}: {key} has shape {value.shape}, expected "
                                      f"{(size, *column.shape[1:])} (another config?)")
            column[:size] = value
        self.size, self.insertion = size, insertion


#: The suffix of the mask that tells which rows of a ``next_`` column are its source's next row.
_FOLLOWS = ".follows"


def _columns_of(arrays: Mapping[str, np.ndarray], dtypes: Mapping[str, np.dtype]) -> dict[str, np.ndarray]:
    """The columns :meth:`Replay.arrays` stored, whole and in ``dtypes`` (a buffer file
    written before it, of whole columns, reads as it is)."""
    columns = {k: v.astype(dtypes[k]) if k in dtypes else v for k, v in arrays.items() if not k.endswith(_FOLLOWS)}
    for key in list(columns):
        mask = arrays.get(f"{key}{_FOLLOWS}")
        if mask is not None:
            columns[key] = with_successor_rows(columns[key], mask, columns[key.removeprefix("next_")])
    return columns


__all__ = ["Replay"]
