"""Frozen policies as records: a policy's identity (:class:`PolicySpec`) and its weights.

Weights are named numpy arrays, so a frozen policy pickles cheaply for Ray and serialises
to npz for checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np


Weights = Mapping[str, np.ndarray]


@attrs.frozen(kw_only=True)
class PolicySpec:
    """A frozen policy's identity: which population, which algorithm, when it was made."""

    policy_id: str
    population: str
    algorithm: str
    iteration: int


@attrs.frozen(kw_only=True)
class FrozenPolicy:
    """A frozen policy: its identity and weights."""

    spec: PolicySpec
    weights: Weights
