"""popmarl-openspiel: OpenSpiel games for popmarl.

Registers env ``openspiel`` (any pyspiel game, batched, exact evaluation and NashConv
where the tree is small enough) and algorithm ``exact_br`` (exact best
responses). :func:`load_policy` reads a run's ``final_policy.json`` back into an
OpenSpiel ``TabularPolicy``. Importing this package does not import pyspiel.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from open_spiel.python.policy import TabularPolicy

__all__ = ["load_policy"]


def load_policy(path: str | os.PathLike[str]) -> TabularPolicy:
    """An OpenSpiel ``TabularPolicy`` holding a run's ``final_policy.json``."""
    from popmarl_openspiel.export import load_policy as _load

    return _load(path)
