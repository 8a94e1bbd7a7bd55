"""Game-theoretic ratings of policies: Nash averaging and α-Rank.

**Nash averaging** (Balduzzi et al. 2018, "Re-evaluating evaluation"): the maximum-entropy
Nash equilibrium of a two-player zero-sum evaluation game, and each policy's payoff
against it. Agent-vs-agent (:func:`nash_averaging`): the antisymmetric game ``A``
(``A[i, j]``: what ``i`` gains against ``j``; value 0); a rating is ``(A p)_i``, at most 0,
and 0 exactly for the policies in the equilibrium's support. Agent-vs-task
(:func:`nash_averaging_avt`): agents in rows against tasks (here, the other seat's
policies) in columns with score ``S``; agents are rated ``S y`` and tasks ``-S^T x``.
Since the equilibria of a zero-sum game form a product of convex sets, the maximum-
entropy one is found per side: the value from the existing LP (:mod:`.zero_sum`), then
the entropy maximised over that side's optimal strategies with the exponential-cone
program of the correlated solvers (Clarabel through cvxpy). OpenSpiel's
``nash_averaging`` solves the same programs (its agent-vs-task form first rescales each
task's column to [0, 1]; this one rates the scores as given).

**α-Rank** (:func:`alpharank_ratings`): each policy's mass in the stationary distribution of
the α-Rank chain (:mod:`.alpharank`, OpenSpiel's defaults): one population for a
symmetric game, else the marginal of each seat.

Both are registered as ratings of ``popmarl rank``'s cross-play (``popmarl.ratings``:
``alpharank``, :class:`AlphaRankRating`; ``nash_averaging``, :class:`NashAveragingRating`),
from the mean returns: agent-vs-agent on the antisymmetric part of a shared pool's table,
agent-vs-task (seat 0's policies the agents) on the zero-sum part ``(R0 - R1) / 2`` of a
per-seat one.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp

from popmarl.api import CrossPlay, Rating

from popmarl_solvers.alpharank import AlphaRank
from popmarl_solvers.correlated import CorrelatedConfig, _convex
from popmarl_solvers.zero_sum import solve_zero_sum

#: Equilibrium strategies are held to this regret (in the scores' units, after the solve).
REGRET_TOLERANCE = 1e-6


def max_entropy_optimal(s: np.ndarray, value: float) -> np.ndarray:
    """The maximum-entropy strategy of the row player among those guaranteeing ``value``
    in the zero-sum game with row payoffs ``s`` (``x^T s >= value`` in every column)."""
    found = _convex(sp.csr_matrix(-s.T), -value, "max_entropy", CorrelatedConfig(objective="max_entropy"))
    if found is None:
        raise ArithmeticError("nash averaging: the maximum-entropy program found no answer")
    x = np.clip(found[0], 0.0, None)
    return x / x.sum()


def max_entropy_nash(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The maximum-entropy Nash equilibrium ``(x, y)`` of the zero-sum game with row
    payoffs ``s``, and its value."""
    s = np.asarray(s, dtype=float)
    if s.ndim != 2 or 0 in s.shape or not np.all(np.isfinite(s)):
        raise ValueError(f"nash averaging: scores must be a finite non-empty matrix, got shape {s.shape}")
    spread = float(np.ptp(s))
    if spread == 0.0:  # every strategy is optimal: uniform is the maximum-entropy one
        return np.full(s.shape[0], 1 / s.shape[0]), np.full(s.shape[1], 1 / s.shape[1]), float(s.flat[0])
    found = solve_zero_sum(s)
    if found is None:
        raise ArithmeticError("nash averaging: the zero-sum LP found no answer")
    value = float(found[0] @ s @ found[1])
    scaled = (s - s.min()) / spread  # the programs' tolerances mean the same for every scale
    level = (value - s.min()) / spread
    return max_entropy_optimal(scaled, level), max_entropy_optimal(-scaled.T, -level), value


def nash_averaging(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Agent-vs-agent Nash averaging of the antisymmetric ``a``: the maximum-entropy Nash
    mixture ``p`` and the ratings ``a @ p``."""
    a = np.asarray(a, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or not np.allclose(a, -a.T, atol=1e-12):
        raise ValueError(f"nash averaging: agent-vs-agent needs an antisymmetric square matrix, got shape {a.shape}")
    p, _, _ = max_entropy_nash(a)
    return p, a @ p


def nash_averaging_avt(s: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Agent-vs-task Nash averaging of scores ``s`` (agents in rows, tasks in columns):
    the maximum-entropy Nash ``(x, y)`` and the ratings ``(s @ y, -s.T @ x)``."""
    x, y, _ = max_entropy_nash(s)
    s = np.asarray(s, dtype=float)
    return (x, y), (s @ y, -s.T @ x)


def alpharank_ratings(payoffs: np.ndarray, *, symmetric: bool) -> tuple[np.ndarray, ...]:
    """α-Rank mass of each policy: ``payoffs`` ``[2, n0, n1]`` (returns of each seat);
    ``symmetric``: one population playing ``payoffs[0]`` (row = own policy), one answer."""
    solver = AlphaRank()
    c = solver.config
    pi, _ = solver.stationary(np.asarray(payoffs, dtype=float), symmetric, c.alpha, c.infinite_alpha, c.epsilon)
    if symmetric:
        return (pi,)
    joint = pi.reshape(np.shape(payoffs)[1:])
    return joint.sum(axis=1), joint.sum(axis=0)


def shared_returns(play: CrossPlay) -> np.ndarray:
    """A shared pool's square table: ``i``'s mean return against ``j`` over both seat
    orders (the diagonal, not played, 0)."""
    m = (play.returns[0] + play.returns[1].T) / 2
    np.fill_diagonal(m, 0.0)
    return m


class AlphaRankRating(Rating):
    """Rating ``alpharank``: each player's α-Rank mass (one population for a shared pool,
    else each seat's marginal, seat 0's players then seat 1's)."""

    columns = ("alpharank",)

    def rate(self, play: CrossPlay) -> Mapping[str, np.ndarray]:
        if play.shared:
            m = shared_returns(play)
            (mass,) = alpharank_ratings(np.stack([m, m.T]), symmetric=True)
            return {"alpharank": mass}
        return {"alpharank": np.concatenate(alpharank_ratings(play.returns, symmetric=False))}


class NashAveragingRating(Rating):
    """Rating ``nash_averaging``: each player's weight in the maximum-entropy Nash
    equilibrium (``nash_weight``) and its payoff against it (``nash_averaging``):
    agent-vs-agent for a shared pool, agent-vs-task per seat (seat 0's players the agents)."""

    columns = ("nash_weight", "nash_averaging")

    def rate(self, play: CrossPlay) -> Mapping[str, np.ndarray]:
        if play.shared:
            m = shared_returns(play)
            weight, rating = nash_averaging((m - m.T) / 2)
            return {"nash_weight": weight, "nash_averaging": rating}
        (x, y), (agents, tasks) = nash_averaging_avt((play.returns[0] - play.returns[1]) / 2)
        return {"nash_weight": np.concatenate([x, y]), "nash_averaging": np.concatenate([agents, tasks])}
