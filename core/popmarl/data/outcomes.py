"""How a game ended for each seat: won, drawn or lost.

A seat **wins** a game when its return beats every other seat's, **loses** when another
seat's return beats it, and **draws** otherwise (ties at the top; every seat of a game
with one seat). Evaluation reports these per seat (:class:`~popmarl.data.tasks.EvalResult`):
counted over sampled games, or as probabilities where an exact env computes them
(:meth:`~popmarl.interfaces.env.ExactEnv.exact_outcomes`).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

#: The rows of an outcome array, in order.
OUTCOMES = ("win", "draw", "loss")


def outcome_signs(returns: np.ndarray) -> np.ndarray:
    """Per game and seat, +1 (won), 0 (drawn) or -1 (lost): ``returns`` is ``[..., n]``
    (each game's returns in seat order), the result has its shape."""
    returns = np.asarray(returns, dtype=float)
    n = returns.shape[-1]
    if n < 2:
        return np.zeros(returns.shape, dtype=np.int8)
    # The best return among the other seats: the top one, or the runner-up for the top seat.
    ordered = np.sort(returns, axis=-1)
    top, second = ordered[..., -1:], ordered[..., -2:-1]
    best_other = np.where(returns == top, second, top)
    return np.sign(returns - best_other).astype(np.int8)


def outcome_counts(returns: np.ndarray) -> np.ndarray:
    """``[3, n]``: per seat, how many of the games (rows of ``returns``, ``[E, n]``) it
    won, drew and lost (:data:`OUTCOMES` order)."""
    signs = outcome_signs(np.asarray(returns).reshape(-1, np.shape(returns)[-1]))
    return np.stack([(signs > 0).sum(axis=0), (signs == 0).sum(axis=0), (signs < 0).sum(axis=0)]).astype(float)


def outcome_indicators(returns: np.ndarray) -> np.ndarray:
    """``[3, ..., n]``: one-hot win / draw / loss of each seat for returns ``[..., n]``
    (an exact env weighs these by the probability of reaching each terminal)."""
    signs = outcome_signs(returns)
    return np.stack([signs > 0, signs == 0, signs < 0]).astype(float)


@attrs.frozen(kw_only=True, eq=False)
class PlayedGames:
    """Finished games of a train task: who played each seat (``players[g][k]``: a
    learner's key, a frozen policy's id, ``self-play:<key>`` for a copy of a learner) and
    each seat's return (``returns[g, k]``, env agent order). What a league's payoff table
    learns win rates from; the team return of each game is the sum of its row."""

    players: tuple[tuple[str, ...], ...] = ()
    returns: np.ndarray = attrs.field(factory=lambda: np.zeros((0, 0)))

    def __attrs_post_init__(self) -> None:
        if len(self.players) != len(self.returns):
            raise ValueError(f"PlayedGames: {len(self.players)} games named, {len(self.returns)} rows of returns")

    def __len__(self) -> int:
        return len(self.players)

    @property
    def team_returns(self) -> np.ndarray:
        """Each game's summed return over its seats."""
        if not len(self):
            return np.zeros(0)
        return np.asarray(self.returns, dtype=float).reshape(len(self), -1).sum(axis=1)

    @classmethod
    def join(cls, parts: Sequence[PlayedGames]) -> PlayedGames:
        """The games of ``parts``, in order."""
        kept = [p for p in parts if len(p)]
        if len(kept) <= 1:
            return kept[0] if kept else cls()
        return cls(players=tuple(names for p in kept for names in p.players),
                   returns=np.concatenate([p.returns for p in kept]))

    def counts(self) -> dict[tuple[str, ...], np.ndarray]:
        """Per seating (the players of each seat), ``[3, n]``: how many of its games each
        seat won, drew and lost (:func:`outcome_counts`), seatings in order of first play."""
        rows: dict[tuple[str, ...], list[int]] = {}
        for g, names in enumerate(self.players):
            rows.setdefault(tuple(names), []).append(g)
        return {names: outcome_counts(self.returns[index]) for names, index in rows.items()}
