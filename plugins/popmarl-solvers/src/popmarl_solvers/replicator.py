"""Projected replicator dynamics (PRD), the meta-solver of Lanctot et al. (2017).

Each population's mixture follows the replicator equation ``x += dt * x * (u - x·u)``
(``u`` = its strategies' payoffs against the others' current mixtures, all populations
updated simultaneously), then is projected back onto the γ-floored simplex ``{x >= gamma, sum x = 1}``
(Euclidean projection; or, with ``approximate_projection``, entries below ``gamma`` are
raised to it and the vector renormalised). The floor keeps every strategy explored, which
is what PSRO needs from its meta-solver. The answer is the average of the last
``average_over_last`` iterates (all of them, the initial uniform one included, by
default) — what OpenSpiel's ``projected_replicator_dynamics`` returns for the same
parameters; the defaults are OpenSpiel's.
"""

from __future__ import annotations

import attrs
import numpy as np
from attrs import validators as v

from popmarl_solvers.base import DynamicsSolver
from popmarl_solvers.games import MetaGame
from popmarl_solvers.symmetric import SymmetricOption, validate_symmetric


class SimplexProjection:
    """Euclidean projection of every population's block of a flat vector onto its
    γ-floored simplex ``{x >= gamma, sum x = 1}``, all blocks at once (the sort-based
    method of Duchi et al. 2008, with the per-block constants computed once)."""

    def __init__(self, game: MetaGame, gamma: float) -> None:
        self.gamma = gamma
        self.seg = game.segment
        self.starts = game.starts
        self.ends = np.cumsum(game.sizes) - 1
        self.rank = (np.arange(self.seg.size) - self.starts[self.seg] + 1).astype(float)
        self.mass = np.maximum(1.0 - np.asarray(game.sizes) * gamma, 0.0)[self.seg]
        self.index = np.arange(self.seg.size)
        self.first = self.starts[self.seg]

    def __call__(self, flat: np.ndarray) -> np.ndarray:
        seg = self.seg
        spread = 2.0 * np.abs(flat).max() + 1.0
        order = np.argsort(seg * spread - flat)  # descending within each block, blocks in order
        u = flat[order] - self.gamma
        cumulative = np.cumsum(u)
        before = cumulative[self.starts - 1]
        before[0] = 0.0
        shifts = (cumulative - before[seg] - self.mass) / self.rank
        last = np.maximum.reduceat(np.where(u > shifts, self.index, self.first), self.starts)
        return np.maximum(flat - self.gamma - shifts[last][seg], 0.0) + self.gamma


def projected_replicator_dynamics(
    game: MetaGame,
    iterations: int,
    dt: float,
    gamma: float,
    average_over_last: int | None = None,
    approximate_projection: bool = False,
    initial: list[np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Run PRD on ``game`` from ``initial`` (uniform); average the last iterates.

    The sequence averaged is the initial mixture and the ``iterations`` updates after it;
    ``average_over_last`` keeps only its tail (None: all of it), as OpenSpiel does.
    """
    xs = [x.copy() for x in initial] if initial is not None else game.uniform()
    flat = np.concatenate(xs)
    window = min(average_over_last or iterations + 1, iterations + 1)
    total = flat.copy() if window == iterations + 1 else np.zeros_like(flat)
    sizes = np.asarray(game.sizes, dtype=float)
    seg = game.segment
    project = SimplexProjection(game, gamma)
    for t in range(1, iterations + 1):
        u = game.flat_deviations(flat)
        flat = flat + dt * flat * (u - game.segment_sums(flat * u)[seg])
        if flat.min() >= gamma:  # the step keeps each sum at 1: only round-off to remove
            flat += ((1.0 - game.segment_sums(flat)) / sizes)[seg]
        elif approximate_projection:
            flat = np.maximum(flat, gamma)
            flat /= game.segment_sums(flat)[seg]
        else:
            flat = project(flat)
        if t > iterations - window:
            total += flat
    return game.split(total / window)


@attrs.frozen(kw_only=True)
class PRDConfig:
    """PRD parameters; the defaults are OpenSpiel's."""

    iterations: int = attrs.field(default=100_000, validator=[v.instance_of(int), v.ge(1)])
    dt: float = attrs.field(default=1e-3, converter=float, validator=[v.gt(0.0), v.le(1.0)])
    gamma: float = attrs.field(default=1e-6, converter=float, validator=[v.ge(0.0), v.lt(1.0)])
    average_over_last: int | None = attrs.field(
        default=None, validator=v.optional([v.instance_of(int), v.ge(1)])
    )
    approximate_projection: bool = attrs.field(default=False, validator=v.instance_of(bool))
    symmetric: SymmetricOption = attrs.field(default="auto", validator=validate_symmetric)


class ProjectedReplicatorDynamics(DynamicsSolver):
    """PSRO-PRD meta-solver: γ-projected replicator dynamics, n populations."""

    Config = PRDConfig

    def _dynamics(self, game: MetaGame) -> tuple[list[np.ndarray], str]:
        c = self.config
        mixtures = projected_replicator_dynamics(
            game, c.iterations, c.dt, c.gamma, c.average_over_last, c.approximate_projection
        )
        return mixtures, "prd"
