"""Normal-form (meta-)game arithmetic on payoff tensors.

``payoffs`` has shape ``[n, |S_1|, ..., |S_n|]``: ``payoffs[k, s_1, ..., s_n]`` is player
``k``'s payoff when player ``j`` plays strategy ``s_j``. Mixtures are 1-D probability
vectors, one per player.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _contract_except(tensor: np.ndarray, mixtures: Sequence[np.ndarray], keep: int) -> np.ndarray:
    """Contract every player axis of ``tensor`` but ``keep`` with that player's mixture."""
    result = tensor
    # Contract from the last axis down so the remaining axis indices stay valid.
    for axis in reversed(range(len(mixtures))):
        if axis != keep:
            result = np.tensordot(result, mixtures[axis], axes=([axis], [0]))
    return result


def deviation_payoffs(payoffs: np.ndarray, mixtures: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per player, the expected payoff of each pure strategy against the others' mixtures."""
    payoffs = np.asarray(payoffs, dtype=float)
    return [_contract_except(payoffs[k], mixtures, k) for k in range(payoffs.shape[0])]


def expected_payoffs(payoffs: np.ndarray, mixtures: Sequence[np.ndarray]) -> np.ndarray:
    """Each player's expected payoff under the joint mixture (a vector of length n)."""
    return np.array(
        [float(dev @ np.asarray(mixtures[k], float)) for k, dev in enumerate(deviation_payoffs(payoffs, mixtures))]
    )


def batch_expected_payoffs(payoffs: np.ndarray, strategies: Sequence[np.ndarray]) -> np.ndarray:
    """Expected payoffs of many joint mixed profiles at once.

    ``strategies[k]`` is ``[B, |S_k|]`` (row ``b``: player ``k``'s mixture in profile
    ``b``); returns ``[B, n]``.
    """
    n = len(strategies)
    letters = "abcdefghijklmnopqrstuvwxy"[:n]
    spec = f"k{letters}," + ",".join(f"z{c}" for c in letters) + "->zk"
    return np.einsum(spec, np.asarray(payoffs, float), *strategies, optimize=True)


def regrets(payoffs: np.ndarray, mixtures: Sequence[np.ndarray]) -> np.ndarray:
    """Per player, the gain of the best pure deviation (all ≥ 0 up to rounding)."""
    devs = deviation_payoffs(payoffs, mixtures)
    return np.array([float(dev.max() - dev @ np.asarray(mixtures[k], float)) for k, dev in enumerate(devs)])


def nash_conv(payoffs: np.ndarray, mixtures: Sequence[np.ndarray]) -> float:
    """Sum of the players' best-deviation gains: 0 exactly at a Nash equilibrium."""
    return float(max(0.0, regrets(payoffs, mixtures).sum()))


def entropy(mixture: np.ndarray) -> float:
    """Shannon entropy (nats) of a mixture."""
    p = np.asarray(mixture, dtype=float)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def check_payoffs(payoffs: np.ndarray) -> np.ndarray:
    """Return ``payoffs`` as a float array after checking its shape is ``[n, |S_1|, ..., |S_n|]``."""
    arr = np.asarray(payoffs, dtype=float)
    if arr.ndim < 2 or arr.shape[0] != arr.ndim - 1:
        raise ValueError(
            f"payoffs must have shape [n_players, |S_1|, ..., |S_n|], got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("payoffs contain NaN or infinite entries")
    return arr
