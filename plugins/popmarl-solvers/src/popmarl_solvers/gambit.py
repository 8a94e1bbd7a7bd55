"""n-player Nash equilibria from Gambit: logit tracing, iterated polymatrix approximation
(IPA) and global Newton (GNM).

Measured on random 3- and 4-player games (5 to 15 strategies each) and on 3-player Kuhn
PSRO meta-games (``benchmarks/solvers.py``): logit tracing (``logit``) answers nearly
everywhere in 0.01–0.4 s; IPA is as fast on random games but fails, slowly (up to 2.5 s),
on some Kuhn meta-games; GNM from the default perturbation often fails ("no unique
maximizer": the centroid perturbation of a degenerate game ties), so it is run from a
seeded random perturbation, which answers where the others fail. Simplicial subdivision
took seconds at 5x5x5. Payoffs are scaled to [0, 1] first; pygambit is imported lazily.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from popmarl_solvers.base import Mixtures

GambitMethod = Literal["logit", "ipa", "gnm"]
GAMBIT_METHODS: tuple[GambitMethod, ...] = ("logit", "ipa", "gnm")


def gambit_equilibria(payoffs: np.ndarray, method: GambitMethod, *, maxregret: float = 1e-7,
                      seed: int = 0) -> list[Mixtures]:
    """Equilibria Gambit's ``method`` finds for ``payoffs`` (shape ``(n, k_1, ..., k_n)``),
    as float mixtures; ``[]`` when it finds none.

    ``maxregret`` is logit tracing's target regret on the game scaled to [0, 1]; ``seed``
    draws the perturbation IPA and GNM start from.
    """
    import pygambit

    low, high = float(payoffs.min()), float(payoffs.max())
    scaled = (payoffs - low) / (high - low) if high > low else np.zeros_like(payoffs)
    game = pygambit.StrategicGame.from_arrays(*[np.asarray(p, dtype=float) for p in scaled])
    found: list[Any]
    try:
        if method == "logit":
            found = [pygambit.nash.logit_solve(game, maxregret=maxregret).equilibrium]
        else:
            rng = np.random.default_rng(seed)
            weights = [np.asarray(rng.random(k) + 0.5) for k in payoffs.shape[1:]]
            perturbation = game.mixed_strategy_profile(data=[list(w / w.sum()) for w in weights])
            solve = pygambit.nash.ipa_solve if method == "ipa" else pygambit.nash.gnm_solve
            result = solve(perturbation)
            found = [result.equilibrium] if method == "ipa" else list(result.equilibria)
    except (ValueError, RuntimeError):  # e.g. GNM's "perturbation ... no unique maximizer"
        return []
    found = [profile for profile in found if profile is not None]  # failure is reported as None
    return [tuple(np.array([float(x) for _, x in profile[player]]) for player in game.players) for profile in found]
