"""One normal-form game played by a person and actors (``popmarl play`` on ``matrix``).

Every seat moves once, at the same time; the person sees its own payoffs (with two
players, as a table against the other's actions) and every move once they are made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from popmarl.api import Action, Match

#: The named games' action names.
ACTION_NAMES = {"rps": ("Rock", "Paper", "Scissors"), "matching_pennies": ("Heads", "Tails"),
                "prisoners_dilemma": ("Cooperate", "Defect")}


class MatrixMatch(Match):
    """A game of the payoff tensor ``payoffs`` (``[n, A_1, ..., A_n]``) for the person in ``seat``."""

    def __init__(self, *, payoffs: np.ndarray, agents: tuple[str, ...], seat: str, game: str) -> None:
        self.payoffs, self.agents, self.seat = payoffs, agents, seat
        self._me = agents.index(seat)
        self._names = ACTION_NAMES.get(game)
        self._played: dict[str, int] | None = None

    def name(self, agent: str, action: int) -> str:
        return self._names[action] if self._names else str(action)

    def to_move(self) -> tuple[str, ...]:
        return () if self._played is not None else self.agents

    def observation(self, agent: str) -> tuple[Any, np.ndarray | None]:
        return None, None

    def legal_moves(self) -> dict[int, str]:
        return {a: self.name(self.seat, a) for a in range(self.payoffs.shape[1 + self._me])}

    def view(self) -> str:
        if self._played is not None:
            moves = ", ".join(f"{a} {self.name(a, m)}" for a, m in self._played.items())
            return f"moves: {moves}"
        if len(self.agents) != 2:
            return f"{len(self.agents)} players move at once; you are {self.seat}"
        other = self.agents[1 - self._me]
        mine = np.moveaxis(self.payoffs[self._me], self._me, 0)  # rows: my actions
        columns = [self.name(other, b) for b in range(mine.shape[1])]
        width = max(8, *(len(c) + 1 for c in columns), *(len(self.name(self.seat, a)) + 1 for a in range(len(mine))))
        lines = [f"your payoffs (rows: your moves; columns: {other}'s)", " " * width + "".join(c.rjust(width) for c in columns)]
        lines += [self.name(self.seat, a).ljust(width) + "".join(f"{v:{width}.3g}" for v in row)
                  for a, row in enumerate(mine)]
        return "\n".join(lines)

    def apply(self, actions: Mapping[str, Action]) -> list[str]:
        self._played = {a: int(actions[a]) for a in self.agents}
        return [f"{a} plays {self.name(a, m)}" for a, m in self._played.items() if a != self.seat]

    def returns(self) -> dict[str, float]:
        if self._played is None:
            return dict.fromkeys(self.agents, 0.0)
        index = tuple(self._played[a] for a in self.agents)
        return {a: float(self.payoffs[k][index]) for k, a in enumerate(self.agents)}
