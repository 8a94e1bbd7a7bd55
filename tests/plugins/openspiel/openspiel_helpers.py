"""Helpers of the openspiel plugin tests: random tabular policies, and an adapter that
lets OpenSpiel's own algorithms (the references) read popmarl policies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from open_spiel.python import policy as spiel_policy

import popmarl
from popmarl.interfaces.policy import ExplicitPolicy, Policy
from popmarl.data.episodes import Observations
from popmarl_openspiel.env import OpenSpielEnv
from popmarl_openspiel.tabular import TabularPolicy

requires_nash = pytest.mark.skipif("nash" not in popmarl.solvers.names(),
                                   reason="solver 'nash' (plugin popmarl-solvers) is not installed")


class SpielView(spiel_policy.Policy):  # type: ignore[misc]
    """OpenSpiel policy reading one popmarl policy per player, state by state (the
    reference path: no tree arrays, no sequence form)."""

    def __init__(self, env: OpenSpielEnv, policies: Mapping[int, ExplicitPolicy]) -> None:
        super().__init__(env.spiel.game, list(policies))
        self.env = env
        self.policies = policies
        self._seen: dict[tuple[int, str], dict[int, float]] = {}  # policies are fixed: ask once per state

    def action_probabilities(self, state: object, player_id: int | None = None) -> dict[int, float]:
        player = state.current_player() if player_id is None else player_id  # type: ignore[attr-defined]
        spiel = self.env.spiel
        key = spiel.tabular_key(state, player)
        if (player, key) not in self._seen:
            batch = Observations(obs=np.asarray([spiel.tensor(state, player)], np.float32),
                                 mask=np.asarray([state.legal_actions_mask(player)], bool),  # type: ignore[attr-defined]
                                 keys=(key,), agent=spiel.agent(player))
            probs = self.policies[player].probabilities(batch)[0]
            self._seen[player, key] = {a: float(probs[a]) for a in state.legal_actions(player)}  # type: ignore[attr-defined]
        return self._seen[player, key]


def random_tabular(env: OpenSpielEnv, rng: np.random.Generator, players: Sequence[int] | None = None,
                   *, sparsity: float = 0.3) -> TabularPolicy:
    """A random behavioural policy at every information state of ``players`` (some
    actions zeroed, so reach probabilities vary a lot)."""
    tree = env.exact.tree
    tables = {}
    for player in range(len(env.agents)) if players is None else players:
        info = tree.players[player]
        probs = rng.random((len(info), tree.num_actions)) * info.mask
        probs[rng.random(probs.shape) < sparsity] = 0.0
        dead = probs.sum(axis=1) == 0
        probs[dead] = info.mask[dead]
        tables[player] = (info.keys, probs / probs.sum(axis=1, keepdims=True))
    return TabularPolicy.from_tables(tree.num_actions, tables)


def uniform_profile(env: OpenSpielEnv) -> dict[str, list[tuple[Policy, float]]]:
    return {agent: [(TabularPolicy(env.spiel.num_actions), 1.0)] for agent in env.agents}
