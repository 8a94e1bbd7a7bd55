"""One traversal of the whole game tree, flattened into numpy arrays.

What exact evaluation needs and nothing more: each player's information states (key,
observation, legal mask, and the player's own previous sequence), and each terminal
history's chance reach, utilities and every player's last sequence. Sequences are
numbered ``0`` (empty) and ``1 + info_state * num_actions + action``, so a realization
plan's ``x[1:]`` reshapes to ``[n_info_states, num_actions]``.
"""

from __future__ import annotations

import itertools
import sys

import attrs
import numpy as np
import pyspiel

from popmarl_openspiel.game import SpielGame


class TreeTooLarge(Exception):
    """The game has more histories than the configured limit."""


class NotPerfectRecall(Exception):
    """An information state is reached through different own sequences (``key``: the
    first such state's key, left out of the message: keys can span lines)."""

    def __init__(self, player: int, key: str) -> None:
        super().__init__(f"player {player}'s information states lack perfect recall: one is reached by "
                         "different sequences of its own actions")
        self.player = player
        self.key = key


@attrs.frozen(kw_only=True, eq=False)
class InfoStates:
    """One player's information states, in discovery (depth-first) order, so a state's
    parent sequence always belongs to an earlier state."""

    keys: tuple[str, ...]
    obs: np.ndarray  # [n, obs_size] float32
    mask: np.ndarray  # [n, num_actions] bool
    parent: np.ndarray  # [n] int64: the player's sequence leading to the state
    levels: tuple[np.ndarray, ...]  # state indices grouped by own depth

    def __len__(self) -> int:
        return len(self.keys)


@attrs.frozen(kw_only=True, eq=False)
class GameTree:
    """The flattened tree: information states per player and terminal histories."""

    num_actions: int
    players: tuple[InfoStates, ...]
    terminal_seq: np.ndarray  # [Z, n] int64: each player's last sequence
    terminal_chance: np.ndarray  # [Z]: product of chance probabilities
    terminal_utility: np.ndarray  # [Z, n]
    num_histories: int

    def num_sequences(self, player: int) -> int:
        return 1 + len(self.players[player]) * self.num_actions


class _Builder:
    """Depth-first traversal state (lists grow; converted to arrays at the end)."""

    def __init__(self, spiel: SpielGame, limit: int) -> None:
        self.spiel = spiel
        self.limit = limit
        self.n = spiel.num_players
        self.A = spiel.num_actions
        self.index: list[dict[str, int]] = [{} for _ in range(self.n)]
        self.obs: list[list[list[float]]] = [[] for _ in range(self.n)]
        self.mask: list[list[list[int]]] = [[] for _ in range(self.n)]
        self.parent: list[list[int]] = [[] for _ in range(self.n)]
        self.t_seq: list[tuple[int, ...]] = []
        self.t_chance: list[float] = []
        self.t_utility: list[list[float]] = []
        self.histories = 0

    def info_state(self, state: pyspiel.State, player: int, seq: int) -> int:
        key = self.spiel.tabular_key(state, player)
        index = self.index[player].get(key)
        if index is None:
            index = len(self.parent[player])
            self.index[player][key] = index
            self.obs[player].append(self.spiel.tensor(state, player))
            self.mask[player].append(state.legal_actions_mask(player))
            self.parent[player].append(seq)
        elif self.parent[player][index] != seq:
            raise NotPerfectRecall(player, key)
        return index

    def visit(self, state: pyspiel.State, chance: float, seqs: tuple[int, ...]) -> None:
        self.histories += 1
        if self.histories > self.limit:
            raise TreeTooLarge(f"more than {self.limit} histories")
        if state.is_terminal():
            self.t_seq.append(seqs)
            self.t_chance.append(chance)
            self.t_utility.append(state.returns())
            return
        if state.is_chance_node():
            for action, prob in state.chance_outcomes():
                if prob > 0:
                    self.visit(state.child(action), chance * prob, seqs)
            return
        A = self.A
        if state.is_simultaneous_node():
            bases = [1 + self.info_state(state, p, seqs[p]) * A for p in range(self.n)]
            for joint in itertools.product(*(state.legal_actions(p) for p in range(self.n))):
                child = state.clone()
                child.apply_actions(list(joint))
                self.visit(child, chance, tuple(b + a for b, a in zip(bases, joint)))
            return
        player = state.current_player()
        base = 1 + self.info_state(state, player, seqs[player]) * A
        for action in state.legal_actions():
            child_seqs = seqs[:player] + (base + action,) + seqs[player + 1:]
            self.visit(state.child(action), chance, child_seqs)

    def infostates(self, player: int) -> InfoStates:
        keys = tuple(self.index[player])
        parent = np.asarray(self.parent[player], dtype=np.int64)
        depth = np.zeros(len(parent), dtype=np.int64)
        for i, seq in enumerate(self.parent[player]):  # parents come first (depth-first order)
            depth[i] = 0 if seq == 0 else depth[(seq - 1) // self.A] + 1
        levels = tuple(np.flatnonzero(depth == d) for d in range(int(depth.max(initial=-1)) + 1))
        obs = np.asarray(self.obs[player], dtype=np.float32).reshape(len(keys), self.spiel.observation_size)
        mask = np.asarray(self.mask[player], dtype=bool).reshape(len(keys), self.A)
        return InfoStates(keys=keys, obs=obs, mask=mask, parent=parent, levels=levels)


def build_tree(spiel: SpielGame, *, limit: int) -> GameTree:
    """Traverse ``spiel``'s tree (chance enumerated); raise :class:`TreeTooLarge` past
    ``limit`` histories and :class:`NotPerfectRecall` when keys do not have it."""
    builder = _Builder(spiel, limit)
    depth = spiel.game.max_game_length() + 64
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * depth + 1000))
    try:
        builder.visit(spiel.game.new_initial_state(), 1.0, (0,) * spiel.num_players)
    finally:
        sys.setrecursionlimit(old)
    n = spiel.num_players
    return GameTree(
        num_actions=spiel.num_actions,
        players=tuple(builder.infostates(p) for p in range(n)),
        terminal_seq=np.asarray(builder.t_seq, dtype=np.int64).reshape(-1, n),
        terminal_chance=np.asarray(builder.t_chance, dtype=float),
        terminal_utility=np.asarray(builder.t_utility, dtype=float).reshape(-1, n),
        num_histories=builder.histories,
    )
