"""Independent checks for the solver tests: regret computed from scratch, test games.

``regrets`` deliberately shares no code with ``popmarl.gametheory.metagame`` or the plugin: it
builds the opponents' joint distribution as an explicit outer product and sums.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def regrets(payoffs: np.ndarray, mixtures: Sequence[np.ndarray]) -> np.ndarray:
    """Per player: best pure deviation payoff minus the payoff of its mixture."""
    payoffs = np.asarray(payoffs, dtype=float)
    n = payoffs.shape[0]
    assert len(mixtures) == n
    out = np.zeros(n)
    for k in range(n):
        others = np.ones(payoffs.shape[1:])
        for j in range(n):
            if j != k:
                shape = [1] * n
                shape[j] = -1
                others = others * np.asarray(mixtures[j], float).reshape(shape)
        weighted = payoffs[k] * others
        values = weighted.sum(axis=tuple(j for j in range(n) if j != k))  # per own strategy
        out[k] = values.max() - float(np.dot(values, mixtures[k]))
    return out


def regret(payoffs: np.ndarray, mixtures: Sequence[np.ndarray]) -> float:
    """NashConv: the sum of the players' regrets (0 at an equilibrium)."""
    return float(regrets(payoffs, mixtures).sum())


def assert_mixtures(payoffs: np.ndarray, mixtures: Sequence[np.ndarray]) -> None:
    """One probability vector per player, of the right length."""
    assert isinstance(mixtures, tuple)
    assert len(mixtures) == payoffs.shape[0]
    for k, m in enumerate(mixtures):
        m = np.asarray(m)
        assert m.shape == (payoffs.shape[1 + k],)
        assert np.all(np.isfinite(m))
        assert m.min() >= 0.0
        assert abs(m.sum() - 1.0) < 1e-12


def zero_sum(a: np.ndarray) -> np.ndarray:
    return np.stack([a, -a])


def symmetric(a: np.ndarray) -> np.ndarray:
    return np.stack([a, a.T])


RPS = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
MATCHING_PENNIES = np.array([[1.0, -1.0], [-1.0, 1.0]])
#: Biased rock-paper-scissors: the equilibrium is not uniform.
BIASED_RPS = np.array([[0.0, -1.0, 2.0], [1.0, 0.0, -1.0], [-2.0, 1.0, 0.0]])


def degenerate_games(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Two-player games that break textbook Lemke–Howson / support enumeration."""
    a = rng.uniform(-1, 1, (4, 5))
    b = rng.uniform(-1, 1, (4, 5))
    u, v, w, z = (rng.uniform(0.1, 1, k) for k in (4, 5, 4, 5))
    return {
        "all_zero": np.zeros((2, 4, 4)),
        "all_zero_rect": np.zeros((2, 3, 6)),
        "constant": np.full((2, 3, 3), 7.0),
        "duplicate_rows": np.stack([a[[0, 0, 1, 1]], b[[0, 0, 1, 1]]]),
        "duplicate_cols": np.stack([a[:, [0, 1, 1, 2, 2]], b[:, [0, 1, 1, 2, 2]]]),
        "duplicate_both": np.stack([a[[0, 1, 0]][:, [2, 2, 3]], b[[0, 1, 0]][:, [2, 2, 3]]]),
        "ties_small_ints": rng.integers(0, 2, (2, 6, 6)).astype(float),
        "ties_three_values": rng.integers(-1, 2, (2, 7, 5)).astype(float),
        "rank_one": np.stack([np.outer(u, v), np.outer(w, z)]),
        "rank_one_signed": np.stack([np.outer(u - 0.5, v - 0.5), np.outer(w - 0.5, z - 0.5)]),
        "coordination": np.stack([np.eye(4), np.eye(4)]),
        "identity_vs_zero": np.stack([np.eye(3), np.zeros((3, 3))]),
        "one_row": rng.uniform(-1, 1, (2, 1, 6)),
        "one_col": rng.uniform(-1, 1, (2, 6, 1)),
        "row_dominant_ties": np.stack([np.ones((3, 3)), np.triu(np.ones((3, 3)))]),
        "zero_sum_duplicates": zero_sum(np.repeat(np.repeat(RPS, 2, axis=0), 2, axis=1)),
        "zero_sum_rank_one": zero_sum(np.outer(u - 0.5, v - 0.5)),
    }
