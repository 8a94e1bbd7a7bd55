"""Goofspiel-lite: a small bidding card game, as a PettingZoo Parallel env.

Each player holds the cards 1..N. Each round, a prize card (1..N, in a random order)
is shown, and both players bid one card of their hand at once; the higher bid takes the
prize, and a tie takes nothing. A bid card is spent. After N rounds, the player with
more prize points wins (+1), the other loses (-1); a tie is a draw (0).

A player sees its own hand, the other's hand, the prize now up and the score so far;
``action_mask`` marks the cards still in its hand. ``parallel_env()`` makes the
Parallel env; ``env()`` the same game as an AEC env.
"""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils import parallel_to_aec

AGENTS = ("player_0", "player_1")


class GoofspielLite(ParallelEnv):
    metadata = {"name": "goofspiel_lite_v0", "is_parallelizable": True}

    def __init__(self, cards: int = 4) -> None:
        self.cards = cards
        self.possible_agents = list(AGENTS)
        self.render_mode = None  # nothing to draw
        self.agents: list[str] = []
        self._rng = np.random.default_rng()

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent: str) -> spaces.Dict:
        n = self.cards
        # own hand, the other's hand, the prize up (one-hot), the score difference / total prize
        return spaces.Dict({"observation": spaces.Box(-1.0, 1.0, shape=(3 * n + 1,), dtype=np.float32),
                            "action_mask": spaces.Box(0, 1, shape=(n,), dtype=np.int8)})

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(self.cards)  # action a bids card a + 1

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(AGENTS)
        self.hands = np.ones((2, self.cards), dtype=np.int8)
        self.prizes = self._rng.permutation(self.cards)  # prize card index per round
        self.round = 0
        self.points = np.zeros(2)
        return self._observations(), {a: {} for a in self.agents}

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        n, total = self.cards, self.cards * (self.cards + 1) / 2
        prize = np.zeros(n, dtype=np.float32)
        if self.round < n:
            prize[self.prizes[self.round]] = 1.0
        observations = {}
        for k, agent in enumerate(AGENTS):
            score = np.array([(self.points[k] - self.points[1 - k]) / total], dtype=np.float32)
            obs = np.concatenate([self.hands[k], self.hands[1 - k], prize, score]).astype(np.float32)
            observations[agent] = {"observation": obs, "action_mask": self.hands[k].copy()}
        return observations

    def step(self, actions: dict[str, int]) -> tuple[dict, dict, dict, dict, dict]:
        bids = [int(actions[a]) for a in AGENTS]
        for k, bid in enumerate(bids):
            if not self.hands[k, bid]:
                raise ValueError(f"{AGENTS[k]} bid card {bid + 1}, which it no longer holds")
            self.hands[k, bid] = 0
        if bids[0] != bids[1]:
            self.points[int(bids[1] > bids[0])] += self.prizes[self.round] + 1
        self.round += 1
        over = self.round == self.cards
        rewards = dict.fromkeys(AGENTS, 0.0)
        if over:
            result = float(np.sign(self.points[0] - self.points[1]))
            rewards = {"player_0": result, "player_1": -result}
        observations = self._observations()
        terminations = dict.fromkeys(AGENTS, over)
        truncations = dict.fromkeys(AGENTS, False)
        infos = {a: {} for a in AGENTS}
        if over:
            self.agents = []
        return observations, rewards, terminations, truncations, infos


def parallel_env(**kwargs) -> GoofspielLite:
    """The game as a Parallel env (popmarl's pettingzoo env prefers it)."""
    return GoofspielLite(**kwargs)


def env(**kwargs):
    """The same game as an AEC env."""
    return parallel_to_aec(parallel_env(**kwargs))
