"""Env ``nim``: a pile of stones; in turn, each player takes one to ``take`` stones; who
takes the last one wins (+1) and the other loses (-1).

A player sees the pile as a one-hot vector; its legal actions (take 1, 2, ...) are
masked to what is left. The env steps ``num_envs`` games at once, each restarted as
soon as it ends.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np

from popmarl.api import Box, Discrete, Env, Observations, Step, VectorEnv, at_least_one

AGENTS = ("player_0", "player_1")


@attrs.frozen(kw_only=True)
class NimConfig:
    """``stones``: the pile at the start; ``take``: the most stones one move takes."""

    stones: int = attrs.field(default=7, validator=at_least_one)
    take: int = attrs.field(default=3, validator=at_least_one)


class NimVector(VectorEnv):
    """``num_envs`` games of nim; player_0 moves first in each."""

    def __init__(self, config: NimConfig, num_envs: int) -> None:
        self.config, self.num_envs = config, num_envs
        self.pile = np.full(num_envs, config.stones)
        self.mover = np.zeros(num_envs, dtype=int)  # whose turn: an index into AGENTS
        self.asked: dict[str, np.ndarray] = {}  # the games each agent was asked to move in

    def _step(self, rewards: np.ndarray, finished: np.ndarray) -> Step:
        """The decisions now due, with what happened since the last call."""
        decisions = {}
        for k, agent in enumerate(AGENTS):
            ids = np.flatnonzero(self.mover == k)
            if ids.size:
                decisions[agent] = (ids, self._observe(ids, agent))
        self.asked = {agent: ids for agent, (ids, _) in decisions.items()}
        return Step(decisions=decisions, rewards=rewards, finished=finished, returns=rewards[finished],
                    truncated=np.zeros(finished.size, dtype=bool))

    def _observe(self, ids: np.ndarray, agent: str) -> Observations:
        obs = np.eye(self.config.stones + 1, dtype=np.float32)[self.pile[ids]]
        legal = np.arange(1, self.config.take + 1)[None, :] <= self.pile[ids, None]
        return Observations(obs=obs, mask=legal, agent=agent)

    def reset(self) -> Step:
        self.pile[:] = self.config.stones
        self.mover[:] = 0
        return self._step(np.zeros((self.num_envs, 2)), np.zeros(0, dtype=int))

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        for agent, ids in self.asked.items():
            taken = np.clip(np.asarray(actions[agent], dtype=int) + 1, 1, self.pile[ids])
            self.pile[ids] -= taken
        finished = np.flatnonzero(self.pile == 0)
        rewards = np.zeros((self.num_envs, 2))
        winner = self.mover[finished]  # who took the last stone
        rewards[finished, winner] = 1.0
        rewards[finished, 1 - winner] = -1.0
        self.mover ^= 1
        self.pile[finished] = self.config.stones  # finished games start again at once
        self.mover[finished] = 0
        return self._step(rewards, finished)


class Nim(Env):
    """Two-player nim: a zero-sum turn game without chance."""

    Config = NimConfig
    config: NimConfig
    zero_sum = True

    @property
    def agents(self) -> tuple[str, ...]:
        return AGENTS

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(self.config.stones + 1,), low=0.0, high=1.0)

    def action_space(self, agent: str) -> Discrete:
        return Discrete(n=self.config.take)  # action a takes a + 1 stones

    def vector(self, *, num_envs: int, seed: int) -> NimVector:
        return NimVector(self.config, num_envs)  # nim has no chance: the seed is not used
