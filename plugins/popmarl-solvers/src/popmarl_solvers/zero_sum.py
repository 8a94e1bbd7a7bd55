"""Two-player zero-sum (or constant-sum) games: one exact linear program.

The row player's maximin strategy is the LP ``max v s.t. x^T A >= v, sum x = 1, x >= 0``
(solved by HiGHS' dual simplex); the column player's minimax strategy is the LP's dual
(the constraints' marginals), so one solve gives both. The answer is then polished on its
supports (see :mod:`popmarl_solvers.polish`), which brings the regret to round-off level.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from popmarl_solvers.games import normalize
from popmarl_solvers.polish import bimatrix_regret, polish

_HIGHS_OPTIONS = {
    "primal_feasibility_tolerance": 1e-10,
    "dual_feasibility_tolerance": 1e-10,
}


def is_constant_sum(payoffs: np.ndarray, atol: float) -> bool:
    """True for two players whose payoffs add up to one constant (within ``atol``)."""
    if payoffs.shape[0] != 2:
        return False
    total = payoffs[0] + payoffs[1]
    return bool(np.ptp(total) <= atol)


def _row_lp(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Maximin mixture of the row player and, from the duals, the column player's."""
    m, n = a.shape
    cost = np.zeros(m + 1)
    cost[-1] = -1.0  # maximise v
    a_ub = np.hstack([-a.T, np.ones((n, 1))])  # v - x^T A[:, j] <= 0
    a_eq = np.ones((1, m + 1))
    a_eq[0, -1] = 0.0
    bounds = [(0.0, None)] * m + [(None, None)]
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(n),
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=bounds,
        method="highs",
        options=_HIGHS_OPTIONS,
    )
    if res.status != 0 or res.x is None:
        return None
    return normalize(res.x[:m]), normalize(-np.asarray(res.ineqlin.marginals))


def solve_zero_sum(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """An exact equilibrium of the zero-sum game with row payoffs ``a`` (None if the LP fails).

    Payoffs are rescaled to [0, 1] first (equilibria do not change) so HiGHS' absolute
    tolerances mean the same thing for every game.
    """
    spread = float(np.ptp(a))
    if spread == 0.0:
        m, n = a.shape
        return np.full(m, 1.0 / m), np.full(n, 1.0 / n)
    scaled = (a - a.min()) / spread
    found = _row_lp(scaled)
    if found is None:
        return None
    x, y = polish(scaled, -scaled, *found)
    if bimatrix_regret(scaled, -scaled, x, y) > 1e-9:
        # The duals were not good enough: the column player's own LP gives y directly.
        col = _row_lp(-scaled.T)
        if col is not None:
            x2, y2 = polish(scaled, -scaled, x, col[0])
            if bimatrix_regret(scaled, -scaled, x2, y2) < bimatrix_regret(scaled, -scaled, x, y):
                x, y = x2, y2
    return x, y
