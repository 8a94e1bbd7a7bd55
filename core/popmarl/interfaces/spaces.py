"""Observation and action spaces: plain records, so the core needs no gymnasium."""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import numpy as np
from numpy.typing import ArrayLike


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


def _bound(value: ArrayLike) -> np.ndarray:
    return np.array(value, dtype=np.float64)


def _bound_repr(value: np.ndarray) -> str:
    flat = value.reshape(-1)
    if flat.size and (flat == flat[0]).all():
        return repr(float(flat[0]))  # one value for every entry: shown as the scalar
    return repr(value.tolist())


def _bounds_eq(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b))


@attrs.frozen(kw_only=True)
class Box:
    """A real-valued array of ``shape`` with elementwise bounds.

    ``low`` and ``high`` are float64 arrays of ``shape`` (read-only); a scalar, or any
    array that broadcasts to ``shape``, is given for every entry. Equal boxes compare
    equal entry by entry.
    """

    shape: tuple[int, ...] = attrs.field(converter=_shape)
    low: np.ndarray = attrs.field(default=-np.inf, converter=_bound, repr=_bound_repr,
                                  eq=attrs.cmp_using(eq=_bounds_eq), hash=False)
    high: np.ndarray = attrs.field(default=np.inf, converter=_bound, repr=_bound_repr,
                                   eq=attrs.cmp_using(eq=_bounds_eq), hash=False)
    dtype: str = "float32"

    def __attrs_post_init__(self) -> None:
        for name in ("low", "high"):
            value = getattr(self, name)
            try:
                value = np.broadcast_to(value, self.shape).copy()
            except ValueError:
                raise ValueError(f"Box {name}: shape {value.shape} does not broadcast to the Box's {self.shape}") from None
            if np.isnan(value).any():
                raise ValueError(f"Box {name}: NaN bound")
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        if (self.low > self.high).any():
            raise ValueError(f"Box: low {_bound_repr(self.low)} exceeds high {_bound_repr(self.high)}")

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int))

    def sample(self, rng: np.random.Generator, mask: np.ndarray | None = None, *, n: int | None = None) -> np.ndarray:
        """A uniformly random point (standard normal in entries with an infinite bound,
        then clipped to the other bound); ``n`` points stacked when ``n`` is given."""
        shape = self.shape if n is None else (n, *self.shape)
        bounded = np.isfinite(self.low) & np.isfinite(self.high)
        if bounded.all():
            return self.clip(rng.uniform(self.low, self.high, shape))
        # Finite placeholders keep uniform() defined where its draws are not used.
        uniform = rng.uniform(np.where(bounded, self.low, 0.0), np.where(bounded, self.high, 1.0), shape)
        return self.clip(np.where(bounded, uniform, rng.standard_normal(shape)))

    def clip(self, actions: ArrayLike) -> np.ndarray:
        """``actions`` (one point or a stack of points) clipped to the bounds entry by
        entry, as the Box's dtype."""
        dtype = np.dtype(self.dtype)
        return np.clip(np.asarray(actions, dtype=dtype), self.low.astype(dtype), self.high.astype(dtype))


Space = Discrete | Box
