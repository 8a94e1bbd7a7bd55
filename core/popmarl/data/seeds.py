"""Seeds derived from the run seed, so every task's randomness is reproducible and a
resumed run draws exactly what an uninterrupted one would."""

from __future__ import annotations

import numpy as np


def derive_seed(seed: int, *keys: int) -> int:
    """A 31-bit seed determined by the run seed and ``keys`` (iteration, population...)."""
    return int(np.random.SeedSequence([seed, *keys]).generate_state(1)[0] & 0x7FFFFFFF)
