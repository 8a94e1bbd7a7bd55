"""Algorithm ``softmax_br``: a smoothed (logit) best response in a normal-form game.

Against the opponents' meta-strategy, each action's expected payoff ``v`` is turned into
the mixed strategy ``softmax(v / temperature)``: as ``temperature`` goes to 0 it becomes
the exact best response; larger temperatures hedge between near-best actions (a
quantal-response oracle, as in smoothed fictitious play).
"""

from __future__ import annotations

import attrs
import numpy as np

from popmarl.api import (Algorithm, BestResponseProblem, ConfigError, Discrete, MixedStrategyPolicy, PolicySpace,
                         deviation_payoffs)


@attrs.frozen(kw_only=True)
class SoftmaxBRConfig:
    """``temperature``: how much the response is smoothed (> 0; small is sharp)."""

    temperature: float = attrs.field(default=0.05, validator=attrs.validators.gt(0))


# The API's mixed-strategy policy plays a fixed mixture of its actions (the matrix env
# reads its probabilities for exact evaluation).
SoftmaxPolicy = MixedStrategyPolicy


def softmax(values: np.ndarray, temperature: float) -> np.ndarray:
    z = (values - values.max()) / temperature
    weights = np.exp(z)
    return weights / weights.sum()


class SoftmaxBR(Algorithm):
    """The logit response to the meta-strategy, for env ``matrix`` (any number of players)."""

    answers = True
    Config = SoftmaxBRConfig

    def make_policy(self, *, space: PolicySpace, seed: int) -> SoftmaxPolicy:
        if not isinstance(space.action_space, Discrete):
            raise ConfigError(f"algorithm softmax_br: population {space.population} needs discrete actions")
        n = space.action_space.n
        return SoftmaxPolicy(np.full(n, 1.0 / n))

    def best_response(self, problem: BestResponseProblem) -> SoftmaxPolicy:
        env = problem.env
        if not hasattr(env, "payoffs") or not hasattr(env, "mixed_strategies"):
            raise ConfigError("algorithm softmax_br: works only with env 'matrix' (a payoff tensor)")
        deviations = deviation_payoffs(env.payoffs, env.mixed_strategies(problem.opponents))
        # A policy playing several seats (agents.mapping: shared) responds to their sum.
        values = sum(deviations[env.agents.index(agent)] for agent in problem.space.agents)
        return SoftmaxPolicy(softmax(np.asarray(values, dtype=float), self.config.temperature))
