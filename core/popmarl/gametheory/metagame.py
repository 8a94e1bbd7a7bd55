"""Normal-form (meta-)game arithmetic on payoff tensors.

``payoffs`` has shape ``[n, |S_1|, ..., |S_n|]``: ``payoffs[k, s_1, ..., s_n]`` is player
``k``'s payoff when player ``j`` plays strategy ``s_j``. Mixtures are 1-D probability
vectors, one per player.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


#: Joint probabilities at or below this are outside a joint distribution's support: not
#: drawn as opponents, not listed as its profiles (as OpenSpiel's jpsro ``DIST_TOL``).
JOINT_SUPPORT_TOL = 1e-8


def joint_support(joint: np.ndarray, axis_ids: Sequence[Sequence[str]]) -> tuple[list[list[str]], list[float]]:
    """The profiles of ``joint``'s support, one id per axis each (``axis_ids[k]``: axis
    ``k``'s ids), and their probabilities."""
    index = np.argwhere(joint > JOINT_SUPPORT_TOL)
    return [[axis_ids[k][i] for k, i in enumerate(row)] for row in index], joint[tuple(index.T)].tolist()


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


def new_strategy_gains(payoffs: np.ndarray, previous: Sequence[np.ndarray]) -> np.ndarray:
    """Per player, the gain of its best strategy beyond ``previous``'s (the strategies
    added to the game since, e.g. PSRO's new best responses) against the others'
    ``previous`` mixtures, over those mixtures' value (0 for a player with none new)."""
    payoffs = np.asarray(payoffs, dtype=float)
    mixtures = [np.pad(np.asarray(m, float), (0, payoffs.shape[1 + k] - len(m))) for k, m in enumerate(previous)]
    gains = []
    for k, dev in enumerate(deviation_payoffs(payoffs, mixtures)):
        new = dev[len(previous[k]):]
        gains.append(float(new.max() - dev @ mixtures[k]) if new.size else 0.0)
    return np.array(gains)


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


# -- joint (correlated) distributions over profiles ------------------------------------
# A joint distribution ``joint`` has shape ``[|S_1|, ..., |S_n|]`` and sums to 1.


def marginals(joint: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each player's marginal mixture of a joint distribution over profiles."""
    joint = np.asarray(joint, dtype=float)
    return tuple(joint.sum(axis=tuple(j for j in range(joint.ndim) if j != k)) for k in range(joint.ndim))


def joint_values(payoffs: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """Each player's expected payoff when profiles are drawn from ``joint``."""
    payoffs = np.asarray(payoffs, dtype=float)
    return np.array([float((payoffs[k] * joint).sum()) for k in range(payoffs.shape[0])])


def cce_gains(payoffs: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """Per player, the gain of the best strategy played regardless of the recommendation
    (a coarse correlated equilibrium has every gain ≤ 0)."""
    payoffs, joint = np.asarray(payoffs, dtype=float), np.asarray(joint, dtype=float)
    gains = []
    for k in range(payoffs.shape[0]):
        others = joint.sum(axis=k, keepdims=True)  # the others' joint marginal, broadcast over k's axis
        deviation = (payoffs[k] * others).sum(axis=tuple(j for j in range(joint.ndim) if j != k))
        gains.append(float(deviation.max() - (payoffs[k] * joint).sum()))
    return np.array(gains)


def ce_gains(payoffs: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """Per player, the summed gains of the best deviation from each recommendation
    (never negative; all 0 exactly at a correlated equilibrium): ``Σ_i max_j Σ_{-k} σ(i,-k)(u(j,-k) − u(i,-k))``."""
    payoffs, joint = np.asarray(payoffs, dtype=float), np.asarray(joint, dtype=float)
    gains = []
    for k in range(payoffs.shape[0]):
        u = np.moveaxis(payoffs[k], k, 0).reshape(payoffs.shape[k + 1], -1)  # [own strategy, others' profile]
        s = np.moveaxis(joint, k, 0).reshape(joint.shape[k], -1)
        # [recommended i, deviation j]: Σ_others σ(i, o) u(j, o), minus the on-recommendation value
        table = s @ u.T
        gains.append(float((table.max(axis=1) - np.diag(table)).sum()))
    return np.array(gains)


def cce_gap(payoffs: np.ndarray, joint: np.ndarray) -> float:
    """Sum of the players' positive CCE gains: 0 exactly at a coarse correlated equilibrium."""
    return float(np.maximum(cce_gains(payoffs, joint), 0.0).sum())


def ce_gap(payoffs: np.ndarray, joint: np.ndarray) -> float:
    """Sum of the players' CE gains: 0 exactly at a correlated equilibrium."""
    return float(np.maximum(ce_gains(payoffs, joint), 0.0).sum())


def check_joint(joint: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``joint`` as a float array after checking it is a distribution over profiles of ``shape``."""
    arr = np.asarray(joint, dtype=float)
    if arr.shape != shape:
        raise ValueError(f"a joint distribution over profiles must have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)) or arr.min() < -1e-9 or abs(arr.sum() - 1.0) > 1e-6:
        raise ValueError("a joint distribution must be non-negative and sum to 1")
    return np.clip(arr, 0.0, None) / np.clip(arr, 0.0, None).sum()
