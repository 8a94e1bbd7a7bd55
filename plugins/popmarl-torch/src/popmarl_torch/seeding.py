"""Seeded torch code that leaves the process's own random state alone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

#: Seeds are taken modulo this: torch's generator takes seeds below 2**64, and a seed
#: popmarl derives has 64 bits, plus the small offsets trainers add for streams of their
#: own (``seed + 1``), which may pass 2**64. Torch's CPU generator keeps a seed's low 32
#: bits, which the modulus leaves as they are.
SEED_MODULUS = 1 << 63


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run torch code (e.g. weight initialisation) with torch's global CPU generator
    seeded with ``seed`` (modulo :data:`SEED_MODULUS`), restored afterwards: what runs
    inside is determined by the seed, and the process-wide generator is untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed % SEED_MODULUS)
        yield


__all__ = ["SEED_MODULUS", "seeded"]
