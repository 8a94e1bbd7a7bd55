"""A match: one game of an env, played move by move by a person and actors.

``popmarl play`` needs the game itself, not a vector of games: what the person in one
seat may see of it, the legal moves by number and name, and each seat's native
observation for the actors (:class:`~popmarl.tools.actor.Actor`) in the others. Envs that can
be played so implement :class:`Playable` (the openspiel, pettingzoo and matrix envs do).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from popmarl.errors import UserError
from popmarl.interfaces.env import Env

#: What an actor's ``act`` returns: an action number (discrete actions), or an array
#: clipped to the action space's bounds (Box actions).
Action = int | np.ndarray


class Match(ABC):
    """One game, seen by the person in ``seat`` (the game's own seeded chance)."""

    seat: str

    @abstractmethod
    def to_move(self) -> tuple[str, ...]:
        """The seats whose move the game waits for (several at a simultaneous move);
        none once the game is over."""

    @abstractmethod
    def observation(self, agent: str) -> tuple[Any, np.ndarray | None]:
        """What :meth:`~popmarl.tools.actor.Actor.act` takes for ``agent`` now: its native
        observation, and its action mask where the observation holds none."""

    @abstractmethod
    def legal_moves(self) -> dict[int, str]:
        """The person's legal moves now: action number to name (names are unique); none
        for a seat with Box actions, which ``popmarl play`` reads as numbers in the Box."""

    @abstractmethod
    def view(self) -> str:
        """The game as the person sees it now: nothing only another seat knows."""

    @abstractmethod
    def apply(self, actions: Mapping[str, Action]) -> list[str]:
        """Play one action for each seat of :meth:`to_move` (the person's: a number of
        :meth:`legal_moves`, or an array in its Box; the actors': what they chose); return
        what the person sees of the other seats' moves, one line each (a hidden move is
        said to be hidden)."""

    @abstractmethod
    def returns(self) -> dict[str, float]:
        """Each seat's return so far (the result, once the game is over)."""

    def reveal(self) -> str:
        """The whole game at its end, hidden information included (default: the view)."""
        return self.view()

    def close(self) -> None:
        """Release the game."""


@runtime_checkable
class Playable(Protocol):
    """An env whose games a person can play (``popmarl play``)."""

    def match(self, seat: str, *, seed: int) -> Match:
        """A new game for the person in ``seat``, its chance seeded with ``seed``."""


def new_match(env: Env, seat: str, *, seed: int) -> Match:
    """A game of ``env`` for the person in ``seat``; a UserError for an env that cannot be
    played move by move."""
    if not isinstance(env, Playable):
        raise UserError(f"env {type(env).__name__} cannot be played in the terminal (it makes no Match); "
                        "popmarl play plays the openspiel, pettingzoo and matrix envs")
    return env.match(seat, seed=seed)
