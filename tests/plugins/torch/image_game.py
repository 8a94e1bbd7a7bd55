"""Which quadrant: a one-step game of small image observations whose optimum is known.

Each of two players sees its own image, ``size`` x ``size`` pixels and 3 channels
(height, width, channels; uint8): dim noise everywhere and a bright 3 x 3 square at a
random place inside one of the four quadrants. A player is paid 1 for naming that
quadrant (action 0: top left, 1: top right, 2: bottom left, 3: bottom right) and 0
otherwise, whatever the other does: the optimal return is 1, a uniform guess's 0.25.
Every game ends after one decision, and the next starts with fresh images.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np

from popmarl.api import Box, Discrete, Env, Observations, Step, VectorEnv

OPTIMAL, UNIFORM = 1.0, 0.25


@attrs.frozen(kw_only=True)
class ImageGameConfig:
    """``size``: the image's height and width (even, at least 8)."""

    size: int = attrs.field(default=8, validator=attrs.validators.ge(8))


def images(quadrants: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``[N, size, size, 3]`` uint8 images, each with its square in ``quadrants[i]``."""
    n, half = len(quadrants), size // 2
    out = rng.integers(0, 60, size=(n, size, size, 3), dtype=np.uint8)
    rows = (quadrants // 2) * half + rng.integers(0, half - 2, size=n)
    cols = (quadrants % 2) * half + rng.integers(0, half - 2, size=n)
    for i in range(n):
        out[i, rows[i]:rows[i] + 3, cols[i]:cols[i] + 3] = rng.integers(200, 256, size=(3, 3, 3), dtype=np.uint8)
    return out


class _ImageVector(VectorEnv):
    """``num_envs`` games, every one finished by each step."""

    def __init__(self, env: ImageGame, num_envs: int, seed: int) -> None:
        self.env = env
        self.num_envs = num_envs
        self._ids = np.arange(num_envs)
        self._rng = np.random.default_rng(seed)
        self._answers: dict[str, np.ndarray] = {}

    def _decisions(self) -> dict[str, tuple[np.ndarray, Observations]]:
        decisions = {}
        for agent in self.env.agents:
            self._answers[agent] = self._rng.integers(0, 4, size=self.num_envs)
            obs = images(self._answers[agent], self.env.config.size, self._rng)
            decisions[agent] = (self._ids, Observations(obs=obs, agent=agent))
        return decisions

    def reset(self) -> Step:
        n = len(self.env.agents)
        return Step(decisions=self._decisions(), rewards=np.zeros((self.num_envs, n)), finished=np.zeros(0, int),
                    returns=np.zeros((0, n)), truncated=np.zeros(0, bool))

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        rewards = np.stack([(np.asarray(actions[agent]).reshape(self.num_envs) == self._answers[agent]).astype(float)
                            for agent in self.env.agents], axis=1)
        return Step(decisions=self._decisions(), rewards=rewards, finished=self._ids, returns=rewards,
                    truncated=np.zeros(self.num_envs, bool))


class ImageGame(Env):
    """Two players, one image and one guess each (see the module's docstring)."""

    Config = ImageGameConfig
    config: ImageGameConfig

    @property
    def agents(self) -> tuple[str, ...]:
        return ("player_0", "player_1")

    def observation_space(self, agent: str) -> Box:
        size = self.config.size
        return Box(shape=(size, size, 3), low=0, high=255, dtype="uint8")

    def action_space(self, agent: str) -> Discrete:
        return Discrete(n=4)

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        return _ImageVector(self, num_envs, seed)
