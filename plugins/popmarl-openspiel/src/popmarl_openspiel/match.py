"""One pyspiel game played move by move by a person and actors (``popmarl play``).

Chance is sampled from the game's own outcome distributions with a seeded generator.
The person sees ``str(state)`` in a perfect-information game; otherwise only its own
information-state string (else observation string) and the moves so far that it could
tell apart: a move is shown by name when the person's information state after it
differs from its state after every other legal move of that player, else it is said to
be hidden. At the end the whole state (every hand) is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyspiel

from popmarl.api import Action, Match
from popmarl_openspiel.game import SpielGame
from popmarl_openspiel.tabular import player_of


class OpenSpielMatch(Match):
    """A game of ``spiel`` for the person in ``seat``, chance seeded with ``seed``."""

    def __init__(self, spiel: SpielGame, seat: str, *, seed: int) -> None:
        self.spiel, self.seat, self.player = spiel, seat, player_of(seat)
        self._agents = tuple(spiel.agent(p) for p in range(spiel.num_players))
        self._perfect = spiel.type.information == pyspiel.GameType.Information.PERFECT_INFORMATION
        self._rng = np.random.default_rng(seed)
        self._log: list[str] = []
        self.state = spiel.game.new_initial_state()
        self._settle()

    # -- the Match protocol -------------------------------------------------------------
    def to_move(self) -> tuple[str, ...]:
        if self.state.is_terminal():
            return ()
        if self.state.is_simultaneous_node():
            return self._agents
        return (self._agents[self.state.current_player()],)

    def observation(self, agent: str) -> tuple[Any, np.ndarray | None]:
        return self.state, None

    def legal_moves(self) -> dict[int, str]:
        return {a: self.state.action_to_string(self.player, a) for a in self.state.legal_actions(self.player)}

    def view(self) -> str:
        if self._perfect:
            return str(self.state)
        key = "information state" if self.spiel.type.provides_information_state_string else "observation"
        lines = [f"your {key}: {self.spiel.tabular_key(self.state, self.player)}"]
        if self._log:
            lines.append("moves so far: " + ", ".join(self._log))
        return "\n".join(lines)

    def apply(self, actions: Mapping[str, Action]) -> list[str]:
        state = self.state
        movers = [player_of(agent) for agent in self.to_move()]
        joint = [int(actions[self._agents[p]]) for p in movers]
        for p, action in zip(movers, joint):
            if action not in state.legal_actions(p):
                raise ValueError(f"{self._agents[p]}: action {action} is not legal here")
        seen = [self._seen(p, joint, k) for k, p in enumerate(movers)]
        names = [state.action_to_string(p, a) for p, a in zip(movers, joint)]
        if state.is_simultaneous_node():
            state.apply_actions(joint)
        else:
            state.apply_action(joint[0])
        lines = []
        for p, name, visible in zip(movers, names, seen):
            who = "you" if p == self.player else self._agents[p]
            self._log.append(f"{who} {name if visible else '?'}")
            if p != self.player:
                lines.append(f"{who} plays {name}" if visible else f"{who} moves (hidden from you)")
        self._settle()
        return lines

    def returns(self) -> dict[str, float]:
        return dict(zip(self._agents, map(float, self.state.returns())))

    def reveal(self) -> str:
        return str(self.state)

    # -- internals ----------------------------------------------------------------------
    def _settle(self) -> None:
        """Sample chance until a player must move or the game ends."""
        state = self.state
        while state.is_chance_node():
            actions, probs = zip(*state.chance_outcomes())
            state.apply_action(int(self._rng.choice(actions, p=np.asarray(probs) / sum(probs))))

    def _seen(self, player: int, joint: list[int], k: int) -> bool:
        """Whether the person can tell ``player``'s move (entry ``k`` of ``joint``) from
        each of its other legal moves: its own moves and every move of a
        perfect-information game are seen."""
        if self._perfect or player == self.player:
            return True
        try:
            after = self._view_after(joint)
            for other in self.state.legal_actions(player):
                if other != joint[k] and self._view_after([*joint[:k], other, *joint[k + 1:]]) == after:
                    return False
        except pyspiel.SpielError:
            return False
        return True

    def _view_after(self, joint: list[int]) -> str:
        state = self.state.clone()
        if state.is_simultaneous_node():
            state.apply_actions(joint)
        else:
            state.apply_action(joint[0])
        return str(self.spiel.tabular_key(state, self.player))
