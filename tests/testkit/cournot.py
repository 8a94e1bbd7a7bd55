"""A Cournot duopoly: a one-step continuous game whose Nash equilibrium is known.

Two firms choose quantities ``q_i`` in the Box ``[0, q_max]`` at once; the price is
``P = a - b (q_1 + q_2)`` and firm ``i`` earns ``q_i (P - c)``. Firm ``i``'s best
response to ``q_j`` is ``(a - c - b q_j) / (2 b)``, and the unique Nash equilibrium is
``q* = (a - c) / (3 b)`` for both (3 with the defaults). Profit is linear in the rival's
quantity, so the best response to a mixture of rivals is the best response to its mean
quantity: a meta-strategy's mean quantity is what to compare with ``q*``.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np

from popmarl.api import Box, Env, Observations, Step, VectorEnv


@attrs.frozen(kw_only=True)
class CournotConfig:
    """Demand intercept ``a``, slope ``b``, unit cost ``c``, the largest quantity ``q_max``
    (the default, ``(a - c) / b``, is where the price falls to the cost)."""

    a: float = 10.0
    b: float = 1.0
    c: float = 1.0
    q_max: float = 9.0

    @property
    def equilibrium(self) -> float:
        return (self.a - self.c) / (3 * self.b)


class _CournotVector(VectorEnv):
    """``num_envs`` duopolies, every one finished by each step (one decision per firm)."""

    def __init__(self, env: Cournot, num_envs: int) -> None:
        self.env = env
        self.num_envs = num_envs
        self._ids = np.arange(num_envs)
        self._obs = np.ones((num_envs, 1), np.float32)
        self._decisions = {agent: (self._ids, Observations(obs=self._obs, agent=agent)) for agent in env.agents}

    def reset(self) -> Step:
        n = len(self.env.agents)
        return Step(decisions=self._decisions, rewards=np.zeros((self.num_envs, n)), finished=np.zeros(0, int),
                    returns=np.zeros((0, n)), truncated=np.zeros(0, bool))

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        c = self.env.config
        q = np.stack([np.asarray(actions[agent], np.float64).reshape(self.num_envs) for agent in self.env.agents],
                     axis=1)
        price = c.a - c.b * q.sum(axis=1, keepdims=True)
        profits = q * (price - c.c)
        return Step(decisions=self._decisions, rewards=profits, finished=self._ids, returns=profits,
                    truncated=np.zeros(self.num_envs, bool))


class Cournot(Env):
    """Two firms, one simultaneous quantity each (see the module's docstring)."""

    Config = CournotConfig
    config: CournotConfig

    @property
    def agents(self) -> tuple[str, ...]:
        return ("firm_0", "firm_1")

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(1,), low=1.0, high=1.0)

    def action_space(self, agent: str) -> Box:
        return Box(shape=(1,), low=0.0, high=self.config.q_max)

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        return _CournotVector(self, num_envs)


def best_response(config: CournotConfig, rival: float) -> float:
    """Firm ``i``'s profit-maximising quantity against a rival's (mean) quantity, in the Box."""
    return float(np.clip((config.a - config.c - config.b * rival) / (2 * config.b), 0.0, config.q_max))
