"""Fictitious play (Brown 1951) on the meta-game: the empirical average of best responses.

Each population starts with a best response to the others' uniform mixtures; then, for
``iterations`` rounds, every population simultaneously best-responds (ties: the lowest
index) to the others' empirical averages and adds that pure strategy to its history. The
answer is each population's empirical distribution — uniform over its history of best
responses. It converges to equilibrium in two-player zero-sum games (Robinson 1951),
which is what makes PSRO with it a fictitious-self-play over the meta-game.
"""

from __future__ import annotations

import attrs
import numpy as np
from attrs import validators as v

from popmarl_solvers.base import DynamicsSolver
from popmarl_solvers.games import MetaGame
from popmarl_solvers.symmetric import SymmetricOption, validate_symmetric


def fictitious_play(game: MetaGame, iterations: int) -> list[np.ndarray]:
    """Empirical mixtures after ``iterations`` rounds of simultaneous fictitious play."""
    counts = [np.zeros(k) for k in game.sizes]
    beliefs = game.uniform()
    for t in range(1, iterations + 2):  # the first round answers the uniform beliefs
        for count, u in zip(counts, game.deviations(beliefs), strict=True):
            count[int(np.argmax(u))] += 1.0
        beliefs = [count / t for count in counts]
    return beliefs


@attrs.frozen(kw_only=True)
class FictitiousPlayConfig:
    """Fictitious-play parameters."""

    iterations: int = attrs.field(default=1_000, validator=[v.instance_of(int), v.ge(0)])
    symmetric: SymmetricOption = attrs.field(default="auto", validator=validate_symmetric)


class FictitiousPlay(DynamicsSolver):
    """Meta-solver returning the empirical averages of fictitious play on the meta-game."""

    Config = FictitiousPlayConfig

    def _dynamics(self, game: MetaGame) -> tuple[list[np.ndarray], str]:
        return fictitious_play(game, self.config.iterations), "fictitious_play"
