"""Elo ratings of players from head-to-head results (numpy only).

:func:`elo` is the Bradley–Terry maximum-likelihood fit by Hunter's MM algorithm (Hunter
2004, eq. 4), as OpenSpiel's ``open_spiel.python.algorithms.elo.compute_ratings_from_matrices``
(its C++ ``evaluation/elo.cc``) computes it, with the same defaults: ``smoothing`` 0.01
phantom wins added to every pair, a draw worth half a win to each side, at most 2000
iterations until the normalised strengths move by less than 1e-10, and 400 Elo points
per factor 10 of strength. On the same integer counts the ratings agree with OpenSpiel's
to round-off. Counts may also be fractional: expected counts, e.g. exact outcome
probabilities times a nominal number of games (``popmarl rank`` uses ``--episodes``).

Anchoring: Elo fixes differences only. By default the lowest rating is 0, as OpenSpiel
sets it; ``anchor=i`` puts player ``i`` at 0 instead (PSRO's ``elo/`` metrics anchor the
initial policy, so a newest policy's rating means the same at every iteration).

:func:`head_to_head` turns a two-seat table of outcome counts (seat 0's policies in rows,
seat 1's in columns) into the square win and draw matrices :func:`elo` takes.
"""

from __future__ import annotations

import numpy as np

#: OpenSpiel's defaults (``pyspiel.elo``).
SMOOTHING = 0.01
SCALE = 400.0
MAX_ITERATIONS = 2000
TOLERANCE = 1e-10


def elo(wins: np.ndarray, draws: np.ndarray | None = None, *, smoothing: float = SMOOTHING, scale: float = SCALE,
        anchor: int | None = None, max_iterations: int = MAX_ITERATIONS, tolerance: float = TOLERANCE) -> np.ndarray:
    """Elo ratings of ``n`` players: ``wins[i, j]`` games ``i`` won against ``j``,
    ``draws[i, j]`` (symmetric) games they drew. The lowest rating is 0, or player
    ``anchor``'s is."""
    w = np.asarray(wins, dtype=float)
    n = w.shape[0] if w.ndim == 2 else -1
    if w.ndim != 2 or w.shape != (n, n) or n < 1:
        raise ValueError(f"elo: wins must be a square matrix, got shape {w.shape}")
    d = np.zeros_like(w) if draws is None else np.asarray(draws, dtype=float)
    if d.shape != w.shape:
        raise ValueError(f"elo: draws must have the shape of wins {w.shape}, got {d.shape}")
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(d)) and w.min() >= 0 and d.min() >= 0):
        raise ValueError("elo: wins and draws must be finite, non-negative counts")
    if not np.allclose(d, d.T):
        raise ValueError("elo: draws must be symmetric (a draw between i and j counts for both)")
    if anchor is not None and not 0 <= anchor < n:
        raise ValueError(f"elo: anchor {anchor} is not a player (0 to {n - 1})")
    if n == 1:
        return np.zeros(1)
    score = w + 0.5 * d + smoothing  # W in Hunter's notation; the diagonal is never read
    off = ~np.eye(n, dtype=bool)
    total = np.where(off, score, 0.0).sum(axis=1)
    games = np.where(off, score + score.T, 0.0)
    gamma = np.ones(n)
    for _ in range(max_iterations):
        ratios = np.where(off, games / (gamma[:, None] + gamma[None, :]), 0.0).sum(axis=1)
        step = total / ratios
        step = np.maximum(step / step.sum(), np.finfo(float).smallest_subnormal)
        if np.max(np.abs(gamma - step)) < tolerance:
            break  # OpenSpiel keeps the previous iterate
        gamma = step
    ratings = scale * np.log10(gamma)
    return ratings - (ratings.min() if anchor is None else ratings[anchor])


def head_to_head(wins: np.ndarray, draws: np.ndarray, losses: np.ndarray, *,
                 shared: bool) -> tuple[np.ndarray, np.ndarray]:
    """Square ``(wins, draws)`` for :func:`elo` from seat 0's outcome counts (``[n0, n1]``:
    row policy at seat 0 against column policy at seat 1). ``shared``: rows and columns
    are the same ``n`` policies (both seat orders add up; self-play is left out);
    otherwise the ``n0 + n1`` players are seat 0's then seat 1's (a bipartite table)."""
    w, d, lost = (np.asarray(a, dtype=float) for a in (wins, draws, losses))
    if not w.shape == d.shape == lost.shape or w.ndim != 2:
        raise ValueError(f"head_to_head: wins, draws and losses must be matrices of one shape, got "
                         f"{w.shape}, {d.shape}, {lost.shape}")
    if shared:
        if w.shape[0] != w.shape[1]:
            raise ValueError(f"head_to_head: a shared table is square, got {w.shape}")
        won, drawn = w + lost.T, d + d.T
        np.fill_diagonal(won, 0.0)
        np.fill_diagonal(drawn, 0.0)
        return won, drawn
    n0, n1 = w.shape
    won, drawn = np.zeros((n0 + n1, n0 + n1)), np.zeros((n0 + n1, n0 + n1))
    won[:n0, n0:], won[n0:, :n0] = w, lost.T
    drawn[:n0, n0:], drawn[n0:, :n0] = d, d.T
    return won, drawn
