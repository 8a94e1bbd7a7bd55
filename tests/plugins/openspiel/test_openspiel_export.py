"""``final_policy.json`` and :func:`popmarl_openspiel.load_policy`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from open_spiel.python import policy as spiel_policy
from open_spiel.python.algorithms import exploitability
from openspiel_helpers import random_tabular

import popmarl
import popmarl_openspiel
from popmarl.errors import CheckpointError
from popmarl_openspiel.export import PerPlayerTabularPolicy

#: A small oshi_zumo: simultaneous moves, both players' information-state strings equal
#: (the root's is '' for both), so one string-keyed TabularPolicy cannot hold a profile.
OSHI_ZUMO = {"game": "oshi_zumo", "game_params": {"coins": 4, "size": 1, "horizon": 3}, "observation": "observation"}


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker", "kuhn_poker(players=3)"])
def test_exported_policy_covers_every_information_state_and_round_trips(make_env, tmp_path, game):
    env = make_env(game)
    rng = np.random.default_rng(0)
    profile = {a: [(random_tabular(env, rng, [p]), 0.6), (random_tabular(env, rng, [p]), 0.4)]
               for p, a in enumerate(env.agents)}
    assert env.export_policy(profile, tmp_path) == ["final_policy.json"]
    document = json.loads((tmp_path / "final_policy.json").read_text())
    assert document["game"] == game and document["game_params"] == {}
    reference = spiel_policy.TabularPolicy(env.spiel.game)
    for p in range(len(env.agents)):
        assert set(document["policy"][str(p)]) == set(reference.states_per_player[p])
        for probs in document["policy"][str(p)].values():
            assert sum(probs.values()) == pytest.approx(1.0)
    loaded = popmarl_openspiel.load_policy(str(tmp_path / "final_policy.json"))
    assert type(loaded) is spiel_policy.TabularPolicy  # players' strings are distinct: one plain table
    tables = env.exact.aggregate_profile(profile)
    for p, info in enumerate(env.exact.tree.players):
        for key, row in zip(info.keys, tables[p]):
            np.testing.assert_allclose(loaded.policy_for_key(key), row, atol=1e-12)
    assert exploitability.nash_conv(loaded.game, loaded) == pytest.approx(env.nash_conv(profile), abs=1e-9)


@pytest.mark.parametrize("game, params", [("oshi_zumo", OSHI_ZUMO), ("goofspiel(num_cards=3)", {})])
def test_shared_information_state_strings_load_per_player(make_env, tmp_path, game, params):
    env = make_env(**{"game": game, **params})
    shared = set(env.exact.tree.players[0].keys) & set(env.exact.tree.players[1].keys)
    assert shared and ("" in shared) == (game == "oshi_zumo")
    rng = np.random.default_rng(2)
    profile = {a: [(random_tabular(env, rng, [p]), 1.0)] for p, a in enumerate(env.agents)}
    env.export_policy(profile, tmp_path)
    document = json.loads((tmp_path / "final_policy.json").read_text())
    for p, info in enumerate(env.exact.tree.players):  # the file keeps both players' rows
        assert set(document["policy"][str(p)]) == set(info.keys)
    loaded = popmarl_openspiel.load_policy(str(tmp_path / "final_policy.json"))
    assert isinstance(loaded, PerPlayerTabularPolicy)
    tables = env.exact.aggregate_profile(profile)
    for p, info in enumerate(env.exact.tree.players):
        for key, row in zip(info.keys, tables[p]):
            np.testing.assert_allclose(loaded.policy_for_key(key, p), row, atol=1e-12)
    assert exploitability.nash_conv(loaded.game, loaded) == pytest.approx(env.nash_conv(profile), abs=1e-9)
    with pytest.raises(ValueError, match="share information-state strings"):
        loaded.to_tabular()
    with pytest.raises(ValueError, match="pass player_id"):
        loaded.action_probabilities(loaded.game.new_initial_state())


def test_psro_run_on_oshi_zumo_loads_with_the_runs_nash_conv(write_config, tmp_path):
    config = popmarl.load_config(str(write_config(
        "oshi_zumo.yaml", env={"name": "openspiel", "params": OSHI_ZUMO}, algorithm={"name": "exact_br"},
        solver={"name": "uniform"}, stopping={"max_iterations": 3})))
    summary = popmarl.run(config, out=str(tmp_path / "run"))
    assert summary["status"] == "completed"
    policy = popmarl_openspiel.load_policy(str(tmp_path / "run" / "final_policy.json"))
    assert isinstance(policy, PerPlayerTabularPolicy)
    # One string-keyed table (player 1's rows over player 0's) gave 1.555042 for the run's 1.210083.
    assert exploitability.nash_conv(policy.game, policy) == pytest.approx(summary["nash_conv"], abs=1e-6)


def test_game_params_are_kept_for_loading(make_env, tmp_path):
    env = make_env("kuhn_poker", game_params={"players": 3})
    env.export_policy({a: [(random_tabular(env, np.random.default_rng(1), [p]), 1.0)]
                       for p, a in enumerate(env.agents)}, tmp_path)
    document = json.loads((tmp_path / "final_policy.json").read_text())
    assert document["game"] == "kuhn_poker" and document["game_params"] == {"players": 3}
    assert popmarl_openspiel.load_policy(str(tmp_path / "final_policy.json")).game.num_players() == 3


@pytest.mark.parametrize("content", ["{not json", '{"game": "no_such_game", "policy": {}}', '{"policy": {}}',
                                     '{"game": "kuhn_poker", "policy": {"0": {"bogus": {"0": 1.0}}}}',
                                     '{"game": "kuhn_poker", "policy": {"0": {"0p": {"0": 1.0}}}}',  # player 1's
                                     '{"game": "kuhn_poker", "policy": {"2": {}}}',
                                     '{"game": "kuhn_poker", "policy": {"0": {"0": {"x": 1.0}}}}'])
def test_load_policy_rejects_bad_files(tmp_path, content):
    path = tmp_path / "final_policy.json"
    path.write_text(content)
    with pytest.raises(CheckpointError, match="final_policy.json"):
        popmarl_openspiel.load_policy(str(path))
