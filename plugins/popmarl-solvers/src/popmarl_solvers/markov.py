"""Stationary distributions of continuous-time Markov chains given by log transition rates.

α-Rank's fixation probabilities span hundreds of orders of magnitude (``exp(-α m Δ)``),
so an eigen-solver on the transition matrix either loses them or reports a reducible
chain. Here each state's rates are first divided by its largest one (the embedded jump
chain: ``π_i ∝ π'_i / d_i``, undone in log space), then every closed communicating class
is solved with the Grassmann–Taksar–Heyman elimination, which uses no subtraction and is
accurate to round-off in every entry (dense, O(N^3); a sparse LU solve takes over for
large classes). When rates underflow to exactly zero and several closed classes remain,
the stationary distribution is not unique: the average of the classes' distributions is
returned and the number of classes reported.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import spsolve
from scipy.special import logsumexp

#: Largest class solved by dense GTH; larger ones use a sparse LU solve.
GTH_MAX_STATES = 600


def gth(rates: np.ndarray) -> np.ndarray:
    """Stationary distribution of an irreducible chain with off-diagonal ``rates`` (dense)."""
    p = np.array(rates, dtype=float)
    np.fill_diagonal(p, 0.0)
    n = p.shape[0]
    for k in range(n - 1, 0, -1):
        total = p[k, :k].sum()
        p[:k, k] /= total
        p[:k, :k] += np.outer(p[:k, k], p[k, :k])
    pi = np.zeros(n)
    pi[0] = 1.0
    for k in range(1, n):
        pi[k] = pi[:k] @ p[:k, k]
    return pi / pi.sum()


def _sparse_stationary(rates: sp.csr_matrix) -> np.ndarray | None:
    """Stationary distribution by one sparse solve (None if the answer is not valid)."""
    n = rates.shape[0]
    generator = (rates - sp.diags(np.asarray(rates.sum(axis=1)).ravel())).T.tolil()
    generator[n - 1, :] = np.ones(n)  # replace one balance equation by the normalisation
    rhs = np.zeros(n)
    rhs[n - 1] = 1.0
    pi = spsolve(generator.tocsc(), rhs, permc_spec="MMD_AT_PLUS_A")  # the pattern is symmetric
    if not np.all(np.isfinite(pi)) or pi.min() < -1e-10 * max(pi.max(), 0.0):
        return None
    return np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum()


def _class_distribution(rates: sp.csr_matrix) -> np.ndarray:
    """Stationary distribution of one irreducible class (GTH when small or if LU fails)."""
    if rates.shape[0] == 1:
        return np.ones(1)
    if rates.shape[0] > GTH_MAX_STATES:
        pi = _sparse_stationary(rates)
        if pi is not None:
            return pi
    return gth(rates.toarray())


def stationary_distribution(
    rows: np.ndarray, cols: np.ndarray, log_rates: np.ndarray, n_states: int
) -> tuple[np.ndarray, int]:
    """Stationary distribution of the chain with rate ``exp(log_rates[e])`` from
    ``rows[e]`` to ``cols[e]``, and the number of closed classes it was averaged over."""
    row_max = np.full(n_states, -np.inf)
    np.maximum.at(row_max, rows, log_rates)
    row_max[~np.isfinite(row_max)] = 0.0  # states with no way out
    scaled = np.exp(log_rates - row_max[rows])
    keep = scaled > 0.0
    rates = sp.csr_matrix((scaled[keep], (rows[keep], cols[keep])), shape=(n_states, n_states))
    n_comp, labels = connected_components(rates, directed=True, connection="strong")
    leaves = labels[rows[keep]] != labels[cols[keep]]
    open_classes = np.unique(labels[rows[keep]][leaves])
    closed = np.setdiff1d(np.arange(n_comp), open_classes)
    pi = np.zeros(n_states)
    for c in closed:
        states = np.flatnonzero(labels == c)
        inner = _class_distribution(rates[states][:, states])
        with np.errstate(divide="ignore"):
            log_pi = np.log(inner) - row_max[states]
        pi[states] += np.exp(log_pi - logsumexp(log_pi)) / len(closed)
    return pi, len(closed)
