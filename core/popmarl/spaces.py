"""Observation and action spaces: plain records, so the core needs no gymnasium."""

from __future__ import annotations

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


@attrs.frozen(kw_only=True)
class Box:
    """A real-valued array of ``shape`` with elementwise bounds."""

    shape: tuple[int, ...] = attrs.field(converter=tuple)
    low: float = -np.inf
    high: float = np.inf
    dtype: str = "float32"

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int))

    def sample(self, rng: np.random.Generator, mask: np.ndarray | None = None) -> np.ndarray:
        """A uniformly random point (standard normal where a bound is infinite)."""
        if np.isfinite(self.low) and np.isfinite(self.high):
            return rng.uniform(self.low, self.high, self.shape).astype(self.dtype)
        return rng.standard_normal(self.shape).astype(self.dtype)


Space = Discrete | Box
