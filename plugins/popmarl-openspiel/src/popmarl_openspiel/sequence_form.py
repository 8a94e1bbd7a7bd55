"""Sequence-form algebra: realization plans and exact expected returns.

A behavioural policy of player ``p`` (action probabilities per information state) is a
realization plan ``x_p`` over its sequences: ``x[1 + I*A + a] = x[parent(I)] * pi(a|I)``.
The expected return of a profile is ``sum_z c(z) u(z) prod_p x_p[seq_p(z)]``; for two
players that is ``x_0^T A x_1`` with ``A`` the sparse sequence-form payoff matrix (chance
folded in), so a whole block of payoff-table entries is one matrix product.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from popmarl_openspiel.tree import GameTree, InfoStates


def realization_plan(probs: np.ndarray, infostates: InfoStates, num_actions: int) -> np.ndarray:
    """The realization plan ``[1 + n * A]`` of behaviour ``probs`` ``[n, A]``."""
    x = np.zeros(1 + len(infostates) * num_actions)
    x[0] = 1.0
    table = x[1:].reshape(len(infostates), num_actions)  # a view: filling it fills x
    for level in infostates.levels:
        table[level] = x[infostates.parent[level], None] * probs[level]
    return x


def behaviour(plan: np.ndarray, infostates: InfoStates, num_actions: int) -> np.ndarray:
    """The behaviour ``[n, A]`` a realization plan induces; uniform over the legal actions
    where the plan never reaches the information state (as OpenSpiel's aggregator)."""
    table = plan[1:].reshape(len(infostates), num_actions) * infostates.mask
    reach = table.sum(axis=1, keepdims=True)
    uniform = infostates.mask / infostates.mask.sum(axis=1, keepdims=True)
    safe = np.where(reach > 0, reach, 1.0)
    return np.asarray(np.where(reach > 0, table / safe, uniform))


class SequenceForm:
    """Expected returns of many profiles from realization plans.

    Two players: one sparse matrix per player's utility, ``[S_0, S_1]``; more: the
    same for two of them, with the other players' plans folded into the terminal
    histories' weights ``c(z) u(z)``.
    """

    def __init__(self, tree: GameTree) -> None:
        self.tree = tree
        self.n = tree.terminal_seq.shape[1]
        weights = tree.terminal_chance[:, None] * tree.terminal_utility  # [Z, n]
        self.weights = weights
        self.matrices: tuple[sp.csr_matrix, ...] = ()
        self._pairs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if self.n == 2:
            shape = (tree.num_sequences(0), tree.num_sequences(1))
            rows, cols = tree.terminal_seq[:, 0], tree.terminal_seq[:, 1]
            self.matrices = tuple(
                sp.coo_matrix((weights[:, k], (rows, cols)), shape=shape).tocsr() for k in range(2)
            )

    def block(self, plans: Sequence[np.ndarray]) -> np.ndarray:
        """Two players: ``[2, m_0, m_1]`` returns of every pairing of the plan columns
        ``plans[0]`` ``[S_0, m_0]`` and ``plans[1]`` ``[S_1, m_1]``."""
        x, y = plans
        return np.stack([np.asarray(x.T @ (m @ y)) for m in self.matrices])

    def returns(self, plans: Sequence[np.ndarray], index: np.ndarray) -> np.ndarray:
        """``[B, n]`` returns of profiles ``index[b] = (column of player 0's plans, ...)``,
        ``plans[p]`` being ``[S_p, m_p]``."""
        index = np.asarray(index, dtype=np.int64).reshape(-1, self.n)
        if self.n == 2:
            values = self.block(plans)
            return values[:, index[:, 0], index[:, 1]].T
        return self._folded_returns(plans, index)

    def _folded_returns(self, plans: Sequence[np.ndarray], index: np.ndarray) -> np.ndarray:
        """More than two players: all but two players' plans are folded into the terminal
        weights, and the two left form a sparse bilinear form over their columns. The
        profiles are grouped by :func:`fold_groups`, so that one fold answers as many as
        possible. With three players, a PSRO iteration's new entries (each player's new
        policy against all the others' policies) are three groups, one per new policy,
        whatever the population sizes, where folding one fixed player would take one
        group per policy of that player."""
        seqs = self.tree.terminal_seq
        out = np.zeros((len(index), self.n))
        for folded, columns, rows in fold_groups(index, self.n - 2):
            a, b = (p for p in range(self.n) if p not in folded)
            order, indices, indptr = self._pair_structure(a, b)
            shape = (self.tree.num_sequences(a), self.tree.num_sequences(b))
            reach = np.ones(len(order))
            for p, col in zip(folded, columns, strict=True):
                reach *= plans[p][seqs[order, p], col]
            cols_a, at_a = np.unique(index[rows, a], return_inverse=True)
            cols_b, at_b = np.unique(index[rows, b], return_inverse=True)
            x, y = plans[a][:, cols_a], plans[b][:, cols_b]
            for k in range(self.n):
                matrix = sp.csr_matrix((reach * self.weights[order, k], indices, indptr), shape=shape)
                out[rows, k] = np.asarray(x.T @ (matrix @ y))[at_a.ravel(), at_b.ravel()]
        return out

    def _pair_structure(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The terminals sorted by (player ``a``'s, player ``b``'s) sequence, as a CSR
        structure (``order``, column ``indices``, ``indptr``) the folded weights fill;
        built once per pair."""
        cached = self._pairs.get((a, b))
        if cached is None:
            seqs = self.tree.terminal_seq
            order = np.lexsort((seqs[:, b], seqs[:, a]))
            counts = np.bincount(seqs[order, a], minlength=self.tree.num_sequences(a))
            indptr = np.concatenate([[0], np.cumsum(counts)])
            cached = self._pairs[(a, b)] = (order, seqs[order, b], indptr)
        return cached


def fold_groups(index: np.ndarray, n_fold: int) -> Iterator[tuple[tuple[int, ...], np.ndarray, np.ndarray]]:
    """The rows of ``index`` (``[B, n]`` profiles of columns) in groups that share the
    columns of ``n_fold`` players: ``(those players, their columns, the rows)``. Greedy:
    each group is the (players, columns) combination the most remaining rows share."""
    remaining = np.arange(len(index))
    player_sets = list(itertools.combinations(range(index.shape[1]), n_fold))
    while len(remaining):
        best: tuple[int, tuple[int, ...], np.ndarray, np.ndarray] | None = None
        for players in player_sets:
            shared = index[remaining][:, list(players)]
            values, inverse, counts = np.unique(
                shared, return_index=False, return_inverse=True, return_counts=True, axis=0
            )
            top = int(counts.argmax())
            if best is None or counts[top] > best[0]:
                best = (int(counts[top]), players, values[top], inverse.ravel() == top)
        assert best is not None
        _, players, columns, hit = best
        yield players, columns, remaining[hit]
        remaining = remaining[~hit]


def best_response(tree: GameTree, player: int, weights: np.ndarray) -> tuple[np.ndarray, float]:
    """``player``'s deterministic best response — one action per information state, tree
    order — and its value, when terminal history ``z`` is reached with weight
    ``weights[z]`` by chance and everyone else (``[Z]``; any mixture or correlation of
    the others' plans): bottom-up over the player's own sequences, the best action's
    value added to its parent sequence. Unreached states get their first legal action."""
    infostates, actions_per = tree.players[player], tree.num_actions
    values = np.bincount(tree.terminal_seq[:, player], weights=weights * tree.terminal_utility[:, player],
                         minlength=tree.num_sequences(player))
    table = values[1:].reshape(len(infostates), actions_per)  # a view: children fill it
    actions = np.zeros(len(infostates), dtype=np.int64)
    for level in reversed(infostates.levels):
        legal = np.where(infostates.mask[level], table[level], -np.inf)
        best = legal.argmax(axis=1)
        actions[level] = best
        np.add.at(values, infostates.parent[level], legal[np.arange(len(level)), best])
    return actions, float(values[0])
