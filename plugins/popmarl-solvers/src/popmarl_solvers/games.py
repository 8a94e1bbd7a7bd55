"""The meta-game as the iterative solvers see it: populations, deviation payoffs, clean-up.

A game is either the full ``[n, |S_1|, ..., |S_n|]`` payoff tensor (one population per
player) or, for a symmetric two-player game, a single population playing against itself
(``payoffs[0] @ x``). The dynamics (replicator, regret matching, fictitious play) are
written once against :class:`MetaGame` and work for both.

The replicator and regret-matching loops run on a *flat* vector that concatenates every
population's mixture, so one iteration is a fixed handful of numpy calls whatever the
number of populations: for two players the deviation payoffs of both are one product
with the block matrix ``[[0, A], [B^T, 0]]``, and per-population sums are one
``np.add.reduceat``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class MetaGame:
    """Deviation payoffs of each solved population, and the map back to every player."""

    def __init__(self, payoffs: np.ndarray, *, symmetric: bool = False) -> None:
        self.payoffs = payoffs
        self.symmetric = symmetric
        self.n_players = payoffs.shape[0]
        self.sizes: tuple[int, ...] = (payoffs.shape[1],) if symmetric else tuple(payoffs.shape[1:])
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.intp)
        self.segment = np.repeat(np.arange(len(self.sizes)), self.sizes)
        ends = np.cumsum(self.sizes)
        self._bounds = [(int(a), int(b)) for a, b in zip(self.starts, ends)]
        self._block: np.ndarray | None = None
        self._unfolded: list[np.ndarray] = []
        if symmetric:
            self._block = payoffs[0]
        elif self.n_players == 2:
            m, n = self.sizes
            self._block = np.zeros((m + n, m + n))
            self._block[:m, m:] = payoffs[0]
            self._block[m:, :m] = payoffs[1].T
        else:  # each player's table with its own axis first, the others' flattened after it
            self._unfolded = [np.ascontiguousarray(np.moveaxis(payoffs[k], k, 0)).reshape(self.sizes[k], -1)
                              for k in range(self.n_players)]

    def uniform(self) -> list[np.ndarray]:
        """The uniform mixture of every solved population."""
        return [np.full(k, 1.0 / k) for k in self.sizes]

    def deviations(self, mixtures: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per solved population, each pure strategy's payoff against the others' mixtures."""
        if self.symmetric:
            return [self.payoffs[0] @ mixtures[0]]
        if self.n_players == 2:  # the common case, two mat-vecs
            return [self.payoffs[0] @ mixtures[1], mixtures[0] @ self.payoffs[1]]
        return contract(self.payoffs, mixtures)

    def flat_deviations(self, flat: np.ndarray) -> np.ndarray:
        """:meth:`deviations` on the concatenated mixtures, concatenated."""
        if self._block is not None:
            return self._block @ flat
        # One mat-vec per player against the others' joint (outer-product) mixture: a few
        # numpy calls per player, as the iterative solvers call this 10^5 times.
        xs = [flat[a:b] for a, b in self._bounds]
        out = np.empty_like(flat)
        for k, (a, b) in enumerate(self._bounds):
            joint: np.ndarray | None = None
            for j, x in enumerate(xs):
                if j != k:
                    joint = x if joint is None else np.multiply.outer(joint, x).ravel()
            out[a:b] = self._unfolded[k] @ joint
        return out

    def segment_sums(self, flat: np.ndarray) -> np.ndarray:
        """Per population, the sum of its entries of a flat vector."""
        return np.add.reduceat(flat, self.starts)

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """The flat vector cut back into one array per population."""
        return [flat[a:b] for a, b in self._bounds]

    def expand(self, mixtures: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """One mixture per player of the original game (the symmetric one is repeated)."""
        if self.symmetric:
            return tuple(mixtures[0] for _ in range(self.n_players))
        return tuple(mixtures)


def contract(payoffs: np.ndarray, mixtures: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Deviation payoffs of every player of an n-player tensor, by mat-vec products.

    Same result as :func:`popmarl.api.deviation_payoffs`, several times faster on
    small tensors (the inner loops of the iterative solvers and of Newton's method).
    """
    out = []
    for k, tensor in enumerate(payoffs):
        t = tensor
        for j in range(len(mixtures) - 1, k, -1):  # trailing axes: T @ x_j
            t = t @ mixtures[j]
        for j in range(k):  # leading axes: x_j @ T (T flattened past its first axis)
            t = (mixtures[j] @ t.reshape(t.shape[0], -1)).reshape(t.shape[1:])
        out.append(t)
    return out


def normalize(mixture: np.ndarray) -> np.ndarray:
    """Clip round-off negatives and rescale to sum 1 (uniform if nothing is left)."""
    p = np.clip(np.asarray(mixture, dtype=float), 0.0, None)
    total = p.sum()
    if not np.isfinite(total) or total <= 0.0:
        return np.full(p.shape, 1.0 / p.size)
    return p / total


def payoff_scale(payoffs: np.ndarray) -> float:
    """The largest payoff range of any player, at least 1: tolerances are relative to it."""
    ranges = [float(np.ptp(p)) for p in payoffs]
    return max([1.0, *ranges])
