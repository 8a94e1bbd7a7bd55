"""Projected replicator dynamics (PRD), the meta-solver of Lanctot et al. (2017).

Each population's mixture follows the replicator equation ``x += dt * x * (u - x·u)``
(``u`` = its strategies' payoffs against the others' current mixtures, all populations
updated simultaneously), then is projected back onto the γ-floored simplex: entries
below ``gamma`` are raised to ``gamma`` and the vector renormalised. The floor keeps
every strategy explored, which is what PSRO needs from its meta-solver. The answer is the
average of the last ``average_over_last`` iterates (all of them by default), exactly as
OpenSpiel's ``projected_replicator_dynamics`` computes it with the same defaults.
"""

from __future__ import annotations

import attrs
import numpy as np
from attrs import validators as v

from popmarl_solvers.base import Extra, Mixtures, Solver
from popmarl_solvers.games import MetaGame
from popmarl_solvers.symmetric import SymmetricOption, validate_symmetric


def projected_replicator_dynamics(
    game: MetaGame,
    iterations: int,
    dt: float,
    gamma: float,
    average_over_last: int | None = None,
    initial: list[np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Run PRD on ``game`` from ``initial`` (uniform) and return the averaged mixtures."""
    xs = [x.copy() for x in initial] if initial is not None else game.uniform()
    window = min(average_over_last or iterations, iterations)
    totals = [np.zeros_like(x) for x in xs]
    for t in range(iterations):
        devs = game.deviations(xs)
        new = []
        for x, u in zip(xs, devs, strict=True):
            x = x + dt * x * (u - u @ x)
            np.maximum(x, gamma, out=x)
            new.append(x / x.sum())
        xs = new
        if t >= iterations - window:
            for total, x in zip(totals, xs, strict=True):
                total += x
    return [total / window for total in totals]


@attrs.frozen(kw_only=True)
class PRDConfig:
    """PRD parameters; the defaults are OpenSpiel's."""

    iterations: int = attrs.field(default=100_000, validator=[v.instance_of(int), v.ge(1)])
    dt: float = attrs.field(default=1e-3, converter=float, validator=[v.gt(0.0), v.le(1.0)])
    gamma: float = attrs.field(default=1e-6, converter=float, validator=[v.ge(0.0), v.lt(1.0)])
    average_over_last: int | None = attrs.field(
        default=None, validator=v.optional([v.instance_of(int), v.ge(1)])
    )
    symmetric: SymmetricOption = attrs.field(default="auto", validator=validate_symmetric)


class ProjectedReplicatorDynamics(Solver):
    """PSRO-PRD meta-solver: γ-projected replicator dynamics, n populations."""

    Config = PRDConfig

    def _solve(self, payoffs: np.ndarray, symmetric: bool) -> tuple[Mixtures, Extra]:
        c = self.config
        game = MetaGame(payoffs, symmetric=symmetric)
        xs = projected_replicator_dynamics(game, c.iterations, c.dt, c.gamma, c.average_over_last)
        return game.expand(xs), {"solver_method": "prd", "solver_iterations": c.iterations}
