"""Support polishing for two-player games: turn a near-equilibrium into an exact one.

An LP or a floating-point pivoting method ends at the right supports but carries its
round-off (HiGHS' feasibility tolerances are 1e-7 by default). Solving the indifference
equations on those supports recovers the equilibrium to machine precision; the result
is kept only when it is a valid mixture pair with a smaller regret.
"""

from __future__ import annotations

import numpy as np

from popmarl_solvers.games import normalize


def bimatrix_regret(a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """NashConv of ``(x, y)`` in the bimatrix game ``(a, b)``."""
    ay, xb = a @ y, x @ b
    return float(max(0.0, ay.max() - x @ ay) + max(0.0, xb.max() - xb @ y))


def _indifferent(m: np.ndarray) -> np.ndarray | None:
    """A mixture ``z`` with ``m @ z`` constant, or None if no non-negative one is found."""
    rows, cols = m.shape
    system = np.zeros((rows + 1, cols + 1))
    system[:rows, :cols] = m
    system[:rows, cols] = -1.0  # the common value
    system[rows, :cols] = 1.0
    rhs = np.zeros(rows + 1)
    rhs[rows] = 1.0
    try:
        sol = np.linalg.lstsq(system, rhs, rcond=None)[0]
    except np.linalg.LinAlgError:
        return None
    z = sol[:cols]
    if not np.all(np.isfinite(z)) or z.min() < -1e-9:
        return None
    return normalize(z)


def polish(
    a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray, threshold: float = 1e-12
) -> tuple[np.ndarray, np.ndarray]:
    """The better of ``(x, y)`` and the exact equilibrium on their supports."""
    s1 = np.flatnonzero(x > threshold)
    s2 = np.flatnonzero(y > threshold)
    if s1.size == 0 or s2.size == 0:
        return x, y
    y_s = _indifferent(a[np.ix_(s1, s2)])  # makes player 1 indifferent on s1
    x_s = _indifferent(b[np.ix_(s1, s2)].T)  # makes player 2 indifferent on s2
    if y_s is None or x_s is None:
        return x, y
    x_new = np.zeros_like(x)
    y_new = np.zeros_like(y)
    x_new[s1] = x_s
    y_new[s2] = y_s
    if bimatrix_regret(a, b, x_new, y_new) < bimatrix_regret(a, b, x, y):
        return x_new, y_new
    return x, y
