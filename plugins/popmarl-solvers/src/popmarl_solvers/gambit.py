"""n-player Nash equilibria from Gambit's global Newton method (``pygambit.nash.gnm_solve``).

Measured on random 3-player 5-strategy games: GNM answers in ~10 ms with regret ~1e-11,
faster and more accurate than IPA, logit tracing or simplicial subdivision.
Payoffs are scaled to [0, 1] first; pygambit is imported lazily (it is heavy).
"""

from __future__ import annotations

import numpy as np

from popmarl_solvers.base import Mixtures


def gnm_equilibria(payoffs: np.ndarray) -> list[Mixtures]:
    """Every equilibrium GNM finds for ``payoffs`` (shape ``(n, k_1, ..., k_n)``), as float mixtures."""
    import pygambit

    low, high = float(payoffs.min()), float(payoffs.max())
    scaled = (payoffs - low) / (high - low) if high > low else np.zeros_like(payoffs)
    game = pygambit.StrategicGame.from_arrays(*[np.asarray(p, dtype=float) for p in scaled])
    result = pygambit.nash.gnm_solve(game)
    return [
        tuple(np.array([float(x) for _, x in profile[player]]) for player in game.players)
        for profile in result.equilibria
    ]
