"""n-player Nash equilibria from Gambit: logit tracing, iterated polymatrix approximation
(IPA) and global Newton (GNM).

On random 3- and 4-player games (5 to 15 strategies each) and on 3-player Kuhn PSRO
meta-games (``benchmarks/solvers.py``), logit tracing (``logit``) answers nearly
everywhere, in under a second; IPA is as fast on random games but fails, slowly, on some
Kuhn meta-games; GNM from the default perturbation often fails ("no unique
maximizer": the centroid perturbation of a degenerate game ties), so it is run from a
seeded random perturbation, which answers where the others fail. Simplicial subdivision
takes seconds already at 5x5x5. Payoffs are scaled to [0, 1] first; pygambit is imported lazily.

The game reaches Gambit as the text of an ``.nfg`` file with payoffs rounded to multiples
of 2⁻³⁰ (:func:`strategic_game`): Gambit parses that several times faster than
``StrategicGame.from_arrays`` converts each float, which takes longer than logit tracing
itself on a 15×15×15 game. The rounding (≤ 5e-10) is far below the methods'
tolerances, and the caller polishes every answer on the exact payoffs.
"""

from __future__ import annotations

import io
from typing import Any, Literal

import numpy as np

from popmarl_solvers.base import Mixtures

GambitMethod = Literal["logit", "ipa", "gnm"]
GAMBIT_METHODS: tuple[GambitMethod, ...] = ("logit", "ipa", "gnm")
_DENOMINATOR_BITS = 30
# Logit tracing's first arclength step and step growth (Gambit's defaults: 0.03 and 1.1).
# Longer steps trace random 15x15x15 games ~30% faster, to the same equilibria.
_LOGIT_FIRST_STEP = 0.1
_LOGIT_MAX_ACCEL = 1.5


def strategic_game(payoffs: np.ndarray) -> Any:
    """A ``pygambit`` strategic game of ``payoffs`` (shape ``(n, k_1, ..., k_n)``, in
    [0, 1]), parsed from ``.nfg`` text with payoffs rounded to multiples of 2⁻³⁰."""
    import pygambit

    n, shape = payoffs.shape[0], payoffs.shape[1:]
    # .nfg lists every profile's payoffs, player 1's strategy varying fastest.
    numerators = np.rint(np.moveaxis(payoffs, 0, -1).transpose(*reversed(range(n)), n) * 2**_DENOMINATOR_BITS)
    denominator = f"/{2**_DENOMINATOR_BITS}"
    text = (
        'NFG 1 R "" { ' + " ".join(f'"{k + 1}"' for k in range(n)) + " } { " + " ".join(map(str, shape)) + " }\n"
        + (denominator + " ").join(map(str, numerators.astype(np.int64).ravel().tolist())) + denominator + "\n"
    )
    return pygambit.read_nfg(io.StringIO(text))


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
    game = strategic_game(np.asarray(scaled, dtype=float))
    found: list[Any]
    try:
        if method == "logit":
            found = [
                pygambit.nash.logit_solve(
                    game, maxregret=maxregret, first_step=_LOGIT_FIRST_STEP, max_accel=_LOGIT_MAX_ACCEL
                ).equilibrium
            ]
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
