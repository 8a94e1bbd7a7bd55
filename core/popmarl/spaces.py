"""Observation and action spaces: plain records, so the core needs no gymnasium."""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import numpy as np


@attrs.frozen(kw_only=True)
class Discrete:
    """``n`` actions, ``0 .. n-1``."""

    n: int = attrs.field(validator=attrs.validators.ge(1))

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def sample(self, rng: np.random.Generator, mask: np.ndarray | None = None) -> int:
        """A uniformly random (legal, when ``mask`` is given) action."""
        if mask is None:
            return int(rng.integers(self.n))
        return int(rng.choice(np.flatnonzero(mask)))


def _shape(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


@attrs.frozen(kw_only=True)
class Box:
    """A real-valued array of ``shape`` with elementwise bounds."""

    shape: tuple[int, ...] = attrs.field(converter=_shape)
    low: float = -np.inf
    high: float = np.inf
    dtype: str = "float32"

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int))

    def sample(self, rng: np.random.Generator, mask: np.ndarray | None = None, *, n: int | None = None) -> np.ndarray:
        """A uniformly random point (standard normal where a bound is infinite); ``n``
        points stacked when ``n`` is given."""
        shape = self.shape if n is None else (n, *self.shape)
        if np.isfinite(self.low) and np.isfinite(self.high):
            return rng.uniform(self.low, self.high, shape).astype(self.dtype)
        return rng.standard_normal(shape).astype(self.dtype)


Space = Discrete | Box
