"""Symmetric two-player games: detection and the ``symmetric`` option of the solvers.

A game is symmetric when both players have the same strategies and ``payoffs[1]`` is
``payoffs[0]`` transposed; it can then be solved as one population playing itself, which
returns the same mixture for both players (and is cheaper).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

SymmetricOption = bool | Literal["auto"]

#: Absolute tolerance (times the payoff scale) for ``payoffs[1] == payoffs[0].T``.
SYMMETRY_ATOL = 1e-12


def is_symmetric(payoffs: np.ndarray, atol: float = SYMMETRY_ATOL) -> bool:
    """True for a two-player game with square payoffs and ``payoffs[1] == payoffs[0].T``."""
    if payoffs.shape[0] != 2 or payoffs.shape[1] != payoffs.shape[2]:
        return False
    scale = max(1.0, float(np.abs(payoffs).max(initial=0.0)))
    return bool(np.allclose(payoffs[1], payoffs[0].T, rtol=0.0, atol=atol * scale))


def use_symmetric(option: SymmetricOption, payoffs: np.ndarray) -> bool:
    """Resolve the option for these payoffs; ``True`` on a non-symmetric game is an error."""
    if option == "auto":
        return is_symmetric(payoffs)
    if option and not is_symmetric(payoffs):
        raise ValueError(
            "symmetric=True needs two players with payoffs[1] == payoffs[0].T; "
            f"got shape {payoffs.shape} that is not symmetric (use symmetric='auto')"
        )
    return bool(option)


def validate_symmetric(instance: Any, attribute: Any, value: Any) -> None:
    """attrs validator: ``True``, ``False`` or ``"auto"``."""
    if not (isinstance(value, bool) or value == "auto"):
        raise ValueError(f"{attribute.name} must be true, false or 'auto', got {value!r}")
