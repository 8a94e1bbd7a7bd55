"""A tabular policy: action probabilities per (player, information-state string).

Weights are plain arrays, no pickles: ``players`` (int), ``keys`` (unicode strings) and
``probs`` (``[rows, num_actions]``). Information states without a row play uniformly
over their legal actions, so the empty table is the uniform random policy that PSRO
starts from. Rows are keyed by player as well as by string because some games (e.g.
simultaneous-move ones) give two players the same information-state string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from popmarl.api import ExplicitPolicy, Observations, Weights


def player_of(agent: str) -> int:
    """``3`` for ``player_3``; ``-1`` for an unnamed batch."""
    prefix, _, index = agent.rpartition("_")
    return int(index) if prefix == "player" and index.isdigit() else -1


class TabularPolicy(ExplicitPolicy):
    """Behaviour per information state; needs ``Observations.keys`` (the env sets them)."""

    def __init__(self, num_actions: int, *, players: np.ndarray | None = None,
                 keys: Sequence[str] | np.ndarray | None = None, probs: np.ndarray | None = None) -> None:
        self.num_actions = num_actions
        #: Bumped by every :meth:`set_weights`, so caches keyed on the policy notice.
        self.version = 0
        self._set(np.zeros(0, np.int64) if players is None else players,
                  np.zeros(0, str) if keys is None else keys,
                  np.zeros((0, num_actions)) if probs is None else probs)

    @classmethod
    def from_tables(cls, num_actions: int, tables: Mapping[int, tuple[Sequence[str], np.ndarray]]) -> TabularPolicy:
        """One block of rows per player: ``{player: (keys, probs [n, A])}``."""
        players = [np.full(len(keys), p, np.int64) for p, (keys, _) in tables.items()]
        keys = [k for keys, _ in tables.values() for k in keys]
        probs = [np.asarray(probs, float).reshape(-1, num_actions) for _, probs in tables.values()]
        return cls(num_actions,
                   players=np.concatenate(players) if players else None,
                   keys=keys,
                   probs=np.concatenate(probs) if probs else None)

    def _set(self, players: np.ndarray, keys: Sequence[str] | np.ndarray, probs: np.ndarray) -> None:
        self.players = np.asarray(players, dtype=np.int64).reshape(-1)
        self.keys = np.asarray(keys, dtype=str).reshape(-1)
        self.probs = np.asarray(probs, dtype=float).reshape(-1, self.num_actions)
        if not len(self.players) == len(self.keys) == len(self.probs):
            raise ValueError(f"tabular weights disagree: {len(self.players)} players, {len(self.keys)} keys, "
                             f"{len(self.probs)} probability rows")
        self._rows: dict[int, dict[str, int]] = {}
        for i, (p, k) in enumerate(zip(self.players.tolist(), self.keys.tolist())):
            self._rows.setdefault(p, {})[k] = i
        self._rows[-1] = {k: i for i, k in enumerate(self.keys.tolist())}

    def rows(self, agent: str, keys: Sequence[str]) -> np.ndarray:
        """The table row of each key for ``agent`` (``-1`` where there is none); an
        unnamed batch (``agent=""``) matches keys of any player."""
        lookup = self._rows.get(player_of(agent))
        if not lookup:
            return np.full(len(keys), -1, dtype=np.int64)
        get = lookup.get
        return np.array([get(k, -1) for k in keys], dtype=np.int64)

    def probabilities(self, batch: Observations) -> np.ndarray:
        if batch.keys is None:
            raise ValueError("a tabular policy needs information-state keys in its observations "
                             "(the openspiel env provides them)")
        rows = self.rows(batch.agent, batch.keys)
        legal = (np.ones((len(rows), self.num_actions), bool) if batch.mask is None
                 else np.asarray(batch.mask, dtype=bool))
        probs = np.ones((len(rows), self.num_actions))
        known = rows >= 0
        if known.any():
            probs[known] = self.probs[rows[known]]
        probs *= legal
        total = probs.sum(axis=1, keepdims=True)
        empty = total[:, 0] <= 0  # no mass on a legal action: fall back to uniform
        if empty.any():
            probs[empty] = legal[empty]
            total[empty] = legal[empty].sum(axis=1, keepdims=True)
        return np.asarray(probs / total)

    def get_weights(self) -> Weights:
        return {"players": self.players.copy(), "keys": self.keys.copy(), "probs": self.probs.copy()}

    def set_weights(self, weights: Weights) -> None:
        probs = np.asarray(weights["probs"], dtype=float)
        if probs.ndim != 2 or probs.shape[1] != self.num_actions:
            raise ValueError(f"tabular weights have {probs.shape} probabilities; this policy has "
                             f"{self.num_actions} actions")
        self._set(weights["players"], weights["keys"], probs)
        self.version += 1
