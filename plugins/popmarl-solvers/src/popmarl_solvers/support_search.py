"""n-player Nash equilibria by support search (Porter, Nudelman & Shoham 2008).

Pure equilibria are read off the payoff tensor at once. Mixed ones are searched over
support profiles in PNS order — small and balanced supports first — skipping profiles in
which some support strategy is conditionally strictly dominated (given the others'
supports). On each remaining
profile the indifference equations (every support strategy earns the player's value,
each mixture sums to 1: a square polynomial system) are solved by Newton's method
(MINPACK ``hybr``) from the uniform mixtures; a root is accepted when its mixtures are
non-negative and its regret on the whole game is below the tolerance.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from scipy.optimize import root

from popmarl.api import nash_conv

from popmarl_solvers.games import contract, normalize

Supports = tuple[tuple[int, ...], ...]


def pure_equilibrium(payoffs: np.ndarray, tol: float) -> tuple[np.ndarray, ...] | None:
    """A pure Nash equilibrium (regret ≤ ``tol``), or None when there is none."""
    n = payoffs.shape[0]
    stable = np.ones(payoffs.shape[1:], dtype=bool)
    for k in range(n):
        stable &= payoffs[k] >= payoffs[k].max(axis=k, keepdims=True) - tol
    hits = np.argwhere(stable)
    if hits.size == 0:
        return None
    return tuple(np.eye(size)[i] for size, i in zip(payoffs.shape[1:], hits[0], strict=True))


def _size_profiles(sizes: Sequence[int]) -> list[tuple[int, ...]]:
    """Support sizes, smallest total first, then most balanced (pure ones excluded)."""
    profiles = [ks for ks in itertools.product(*(range(1, s + 1) for s in sizes)) if max(ks) > 1]
    return sorted(profiles, key=lambda ks: (sum(ks), max(ks) - min(ks)))


def _undominated(payoffs: np.ndarray, k: int, others: Supports) -> np.ndarray:
    """Player ``k``'s strategies that no strategy strictly beats against every pure
    profile of the other players' supports (``others[j]`` for ``j != k``; ``others[k]``
    is ignored)."""
    axes = [np.arange(payoffs.shape[1 + k]) if j == k else np.asarray(s) for j, s in enumerate(others)]
    sub = payoffs[k][np.ix_(*axes)]
    rows = np.moveaxis(sub, k, 0).reshape(sub.shape[k], -1)
    return ~(rows[:, None, :] > rows[None, :, :]).all(axis=2).any(axis=0)


def _pair_matrix(tensor: np.ndarray, xs: Sequence[np.ndarray], i: int, j: int) -> np.ndarray:
    """``tensor`` contracted with every mixture but players ``i`` and ``j``'s: shape (k_i, k_j)."""
    t = np.moveaxis(tensor, (i, j), (0, 1))
    for other in reversed([k for k in range(len(xs)) if k not in (i, j)]):
        t = t @ xs[other]
    return t


def _candidates(payoffs: np.ndarray) -> Iterator[Supports]:
    """Support profiles in PNS order without conditionally dominated support strategies.

    The last player's support is drawn only from its strategies undominated against the
    others' supports; the undominated sets are cached per (player, others' supports).
    """
    sizes = payoffs.shape[1:]
    last = len(sizes) - 1
    cache: dict[tuple[int, Supports], np.ndarray] = {}

    def allowed(k: int, supports: Supports) -> np.ndarray:
        key = (k, supports[:k] + supports[k + 1 :])
        if key not in cache:
            cache[key] = _undominated(payoffs, k, supports)
        return cache[key]

    for ks in _size_profiles(sizes):
        heads = itertools.product(
            *(itertools.combinations(range(s), k) for s, k in zip(sizes[:-1], ks[:-1], strict=True))
        )
        for head in heads:
            pool = np.flatnonzero(allowed(last, (*head, ())))
            for tail in itertools.combinations(pool.tolist(), ks[-1]):
                supports = (*head, tail)
                if all(allowed(k, supports)[list(supports[k])].all() for k in range(last)):
                    yield supports


def solve_on_support(
    payoffs: np.ndarray,
    supports: Supports,
    start: Sequence[np.ndarray] | None = None,
    restricted_start: bool = False,
) -> tuple[np.ndarray, ...] | None:
    """Mixtures on ``supports`` making every player indifferent there (Newton), or None.

    ``start`` holds full mixtures (or, with ``restricted_start``, mixtures over the
    supports only); the default is uniform on each support.
    """
    n = payoffs.shape[0]
    sub = payoffs[np.ix_(range(n), *supports)]
    ks = [len(s) for s in supports]
    cuts = np.cumsum(ks)[:-1]
    if start is None:
        z0 = np.concatenate([np.full(k, 1.0 / k) for k in ks] + [np.zeros(n)])
    else:
        parts = [start[i] if restricted_start else start[i][list(s)] for i, s in enumerate(supports)]
        z0 = np.concatenate([normalize(p) for p in parts] + [np.zeros(n)])
    start_xs = np.split(z0[:-n], cuts)
    z0[-n:] = [d @ x for d, x in zip(contract(sub, start_xs), start_xs, strict=True)]

    def equations(z: np.ndarray) -> np.ndarray:
        xs = np.split(z[:-n], cuts)
        devs = contract(sub, xs)
        gaps = [d - v for d, v in zip(devs, z[-n:], strict=True)]
        return np.concatenate([*gaps, [x.sum() - 1.0 for x in xs]])

    def jacobian(z: np.ndarray) -> np.ndarray:
        xs = np.split(z[:-n], cuts)
        offsets = np.concatenate([[0], np.cumsum(ks)])
        jac = np.zeros((len(z), len(z)))
        for i in range(n):
            rows = slice(offsets[i], offsets[i + 1])
            for j in range(n):
                if j != i:
                    jac[rows, offsets[j] : offsets[j + 1]] = _pair_matrix(sub[i], xs, i, j)
            jac[rows, offsets[-1] + i] = -1.0
            jac[offsets[-1] + i, rows] = 1.0
        return jac

    z = root(equations, z0, jac=jacobian, method="hybr", options={"xtol": 1e-14}).x
    if not _feasible(z, n):
        # A degenerate game has a continuum of roots, and hybr may slide along it to
        # negative mixtures; minimum-norm Newton steps stay by the start instead.
        z = _minimum_norm_newton(equations, jacobian, z0)
        if not _feasible(z, n):
            return None
    xs = np.split(z[:-n], cuts)
    full = []
    for size, s, x in zip(payoffs.shape[1:], supports, xs, strict=True):
        mixture = np.zeros(size)
        mixture[list(s)] = np.clip(x, 0.0, None)
        full.append(normalize(mixture))
    return tuple(full)


def _feasible(z: np.ndarray, n: int) -> bool:
    """Finite, with non-negative mixtures (the last ``n`` entries are the values)."""
    return bool(np.all(np.isfinite(z)) and z[:-n].min() >= -1e-9)


def _minimum_norm_newton(
    equations: Callable[[np.ndarray], np.ndarray],
    jacobian: Callable[[np.ndarray], np.ndarray],
    z: np.ndarray,
    steps: int = 20,
) -> np.ndarray:
    """Newton's method with least-squares (minimum-norm) steps: on a singular Jacobian it
    moves to the nearest root rather than along the set of roots."""
    for _ in range(steps):
        residual = equations(z)
        if not np.all(np.isfinite(residual)) or np.abs(residual).max() <= 1e-15:
            break
        z = z - np.linalg.lstsq(jacobian(z), residual, rcond=None)[0]
    return z


def support_search(
    payoffs: np.ndarray, tol: float, max_profiles: int, starts: int = 3, seed: int = 0,
    deadline: float = float("inf"),
) -> tuple[tuple[np.ndarray, ...] | None, int]:
    """An equilibrium with regret ≤ ``tol`` and the number of Newton solves it took
    (None when ``max_profiles`` solves or the ``time.monotonic()`` ``deadline`` pass first).

    The first pass starts Newton from the uniform mixtures on each support; later passes
    (``starts`` in all) restart from random mixtures, since the indifference system can
    have several roots and Newton may miss the non-negative one.
    """
    pure = pure_equilibrium(payoffs, tol)
    if pure is not None:
        return pure, 0
    rng = np.random.default_rng(seed)
    tried = 0
    for attempt in range(starts):
        for supports in _candidates(payoffs):
            if tried >= max_profiles or time.monotonic() > deadline:
                return None, tried
            tried += 1
            start = None if attempt == 0 else [rng.dirichlet(np.ones(len(s))) for s in supports]
            found = solve_on_support(payoffs, supports, start, restricted_start=True)
            if found is not None and nash_conv(payoffs, found) <= tol:
                return found, tried
    return None, tried
