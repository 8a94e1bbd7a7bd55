"""Algorithm ``exact_matrix_br``: the exact best response in a normal-form game.

A pure strategy maximising the expected payoff against the other agents' meta-strategy
mixtures. With it, PSRO is the double-oracle algorithm (McMahan et al. 2003).
"""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np

from popmarl.api import (Algorithm, BestResponseProblem, Box, ConfigError, Discrete, Env, MixedStrategyPolicy,
                         PolicySpace, deviation_payoffs)
from popmarl.builtin.matrix_env import MatrixEnv


@attrs.frozen(kw_only=True)
class ExactMatrixBRConfig:
    """``initial``: the population's first policy, the first pure strategy or uniform."""

    initial: Literal["first", "uniform"] = "first"


def _n_actions(space: PolicySpace) -> int:
    if not isinstance(space.action_space, Discrete):
        raise ConfigError(f"algorithm exact_matrix_br: population {space.population} needs discrete actions")
    return space.action_space.n


class ExactMatrixBR(Algorithm):
    """Exact best responses of pure strategies (ties go to the lowest action)."""

    Config = ExactMatrixBRConfig
    answers = True
    answers_correlated = True

    def check(self, *, env: Env, space: PolicySpace) -> None:
        """Refuse Box actions before anything is written: an exact best response picks one
        of finitely many actions."""
        if isinstance(space.action_space, Box):
            raise ConfigError(f"algorithm exact_matrix_br: population {space.population} acts in {space.action_space}; "
                              "exact best responses need Discrete actions (env matrix); for Box actions use a "
                              "learning algorithm that takes them (e.g. sac, ppo)")

    def make_policy(self, *, space: PolicySpace, seed: int) -> MixedStrategyPolicy:
        return MixedStrategyPolicy(np.eye(_n_actions(space))[0])

    def initial_policy(self, *, space: PolicySpace, seed: int) -> MixedStrategyPolicy:
        if self.config.initial == "uniform":
            n = _n_actions(space)
            return MixedStrategyPolicy(np.full(n, 1.0 / n))
        return self.make_policy(space=space, seed=seed)

    def best_response(self, problem: BestResponseProblem) -> MixedStrategyPolicy:
        env = problem.env
        if not isinstance(env, MatrixEnv):
            raise ConfigError("algorithm exact_matrix_br: works only with env 'matrix'")
        if problem.correlated is not None:
            deviations = env.correlated_deviation_payoffs(problem.correlated)
        else:
            deviations = deviation_payoffs(env.payoffs, env.mixed_strategies(problem.opponents))
        # A policy that plays several seats (shared mapping) maximises their sum.
        total = np.sum([deviations[env.agents.index(agent)] for agent in problem.space.agents], axis=0)
        return MixedStrategyPolicy(np.eye(len(total))[int(np.argmax(total))])
