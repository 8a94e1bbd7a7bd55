"""Solver ``regret_matching``: regret matching run on the meta-game.

Every player starts uniform. Each round, every player plays its policies in proportion
to their positive cumulative regret (uniformly when none is positive). The answer is
each player's average mixture over the rounds: in a two-player zero-sum meta-game it
approaches a Nash equilibrium.
"""

from __future__ import annotations

import attrs
import numpy as np

from popmarl.api import MetaSolver, at_least_one, check_payoffs, deviation_payoffs


@attrs.frozen(kw_only=True)
class RegretMatchingConfig:
    """``iterations``: rounds of play."""

    iterations: int = attrs.field(default=1000, validator=at_least_one)


def _matching(regret: np.ndarray) -> np.ndarray:
    positive = np.maximum(regret, 0.0)
    total = positive.sum()
    return positive / total if total > 0 else np.full(regret.size, 1.0 / regret.size)


class RegretMatching(MetaSolver):
    """Average strategies of regret matching on the payoff tensor."""

    Config = RegretMatchingConfig
    config: RegretMatchingConfig

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        payoffs = check_payoffs(payoffs)  # [n_players, |P_1|, ..., |P_n|]
        sizes = payoffs.shape[1:]
        regrets = [np.zeros(n) for n in sizes]
        totals = [np.zeros(n) for n in sizes]
        for _ in range(self.config.iterations):
            mixtures = [_matching(regret) for regret in regrets]
            # Each policy's payoff against the others' current mixtures.
            for k, values in enumerate(deviation_payoffs(payoffs, mixtures)):
                regrets[k] += values - values @ mixtures[k]
                totals[k] += mixtures[k]
        return tuple(total / total.sum() for total in totals)  # one mixture per player
