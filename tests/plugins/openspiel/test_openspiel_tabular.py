"""The tabular policy: lookups by (player, information state), weights as plain arrays."""

from __future__ import annotations

import io

import numpy as np
import pytest
from openspiel_helpers import random_tabular

from popmarl.data.episodes import Observations
from popmarl_openspiel.tabular import TabularPolicy


def _batch(keys, mask, agent="player_0"):
    mask = np.asarray(mask, bool)
    return Observations(obs=np.zeros((len(keys), 1), np.float32), mask=mask, keys=tuple(keys), agent=agent)


def test_empty_table_is_uniform_over_legal_actions():
    policy = TabularPolicy(3)
    probs = policy.probabilities(_batch(["a", "b"], [[1, 1, 0], [0, 0, 1]]))
    np.testing.assert_allclose(probs, [[0.5, 0.5, 0], [0, 0, 1]])


def test_rows_are_per_player_and_masked():
    policy = TabularPolicy.from_tables(3, {0: (["s"], np.array([[0.2, 0.8, 0.0]])),
                                           1: (["s"], np.array([[0.0, 0.0, 1.0]]))})
    np.testing.assert_allclose(policy.probabilities(_batch(["s", "t"], [[1, 1, 1], [1, 0, 1]])),
                               [[0.2, 0.8, 0.0], [0.5, 0.0, 0.5]])
    np.testing.assert_allclose(policy.probabilities(_batch(["s"], [[1, 1, 1]], agent="player_1")), [[0, 0, 1]])
    # A row with no mass on the legal actions falls back to uniform over them.
    np.testing.assert_allclose(policy.probabilities(_batch(["s"], [[0, 0, 1]])), [[0, 0, 1]])
    np.testing.assert_allclose(policy.probabilities(_batch(["s"], [[1, 1, 0]], agent="player_1")), [[0.5, 0.5, 0]])


def test_sampling_follows_the_table_in_evaluation_too():
    policy = TabularPolicy.from_tables(2, {0: (["s"], np.array([[0.25, 0.75]]))})
    actions = policy.act(_batch(["s"] * 4000, np.ones((4000, 2))), explore=False, rng=np.random.default_rng(0))
    assert abs(actions.mean() - 0.75) < 0.03


def test_weights_survive_npz_without_pickle(make_env):
    env = make_env("leduc_poker")
    policy = random_tabular(env, np.random.default_rng(0))
    buffer = io.BytesIO()
    np.savez(buffer, **policy.get_weights())
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as data:
        weights = {k: data[k] for k in data.files}
    restored = TabularPolicy(env.spiel.num_actions)
    restored.set_weights(weights)
    assert restored.version == 1
    info = env.exact.tree.players[1]
    batch = Observations(obs=info.obs, mask=info.mask, keys=info.keys, agent="player_1")
    np.testing.assert_array_equal(restored.probabilities(batch), policy.probabilities(batch))


def test_reloading_weights_invalidates_cached_plans(make_env):
    env = make_env("kuhn_poker")
    rng = np.random.default_rng(3)
    a, b = random_tabular(env, rng), random_tabular(env, rng)
    policy = TabularPolicy(env.spiel.num_actions)
    policy.set_weights(a.get_weights())
    first = env.exact_returns([{"player_0": policy, "player_1": policy}])
    policy.set_weights(b.get_weights())
    second = env.exact_returns([{"player_0": policy, "player_1": policy}])
    np.testing.assert_allclose(second, env.exact_returns([{"player_0": b, "player_1": b}]))
    assert not np.allclose(first, second)


def test_bad_weights_are_refused():
    with pytest.raises(ValueError, match="3 actions"):
        TabularPolicy(3).set_weights({"players": np.zeros(1, int), "keys": np.array(["s"]),
                                      "probs": np.ones((1, 2))})
    with pytest.raises(ValueError, match="disagree"):
        TabularPolicy(2, players=np.zeros(2, int), keys=["s"], probs=np.ones((1, 2)))
    with pytest.raises(ValueError, match="needs information-state keys"):
        TabularPolicy(2).probabilities(Observations(obs=np.zeros((1, 1))))
