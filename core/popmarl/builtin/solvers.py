"""Solvers ``uniform`` (fictitious self-play) and ``latest`` (self-play)."""

from __future__ import annotations

import numpy as np

from popmarl.api import MetaSolver, check_payoffs


class Uniform(MetaSolver):
    """Uniform over each population: PSRO becomes fictitious self-play."""

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        shape = check_payoffs(payoffs).shape[1:]
        return tuple(np.full(n, 1.0 / n) for n in shape)


class Latest(MetaSolver):
    """All weight on each population's newest policy: PSRO becomes self-play."""

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        shape = check_payoffs(payoffs).shape[1:]
        return tuple(np.eye(n)[n - 1] for n in shape)
