"""A game as a user would write it against PettingZoo's AEC API: Nim with one heap.

``tokens`` lie on the table; in turn, each player takes 1, 2 or 3 of them (no more than
are left: the ``action_mask``); whoever takes the last token wins (+1, the other -1).
Perfect play leaves the opponent a multiple of 4. Registered in a run config as
``module: user_nim:Nim``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

MAX_TAKE = 3


class Nim(AECEnv):
    metadata = {"name": "nim_v0", "is_parallelizable": False, "render_modes": []}

    def __init__(self, tokens: int = 11) -> None:
        super().__init__()
        self.tokens = tokens
        self.possible_agents = ["first", "second"]
        self.observation_spaces = {a: spaces.Dict({
            "observation": spaces.Box(0.0, 1.0, shape=(tokens + 1,), dtype=np.float32),
            "action_mask": spaces.Box(0, 1, shape=(MAX_TAKE,), dtype=np.int8)}) for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(MAX_TAKE) for a in self.possible_agents}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        board = np.zeros(self.tokens + 1, np.float32)
        board[self.left] = 1.0
        mask = (np.arange(1, MAX_TAKE + 1) <= self.left).astype(np.int8)
        return {"observation": board, "action_mask": mask}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.left = self.tokens
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = self.agents[0]

    def step(self, action: int) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self.left -= int(action) + 1
        other = self.agents[1 - self.agents.index(agent)]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        if self.left <= 0:
            self.rewards[agent], self.rewards[other] = 1.0, -1.0
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = other
        self._accumulate_rewards()


def win_rate_against_random(tokens: int, seat: int) -> float:
    """The win probability of perfect play in ``seat`` (0: moves first) against a
    uniformly random legal opponent, by dynamic programming over (tokens left, mover)."""
    best: dict[tuple[int, bool], float] = {}
    for left in range(1, tokens + 1):
        takes = range(1, min(MAX_TAKE, left) + 1)
        # ours: we move; theirs: the random player moves. Taking the last token wins.
        best[(left, True)] = max(1.0 if t == left else best[(left - t, False)] for t in takes)
        best[(left, False)] = float(np.mean([0.0 if t == left else best[(left - t, True)] for t in takes]))
    return best[(tokens, seat == 0)]
