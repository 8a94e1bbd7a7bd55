"""A league's table of win rates between players, and prioritized fictitious self-play.

:class:`WinRates` is the payoff table of AlphaStar's league (Vinyals et al. 2019, the
published pseudocode's ``Payoff``): per ordered pair of players, decayed counts of games,
wins, draws and losses; the win rate of ``home`` against ``away`` is
``(wins + draws / 2) / games``, and 0.5 for a pair that has not played. Every game first
multiplies the pair's earlier counts by ``decay`` (0.99 in the pseudocode), so recent
games weigh more as players change. Results arrive per round, as counts of a pair's
games (:meth:`WinRates.record`): the old counts decay by ``decay ** n`` for ``n`` games
and each new game counts ``(1 - decay ** n) / (n (1 - decay))``, the mean weight of the
``n`` games had they come one by one in any order.

:func:`pfsp` turns win rates against candidate opponents into probabilities of meeting
them (the pseudocode's weightings; a draw over all-zero weights is uniform).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

#: PFSP weightings of the win rate ``p`` against an opponent.
WEIGHTINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "squared": lambda p: (1 - p) ** 2,
    "variance": lambda p: p * (1 - p),
    "linear": lambda p: 1 - p,
    "linear_capped": lambda p: np.minimum(0.5, 1 - p),
    "uniform": lambda p: np.ones_like(p),
}

_STATS = ("games", "wins", "draws", "losses")


def pfsp(win_rates: Sequence[float] | np.ndarray, weighting: str) -> np.ndarray:
    """Probabilities over opponents from the learner's win rates against them: hard
    opponents first (``squared``, ``linear``, ``linear_capped``), even ones
    (``variance``), or all alike (``uniform``); uniform where every weight is zero."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"pfsp weighting {weighting!r} is not allowed; allowed: {', '.join(WEIGHTINGS)}")
    rates = np.asarray(win_rates, dtype=float)
    if rates.size == 0:
        return rates
    weights = WEIGHTINGS[weighting](rates)
    total = float(weights.sum())
    if total < 1e-10:
        return np.full(rates.shape, 1.0 / rates.size)
    return weights / total


class WinRates:
    """Decayed game counts between players, by player id (ids are added, never removed)."""

    def __init__(self, *, decay: float, players: Sequence[str] = (),
                 counts: Mapping[str, np.ndarray] | None = None) -> None:
        self.decay = float(decay)
        self.players: list[str] = list(players)
        self._index = {p: k for k, p in enumerate(self.players)}
        n = len(self.players)
        self.counts = {name: np.array(counts[name], dtype=float) if counts is not None else np.zeros((n, n))
                       for name in _STATS}
        if any(c.shape != (n, n) for c in self.counts.values()):
            raise ValueError(f"WinRates: every table needs shape ({n}, {n}) for {n} players")

    def add(self, player: str) -> None:
        """A new player, who has played nobody yet."""
        if player in self._index:
            raise ValueError(f"WinRates: player {player!r} is already in the table")
        self._index[player] = len(self.players)
        self.players.append(player)
        self.counts = {name: np.pad(c, ((0, 1), (0, 1))) for name, c in self.counts.items()}

    def __contains__(self, player: object) -> bool:
        return player in self._index

    def record(self, home: str, away: str, wins: float, draws: float, losses: float) -> None:
        """``home``'s results in games against ``away`` (counts; exact probabilities times
        a number of games are counts too). ``away`` sees them reversed."""
        n = wins + draws + losses
        if n <= 0:
            return
        h, a = self._index[home], self._index[away]
        factor = self.decay ** n
        weight = 1.0 if self.decay == 1.0 else (1.0 - factor) / (n * (1.0 - self.decay))
        if h == a:  # a player against a copy of itself: both sides of each game
            cells = {(h, h): (wins + losses, 2 * draws, losses + wins)}
        else:
            cells = {(h, a): (wins, draws, losses), (a, h): (losses, draws, wins)}
        for cell, (w, d, lost) in cells.items():
            for name in _STATS:
                self.counts[name][cell] *= factor
            self.counts["games"][cell] += weight * (w + d + lost)
            self.counts["wins"][cell] += weight * w
            self.counts["draws"][cell] += weight * d
            self.counts["losses"][cell] += weight * lost

    def games(self, home: str, aways: Sequence[str]) -> np.ndarray:
        """``home``'s decayed game counts against each of ``aways``."""
        return self.counts["games"][self._index[home], [self._index[a] for a in aways]]

    def win_rate(self, home: str, aways: Sequence[str]) -> np.ndarray:
        """``home``'s win rate against each of ``aways`` (draws count half; 0.5 unplayed)."""
        h, a = self._index[home], [self._index[p] for p in aways]
        games = self.counts["games"][h, a]
        won = self.counts["wins"][h, a] + 0.5 * self.counts["draws"][h, a]
        return np.where(games > 0, won / np.where(games > 0, games, 1.0), 0.5)

    def arrays(self) -> dict[str, np.ndarray]:
        """The counts, for a checkpoint (with :attr:`players`)."""
        return {f"win_rates_{name}": c for name, c in self.counts.items()}

    @classmethod
    def from_arrays(cls, *, decay: float, players: Sequence[str], arrays: Mapping[str, np.ndarray]) -> WinRates:
        """The table :meth:`arrays` saved."""
        return cls(decay=decay, players=players, counts={name: arrays[f"win_rates_{name}"] for name in _STATS})
