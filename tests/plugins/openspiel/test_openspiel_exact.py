"""Exact evaluation, aggregation, best responses and NashConv against OpenSpiel's own
reference implementations (walked state by state through an adapter)."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest
from open_spiel.python.algorithms import best_response as spiel_best_response
from open_spiel.python.algorithms import expected_game_score, exploitability, policy_aggregator
from openspiel_helpers import SpielView, random_tabular, uniform_profile

import popmarl
from popmarl.builtin.random_policy import UniformRandomPolicy
from popmarl.errors import ConfigError
from popmarl_openspiel.best_response import ExactBestResponse
from popmarl_openspiel.exploitability import SpielOracle
from popmarl_openspiel.sequence_form import fold_groups
from popmarl_openspiel.tabular import TabularPolicy

GAMES = ["kuhn_poker", "leduc_poker", "kuhn_poker(players=3)", "goofspiel(num_cards=3)", "matrix_rps"]


@pytest.mark.parametrize(("game", "expected"), [("kuhn_poker", 0.916667), ("leduc_poker", 4.747222)])
def test_uniform_nash_conv_matches_published_values(make_env, game, expected):
    env = make_env(game)
    assert env.nash_conv(uniform_profile(env)) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("game", GAMES)
def test_exact_returns_equal_openspiel_policy_value(make_env, game):
    env = make_env(game)
    rng = np.random.default_rng(1)
    pools = [[random_tabular(env, rng, [p]) for _ in range(3)] for p in range(len(env.agents))]
    profiles = [{a: pools[p][(b + p) % 3] for p, a in enumerate(env.agents)} for b in range(4)]
    exact = env.exact_returns(profiles)
    root = env.spiel.game.new_initial_state()
    for profile, values in zip(profiles, exact):
        view = SpielView(env, {p: profile[a] for p, a in enumerate(env.agents)})
        policies = view if env.spiel.simultaneous else [view] * len(env.agents)
        reference = expected_game_score.policy_value(root, policies)
        np.testing.assert_allclose(values, reference, atol=1e-12)


def test_exact_returns_read_any_explicit_policy(make_env):
    env = make_env("leduc_poker")
    core_uniform = UniformRandomPolicy(env.spiel.num_actions)  # no keys needed: reads masks
    tabular = [TabularPolicy(env.spiel.num_actions), TabularPolicy(env.spiel.num_actions)]
    values = env.exact_returns([{a: core_uniform for a in env.agents}, dict(zip(env.agents, tabular))])
    np.testing.assert_allclose(values[0], values[1], atol=1e-12)
    np.testing.assert_allclose(values[0], [-0.078125, 0.078125], atol=1e-12)


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker", "goofspiel(num_cards=3)"])
def test_aggregate_equals_openspiel_policy_aggregator(make_env, game):
    env = make_env(game)
    rng = np.random.default_rng(2)
    pools = [[random_tabular(env, rng, [p]) for _ in range(3)] for p in range(2)]
    weights = [[0.5, 0.3, 0.2], [0.1, 0.0, 0.9]]
    views = [[SpielView(env, {p: pol}) for pol in pools[p]] for p in range(2)]
    reference = policy_aggregator.PolicyAggregator(env.spiel.game).aggregate([0, 1], views, weights)
    for p, agent in enumerate(env.agents):
        mixture = [(pol, w) for pol, w in zip(pools[p], weights[p]) if w > 0]
        table = env.exact.aggregate(mixture, p)
        info = env.exact.tree.players[p]
        for key, legal, row in zip(info.keys, info.mask, table):
            expected = reference.policy[p][key]
            for action in np.flatnonzero(legal):
                assert row[action] == pytest.approx(expected[action], abs=1e-9), (key, action)


@pytest.mark.parametrize("game", GAMES)
def test_best_response_value_equals_openspiel_best_response_policy(make_env, game):
    env = make_env(game)
    rng = np.random.default_rng(3)
    n = len(env.agents)
    pools = {a: [(random_tabular(env, rng, [p]), w) for w in (0.7, 0.3)] for p, a in enumerate(env.agents)}
    algorithm = ExactBestResponse()
    for p, agent in enumerate(env.agents):
        space = popmarl.PolicySpace(population=agent, agents=(agent,), observation_space=env.observation_space(agent),
                                    action_space=env.action_space(agent))
        br = algorithm.best_response(popmarl.BestResponseProblem(env=env, space=space, opponents=pools, seed=0))
        # The reference: OpenSpiel's Python best response to OpenSpiel's aggregated opponents.
        views = [[SpielView(env, {q: pol}) for pol, _ in pools[a]] for q, a in enumerate(env.agents)]
        weights = [[w for _, w in pools[a]] for a in env.agents]
        aggregated = policy_aggregator.PolicyAggregator(env.spiel.game).aggregate(list(range(n)), views, weights)
        reference = spiel_best_response.BestResponsePolicy(env.spiel.game, p, aggregated)
        value = reference.value(env.spiel.game.new_initial_state())
        # The BR's exact value against each opponent policy, mixed by the weights.
        total = 0.0
        for combo in np.ndindex(*(len(pools[a]) for a in env.agents if a != agent)):
            others = iter(combo)
            profile, weight = {}, 1.0
            for a in env.agents:
                if a == agent:
                    profile[a] = br
                else:
                    pol, w = pools[a][next(others)]
                    profile[a], weight = pol, weight * w
            total += weight * env.exact_returns([profile])[0, p]
        assert total == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker", "kuhn_poker(players=3)"])
def test_cpp_and_python_best_responses_agree(make_env, game):
    env = make_env(game)
    rng = np.random.default_rng(4)
    oracle = SpielOracle(env.spiel, env.exact.tree)  # fresh: no memo shared with other tests
    tables = {p: env.exact.table(random_tabular(env, rng, [p]), p) for p in range(len(env.agents))}
    for p in range(len(env.agents)):
        _, cpp = oracle.best_response(p, tables, implementation="cpp")
        _, python = oracle.best_response(p, tables, implementation="python")
        assert cpp == pytest.approx(python, abs=1e-9)


@pytest.mark.parametrize("game", GAMES)
def test_nash_conv_equals_openspiel_exploitability(make_env, game):
    env = make_env(game)
    rng = np.random.default_rng(5)
    profile = {a: [(random_tabular(env, rng, [p]), w) for w in (0.2, 0.8)] for p, a in enumerate(env.agents)}
    views = [[SpielView(env, {p: pol}) for pol, _ in profile[a]] for p, a in enumerate(env.agents)]
    weights = [[w for _, w in profile[a]] for a in env.agents]
    aggregated = policy_aggregator.PolicyAggregator(env.spiel.game).aggregate(range(len(env.agents)), views, weights)
    reference = exploitability.nash_conv(env.spiel.game, aggregated)
    assert env.nash_conv(profile) == pytest.approx(reference, abs=1e-9)
    assert env.exact.nash_conv(profile, implementation="python") == pytest.approx(reference, abs=1e-9)
    if not env.spiel.simultaneous:
        tables = env.exact.aggregate_profile(profile)
        merged = {k: v for p, t in tables.items() for k, v in env.exact.oracle.action_lists(p, t).items()}
        assert pyspiel.nash_conv(env.spiel.game, merged) == pytest.approx(reference, abs=1e-9)


def test_shared_population_best_responds_in_every_seat(make_env):
    env = make_env("kuhn_poker")
    uniform = TabularPolicy(env.spiel.num_actions)
    space = popmarl.PolicySpace(population="shared", agents=env.agents,
                                observation_space=env.observation_space("player_0"),
                                action_space=env.action_space("player_0"))
    problem = popmarl.BestResponseProblem(env=env, space=space, opponents={a: [(uniform, 1.0)] for a in env.agents},
                                          seed=0)
    br = ExactBestResponse().best_response(problem)
    assert sorted(set(br.players.tolist())) == [0, 1]
    values = env.exact_returns([{"player_0": br, "player_1": uniform}, {"player_0": uniform, "player_1": br}])
    assert values[0, 0] == pytest.approx(0.5)  # OpenSpiel's BR values against uniform Kuhn
    assert values[1, 1] == pytest.approx(0.4166666666666667)


def test_exact_limit_turns_exact_evaluation_off(make_env):
    env = make_env("kuhn_poker", exact_limit=20)
    assert not env.supports_exact()
    with pytest.raises(ConfigError, match=r"env.params.game: kuhn_poker cannot be evaluated exactly.*exact_limit"):
        env.exact_returns([])
    space = popmarl.PolicySpace(population="player_0", agents=("player_0",),
                                observation_space=env.observation_space("player_0"),
                                action_space=env.action_space("player_0"))
    problem = popmarl.BestResponseProblem(env=env, space=space, opponents={}, seed=0)
    with pytest.raises(ConfigError, match="exact_limit"):
        ExactBestResponse().best_response(problem)


@pytest.mark.parametrize("game", ["kuhn_poker(players=3)", "leduc_poker"])
def test_correlated_best_response_equals_openspiel_cce_dist(make_env, game):
    """The sequence-form best response to a correlation device: OpenSpiel's ``cce_dist``
    value for every player, and its actions achieve that value."""
    env = make_env(game)
    rng = np.random.default_rng(4)
    n, tree = len(env.agents), env.exact.tree
    pools = [[random_tabular(env, rng, [p]) for _ in range(3)] for p in range(n)]
    device = [({a: pools[p][rng.integers(3)] for p, a in enumerate(env.agents)}, q)
              for q in rng.dirichlet(np.ones(5))]
    for player in range(n):
        table, value = env.exact.correlated_best_response(player, device)
        spiel_device = []
        for profile, q in device:
            merged = {}
            for p, agent in enumerate(env.agents):
                merged.update(env.exact.oracle.action_lists(p, env.exact.table(profile[agent], p)))
            spiel_device.append((q, pyspiel.TabularPolicy(merged)))
        info = pyspiel.cce_dist(env.spiel.game, spiel_device, player, prob_cut_threshold=0.0,
                                action_value_tolerance=-1.0)
        assert value == pytest.approx(info.best_response_values[0], abs=1e-10)
        response = TabularPolicy.from_tables(tree.num_actions, {player: (tree.players[player].keys, table)})
        achieved = env.exact_returns([{**profile, env.agents[player]: response} for profile, _ in device])
        assert float(np.dot([q for _, q in device], achieved[:, player])) == pytest.approx(value, abs=1e-10)


@pytest.mark.parametrize(("players", "size", "groups"), [(3, 7, 3), (3, 12, 3), (4, 8, 4 * 8 - 3)])
def test_fold_groups_answer_a_psro_iterations_new_entries_with_few_folds(players, size, groups):
    """The new entries of an iteration (a profile holding some player's newest policy):
    with three players one fold per new policy, with four one per (new policy, other
    player's policy) pair (folding fixed players took one per combination of their
    policies); every row lands in one group, whose rows share the folded columns."""
    index = np.array([c for c in np.ndindex(*(size,) * players) if size - 1 in c])
    index = index[np.random.default_rng(0).permutation(len(index))]
    seen = np.zeros(len(index), dtype=int)
    found = list(fold_groups(index, players - 2))
    for folded, columns, rows in found:
        assert len(folded) == players - 2
        assert (index[np.ix_(rows, folded)] == columns).all()
        seen[rows] += 1
    assert (seen == 1).all()
    assert len(found) == groups


@pytest.mark.parametrize(("game", "pool"), [("kuhn_poker(players=3)", 3), ("kuhn_poker(players=4)", 2)])
def test_every_n_player_profile_of_pools_equals_openspiel_policy_value(make_env, game, pool):
    """All profiles of per-seat pools (several share each seat's policy, as a PSRO
    payoff table's new entries do): the folded sequence form against OpenSpiel."""
    env = make_env(game)
    rng = np.random.default_rng(5)
    n = len(env.agents)
    pools = [[random_tabular(env, rng, [p]) for _ in range(pool)] for p in range(n)]
    combos = list(np.ndindex(*(pool,) * n))
    rng.shuffle(combos)
    profiles = [{a: pools[p][c[p]] for p, a in enumerate(env.agents)} for c in combos]
    exact = env.exact_returns(profiles)
    root = env.spiel.game.new_initial_state()
    for profile, values in zip(profiles, exact):
        view = SpielView(env, {p: profile[a] for p, a in enumerate(env.agents)})
        np.testing.assert_allclose(values, expected_game_score.policy_value(root, [view] * n), atol=1e-12)
