"""Uniform-biased meta-strategy: a mixture over each population that favours recent policies.

Policy ``i`` (0 = oldest) gets weight ``ratio ** i`` (``geometric``; the default ratio
``e`` is OpenSpiel's ``uniform_biased`` softmax over indices) or ``i + 1`` (``linear``).
It ignores the payoffs — a cheap middle ground between core's ``uniform`` (fictitious
self-play) and ``latest`` (self-play) — but its regret is still measured and reported.
"""

from __future__ import annotations

import math
from typing import Literal

import attrs
import numpy as np
from attrs import validators as v

from popmarl_solvers.base import Extra, Mixtures, Solver


def recency_weights(size: int, scheme: str, ratio: float) -> np.ndarray:
    """Normalised weights over ``size`` policies, growing with the index."""
    index = np.arange(size, dtype=float)
    # Geometric weights are computed relative to the newest, so large sizes cannot overflow.
    weights = index + 1.0 if scheme == "linear" else np.exp((index - (size - 1)) * math.log(ratio))
    return weights / weights.sum()


@attrs.frozen(kw_only=True)
class UniformBiasedConfig:
    """``scheme``: ``geometric`` (weights ``ratio**i``) or ``linear`` (weights ``i + 1``)."""

    scheme: Literal["geometric", "linear"] = attrs.field(
        default="geometric", validator=v.in_(("geometric", "linear"))
    )
    ratio: float = attrs.field(default=math.e, converter=float, validator=[v.ge(1.0), v.le(1e6)])


class UniformBiased(Solver):
    """Meta-solver weighting each population's policies towards the most recent ones."""

    Config = UniformBiasedConfig

    def _solve(self, payoffs: np.ndarray, symmetric: bool) -> tuple[Mixtures, Extra]:
        c = self.config
        mixtures = tuple(recency_weights(k, c.scheme, c.ratio) for k in payoffs.shape[1:])
        return mixtures, {"solver_method": f"uniform_biased_{c.scheme}", "solver_iterations": 0}
