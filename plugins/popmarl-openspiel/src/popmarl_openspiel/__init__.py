"""popmarl-openspiel: OpenSpiel games for popmarl.

Registers env ``openspiel`` (any pyspiel game, batched, exact evaluation and NashConv
where the tree is small enough) and algorithm ``exact_br`` (exact best
responses). :func:`load_policy` reads a run's ``final_policy.json`` back into an
OpenSpiel policy (a ``TabularPolicy``, or one per player where players share
information-state strings). Importing this package does not import pyspiel.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)

if TYPE_CHECKING:
    from open_spiel.python.policy import TabularPolicy

    from popmarl_openspiel.export import PerPlayerTabularPolicy

__all__ = ["load_policy"]


def load_policy(path: str | os.PathLike[str]) -> TabularPolicy | PerPlayerTabularPolicy:
    """An OpenSpiel policy holding a run's ``final_policy.json``: a ``TabularPolicy``
    where the players' information-state strings are distinct, otherwise a
    :class:`~popmarl_openspiel.export.PerPlayerTabularPolicy` (one ``TabularPolicy`` per
    player; one shared table would let a player's rows overwrite another's). Either
    gives the run's NashConv under ``exploitability.nash_conv(policy.game, policy)``."""
    from popmarl_openspiel.export import load_policy as _load

    return _load(path)
