"""Solver ``hedge``: multiplicative weights (Hedge) run on the meta-game.

Every player starts uniform and, for ``iterations`` rounds, reweights each of its
policies by ``exp(learning_rate * payoff against the others' current mixtures)``. The
answer is each player's *average* mixture: in a two-player zero-sum meta-game it is an
approximate Nash equilibrium (its regret shrinks like sqrt(log n / iterations)); in
general it approximates a coarse correlated equilibrium's marginals.
"""

from __future__ import annotations

import attrs
import numpy as np

from popmarl.api import MetaSolver, deviation_payoffs


@attrs.frozen(kw_only=True)
class HedgeConfig:
    """``iterations``: rounds of play; ``learning_rate``: step on payoffs scaled to [0, 1]
    (default: the regret-optimal ``sqrt(8 ln n / iterations)``)."""

    iterations: int = attrs.field(default=1000, validator=attrs.validators.ge(1))
    learning_rate: float | None = attrs.field(default=None,
                                              validator=attrs.validators.optional(attrs.validators.gt(0)))


def _softmax(logit: np.ndarray) -> np.ndarray:
    weights = np.exp(logit - logit.max())
    return weights / weights.sum()


class Hedge(MetaSolver):
    """Average strategies of multiplicative-weights self-play on the payoff tensor."""

    Config = HedgeConfig

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        sizes = payoffs.shape[1:]
        rounds = self.config.iterations
        scale = float(np.ptp(payoffs)) or 1.0  # payoff range, so rewards lie in an interval of width 1
        rate = self.config.learning_rate or float(np.sqrt(8 * np.log(max(max(sizes), 2)) / rounds))
        logits = [np.zeros(n) for n in sizes]
        totals = [np.zeros(n) for n in sizes]
        for _ in range(rounds):
            mixtures = [_softmax(logit) for logit in logits]
            for total, mixture in zip(totals, mixtures):
                total += mixture
            for logit, values in zip(logits, deviation_payoffs(payoffs, mixtures)):
                logit += rate * values / scale
        return tuple(total / rounds for total in totals)
