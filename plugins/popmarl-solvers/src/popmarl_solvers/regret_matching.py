"""Regret matching (Hart & Mas-Colell 2000) on the meta-game, n populations.

Every population plays the positive part of its cumulative regrets (uniform when none is
positive), mixed with ``gamma`` of the uniform mixture for exploration as in OpenSpiel's
``regret_matching``; all populations update simultaneously. The answer is the average of
the mixtures played (the initial uniform one included); in two-player zero-sum games it
converges to a Nash equilibrium at rate O(1/sqrt(T)). ``plus`` gives RM+ (regrets floored
at zero after every step) and ``linear_averaging`` weighs iteration t by t — both are
much faster in practice.
"""

from __future__ import annotations

import attrs
import numpy as np
from attrs import validators as v

from popmarl_solvers.base import DynamicsSolver
from popmarl_solvers.games import MetaGame
from popmarl_solvers.symmetric import SymmetricOption, validate_symmetric


def regret_matching(
    game: MetaGame,
    iterations: int,
    gamma: float = 0.0,
    plus: bool = False,
    linear_averaging: bool = False,
) -> list[np.ndarray]:
    """Run (simultaneous) regret matching for ``iterations`` steps; the average mixtures."""
    seg = game.segment
    sizes = np.asarray(game.sizes, dtype=float)
    uniform = 1.0 / sizes[seg]
    flat = uniform.copy()
    regrets = np.zeros_like(flat)
    total = flat.copy()
    weight_sum = 1.0
    for t in range(1, iterations + 1):
        u = game.flat_deviations(flat)
        regrets += u - game.segment_sums(flat * u)[seg]
        if plus:
            np.maximum(regrets, 0.0, out=regrets)
        positive = np.maximum(regrets, 0.0)
        sums = game.segment_sums(positive)[seg]
        flat = np.where(sums > 0.0, positive / np.where(sums > 0.0, sums, 1.0), uniform)
        if gamma > 0.0:
            flat = gamma * uniform + (1.0 - gamma) * flat
        weight = float(t + 1) if linear_averaging else 1.0
        total += weight * flat
        weight_sum += weight
    return game.split(total / weight_sum)


@attrs.frozen(kw_only=True)
class RMConfig:
    """Regret-matching parameters (OpenSpiel's ``gamma`` default; fewer iterations)."""

    iterations: int = attrs.field(default=10_000, validator=[v.instance_of(int), v.ge(1)])
    gamma: float = attrs.field(default=1e-6, converter=float, validator=[v.ge(0.0), v.lt(1.0)])
    plus: bool = attrs.field(default=False, validator=v.instance_of(bool))
    linear_averaging: bool = attrs.field(default=False, validator=v.instance_of(bool))
    symmetric: SymmetricOption = attrs.field(default="auto", validator=validate_symmetric)


class RegretMatching(DynamicsSolver):
    """PSRO-RM meta-solver: the average strategy of regret matching on the meta-game."""

    Config = RMConfig

    def _dynamics(self, game: MetaGame) -> tuple[list[np.ndarray], str]:
        c = self.config
        return regret_matching(game, c.iterations, c.gamma, c.plus, c.linear_averaging), "rm_plus" if c.plus else "rm"
