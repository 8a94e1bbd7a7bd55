"""Algorithm ``exact_br``: exact best responses (sequence form, or OpenSpiel's responders;
see :class:`ExactBRConfig`), as a tabular policy.

The answer for a population is a deterministic best response, per seat it plays, to the
other seats' meta-strategy mixtures collapsed as OpenSpiel's ``PolicyAggregator`` does;
seats' information states are disjoint, so a population playing several seats gets one
table with every seat's rows. The initial policy is uniform random over the legal
actions, as in OpenSpiel's PSRO. With this oracle, ``psro`` is exact-oracle PSRO
(double oracle with ``nash``).
"""

from __future__ import annotations

import attrs

from popmarl.api import Algorithm, BestResponseProblem, Box, ConfigError, Discrete, Env, PolicySpace
from popmarl_openspiel.env import OpenSpielEnv
from popmarl_openspiel.exploitability import Implementation
from popmarl_openspiel.tabular import TabularPolicy, player_of


@attrs.frozen(kw_only=True)
class ExactBRConfig:
    """``implementation``: ``auto`` or ``sequence``, a bottom-up pass over the game's
    sequence form (the same values as OpenSpiel's responders, much faster: on 3-player
    Leduc, milliseconds against seconds per best response); or OpenSpiel's C++
    ``TabularBestResponse`` (``cpp``, turn-based games) or Python ``BestResponsePolicy``
    (``python``)."""

    implementation: Implementation = "auto"


class ExactBestResponse(Algorithm):
    """Exact best responses in OpenSpiel games (see the module docstring)."""

    Config = ExactBRConfig
    answers = True
    answers_correlated = True

    def check(self, *, env: Env, space: PolicySpace) -> None:
        """Refuse, before anything is written, what :meth:`best_response` would fail on at
        iteration 1: Box actions, another env, or a game it cannot enumerate (builds the
        tree, kept)."""
        if isinstance(space.action_space, Box):
            raise ConfigError(f"algorithm exact_br: population {space.population} acts in {space.action_space}; "
                              "exact best responses need Discrete actions (env openspiel); for Box actions use a "
                              "learning algorithm that takes them (e.g. sac, ppo)")
        if not isinstance(env, OpenSpielEnv):
            raise ConfigError("algorithm exact_br: works only with env 'openspiel'")
        problem = env.exact_problem
        if problem is not None:
            raise ConfigError(f"env.params.game: {env.spiel.name} cannot be evaluated exactly, which algorithm "
                              f"exact_br needs: {problem}")

    def make_policy(self, *, space: PolicySpace, seed: int) -> TabularPolicy:
        if not isinstance(space.action_space, Discrete):
            raise ConfigError(f"algorithm exact_br: population {space.population} needs discrete actions")
        return TabularPolicy(space.action_space.n)

    def best_response(self, problem: BestResponseProblem) -> TabularPolicy:
        env = problem.env
        if not isinstance(env, OpenSpielEnv):
            raise ConfigError("algorithm exact_br: works only with env 'openspiel'")
        exact = env.exact  # a ConfigError saying why, for games too large to enumerate
        tables = {}
        for agent in problem.space.agents:
            player = player_of(agent)
            if problem.correlated is not None:
                table, _ = exact.correlated_best_response(player, problem.correlated)
            else:
                table, _ = exact.best_response(player, problem.opponents, implementation=self.config.implementation)
            tables[player] = (exact.tree.players[player].keys, table)
        return TabularPolicy.from_tables(exact.tree.num_actions, tables)
