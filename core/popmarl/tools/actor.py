"""An actor: one seat of a loaded run, playing the game's own observations.

Outside popmarl's vectors of games a program (or ``popmarl play``) holds the game
itself: a PettingZoo env, a pyspiel state. An :class:`Actor` plays a seat's
meta-strategy there as training and evaluation do: it draws its policy from the seat's
mixture once per game (when made, and again at :meth:`Actor.reset`), and the env
(:meth:`popmarl.interfaces.env.Env.observe`) turns each native observation into the batch that
policy reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from popmarl.interfaces.env import Env
from popmarl.interfaces.match import Action
from popmarl.interfaces.policy import Policy
from popmarl.interfaces.spaces import Box
from popmarl.tools.pools import Pool


class Actor:
    """Plays ``seat`` from ``pool`` (its policies and the seat's meta-strategy) in ``env``;
    ``rng`` draws the policies and samples their actions. A joint meta-strategy's seats
    are drawn each from its marginal here (``popmarl eval`` draws them together)."""

    def __init__(self, *, env: Env, seat: str, pool: Pool, rng: np.random.Generator) -> None:
        self.env, self.seat, self.pool, self.rng = env, seat, pool, rng
        self._space = env.action_space(seat)
        self.policy_id = ""
        self.reset()

    @property
    def policy(self) -> Policy:
        """The policy playing this game."""
        return self._policy

    def reset(self) -> None:
        """A new game: draw the policy that plays it from the seat's meta-strategy."""
        self.policy_id = self.pool.draw_id(self.rng)
        self._policy = self.pool.live[self.policy_id]

    def act(self, observation: Any, action_mask: ArrayLike | None = None) -> Action:
        """The action for the env's native ``observation`` of this seat (a PettingZoo
        observation, a pyspiel state), never one ``action_mask`` (where the observation
        holds none) or the observation's own mask forbids."""
        mask = None if action_mask is None else np.asarray(action_mask, dtype=bool)
        batch = self.env.observe(self.seat, observation, mask)
        action = self._policy.act(batch, explore=False, rng=self.rng)[0]
        if isinstance(self._space, Box):
            return np.asarray(self._space.clip(np.asarray(action)[None]))[0]
        return int(action)
