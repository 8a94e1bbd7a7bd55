"""Exact win / draw / loss probabilities of the openspiel env (``exact_outcomes``), against
hand-computed values, a state-by-state walk of OpenSpiel's tree, and sampled games."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np
import pytest
from openspiel_helpers import SpielView, random_tabular

import popmarl
from popmarl.errors import ConfigError
from popmarl.data.outcomes import outcome_counts
from popmarl.interfaces.policy import ExplicitPolicy
from popmarl_openspiel.env import OpenSpielEnv
from popmarl_openspiel.tabular import TabularPolicy

GAMES = ["kuhn_poker", "leduc_poker", "kuhn_poker(players=3)", "goofspiel(num_cards=3)"]
PASS, BET = 0, 1  # Kuhn poker's actions (pass/fold/check, bet/call)


def _deterministic_tabular(env: OpenSpielEnv, rng: np.random.Generator) -> TabularPolicy:
    """One random legal action at every information state of every player."""
    tree = env.exact.tree
    tables = {}
    for p, info in enumerate(tree.players):
        choice = [rng.choice(np.flatnonzero(legal)) for legal in info.mask]
        tables[p] = (info.keys, np.eye(tree.num_actions)[choice])
    return TabularPolicy.from_tables(tree.num_actions, tables)


def _profiles(env: OpenSpielEnv, seed: int) -> list[dict[str, ExplicitPolicy]]:
    """Uniform random, random behavioural and deterministic profiles, some sharing a
    seat's policy (so the batch folds and pairs plan columns as a population would)."""
    rng = np.random.default_rng(seed)
    uniform = TabularPolicy(env.spiel.num_actions)
    pools = [[uniform, random_tabular(env, rng), _deterministic_tabular(env, rng)] for _ in env.agents]
    return [{a: pools[p][(b + p * (b // 3)) % 3] for p, a in enumerate(env.agents)} for b in range(6)]


def _walked_outcomes(env: OpenSpielEnv, profile: Mapping[str, ExplicitPolicy]) -> np.ndarray:
    """``[3, n]`` by visiting every history with OpenSpiel (no tree arrays, no sequence
    form): each terminal's reach probability added to each seat's outcome there."""
    n = len(env.agents)
    view = SpielView(env, {p: profile[a] for p, a in enumerate(env.agents)})
    total = np.zeros((3, n))

    def visit(state: object, reach: float) -> None:
        if reach == 0.0:
            return
        if state.is_terminal():  # type: ignore[attr-defined]
            returns = state.returns()  # type: ignore[attr-defined]
            for k in range(n):
                best_other = max(returns[j] for j in range(n) if j != k)
                total[0 if returns[k] > best_other else 2 if returns[k] < best_other else 1, k] += reach
        elif state.is_chance_node():  # type: ignore[attr-defined]
            for action, prob in state.chance_outcomes():  # type: ignore[attr-defined]
                visit(state.child(action), reach * prob)  # type: ignore[attr-defined]
        elif state.is_simultaneous_node():  # type: ignore[attr-defined]
            choices = [view.action_probabilities(state, p).items() for p in range(n)]
            for joint in itertools.product(*choices):
                child = state.clone()  # type: ignore[attr-defined]
                child.apply_actions([action for action, _ in joint])
                visit(child, reach * math.prod(prob for _, prob in joint))
        else:
            for action, prob in view.action_probabilities(state).items():
                visit(state.child(action), reach * prob)  # type: ignore[attr-defined]

    visit(env.spiel.game.new_initial_state(), 1.0)
    return total


def _kuhn_policy(player: int, actions: Mapping[str, int]) -> TabularPolicy:
    """A deterministic Kuhn poker policy of ``player``: the action at each listed
    information state (card 0/1/2 = J/Q/K, then the betting so far)."""
    return TabularPolicy.from_tables(2, {player: (list(actions), np.eye(2)[list(actions.values())])})


@pytest.mark.parametrize("game", GAMES)
def test_exact_outcomes_equal_a_walk_of_the_openspiel_tree(make_env, game):
    env = make_env(game)
    profiles = _profiles(env, seed=1)
    exact = env.exact_outcomes(profiles)
    assert exact.shape == (len(profiles), 3, len(env.agents))
    for profile, outcomes in zip(profiles, exact):
        np.testing.assert_allclose(outcomes, _walked_outcomes(env, profile), atol=1e-12)


@pytest.mark.parametrize("game", GAMES)
def test_exact_outcomes_are_distributions_consistent_with_each_other_and_the_returns(make_env, game):
    env = make_env(game)
    profiles = _profiles(env, seed=2)
    outcomes = env.exact_outcomes(profiles)
    assert np.all(outcomes >= 0)
    np.testing.assert_allclose(outcomes.sum(axis=1), 1.0, atol=1e-12)
    # One batch gives what the profiles give one at a time.
    for profile, batched in zip(profiles, outcomes):
        np.testing.assert_allclose(env.exact_outcomes([profile])[0], batched, atol=1e-12)
    win, draw, loss = outcomes[:, 0], outcomes[:, 1], outcomes[:, 2]
    if len(env.agents) == 2:  # one seat's win is the other's loss
        np.testing.assert_allclose(win[:, 0], loss[:, 1], atol=1e-12)
        np.testing.assert_allclose(draw[:, 0], draw[:, 1], atol=1e-12)
    if game.startswith("kuhn_poker"):  # one pot, distinct cards: exactly one winner, never a draw
        np.testing.assert_allclose(win.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(draw, 0.0, atol=1e-12)
    if game.startswith("goofspiel"):  # win_loss returns: +1 won, -1 lost, 0 drawn
        np.testing.assert_allclose(env.exact_returns(profiles), win - loss, atol=1e-12)


@pytest.mark.parametrize(("game", "episodes"), [("kuhn_poker", 3000), ("leduc_poker", 2000),
                                                 ("kuhn_poker(players=3)", 3000)])
def test_sampled_outcome_frequencies_agree_with_exact_outcomes(make_env, game, episodes):
    env = make_env(game)
    profiles = _profiles(env, seed=3)[:4]
    exact = env.exact_outcomes(profiles)
    order = iter([(profile, b) for b, profile in enumerate(profiles) for _ in range(episodes)])
    played = popmarl.RolloutWorker(env=env, num_envs=64).run(lambda steps: next(order, None), seed=4, explore=False)
    tags = np.asarray(played.tags)
    for b in range(len(profiles)):
        frequencies = outcome_counts(played.returns[tags == b]) / episodes
        error = np.sqrt(exact[b] * (1 - exact[b]) / episodes)
        np.testing.assert_array_less(np.abs(frequencies - exact[b]), 5 * error + 1e-9)


def test_hand_computed_kuhn_outcomes(make_env):
    env = make_env("kuhn_poker")
    always_bet = _kuhn_policy(0, {"0": BET, "1": BET, "2": BET})
    always_call = _kuhn_policy(1, {"0b": BET, "1b": BET, "2b": BET})
    call_with_king = _kuhn_policy(1, {"0b": PASS, "1b": PASS, "2b": BET})
    always_fold = _kuhn_policy(1, {"0b": PASS, "1b": PASS, "2b": PASS})
    outcomes = env.exact_outcomes([
        {"player_0": always_bet, "player_1": always_call},  # a showdown: the higher card wins, 1/2 each
        {"player_0": always_bet, "player_1": call_with_king},  # player_1 holds the king 1/3 of the time
        {"player_0": always_bet, "player_1": always_fold},  # player_0 always takes the pot
    ])
    np.testing.assert_allclose(outcomes[0], [[1 / 2, 1 / 2], [0, 0], [1 / 2, 1 / 2]], atol=1e-12)
    np.testing.assert_allclose(outcomes[1], [[2 / 3, 1 / 3], [0, 0], [1 / 3, 2 / 3]], atol=1e-12)
    np.testing.assert_allclose(outcomes[2], [[1, 0], [0, 0], [0, 1]], atol=1e-12)


def test_hand_computed_three_player_kuhn_outcomes(make_env):
    env = make_env("kuhn_poker(players=3)")
    tree = env.exact.tree
    # Everyone checks: a showdown of three of the four cards, each seat's the highest 1/3 of the time.
    check = {a: TabularPolicy.from_tables(2, {p: (tree.players[p].keys, np.eye(2)[[PASS] * len(tree.players[p])])})
             for p, a in enumerate(env.agents)}
    np.testing.assert_allclose(env.exact_outcomes([check])[0], [[1 / 3] * 3, [0] * 3, [2 / 3] * 3], atol=1e-12)


def test_hand_computed_rock_paper_scissors_outcomes(make_env):
    env = make_env("matrix_rps")
    rock, scissors = (TabularPolicy.from_tables(3, {p: (env.exact.tree.players[p].keys, np.eye(3)[[action]])
                                                    for p in range(2)}) for action in (0, 2))
    uniform = TabularPolicy(3)
    outcomes = env.exact_outcomes([
        {"player_0": rock, "player_1": uniform},
        {"player_0": rock, "player_1": scissors},
        {"player_0": scissors, "player_1": scissors},
    ])
    np.testing.assert_allclose(outcomes[0], np.full((3, 2), 1 / 3), atol=1e-12)
    np.testing.assert_allclose(outcomes[1], [[1, 0], [0, 0], [0, 1]], atol=1e-12)
    np.testing.assert_allclose(outcomes[2], [[0, 0], [1, 1], [0, 0]], atol=1e-12)


def test_no_profiles_give_an_empty_array(make_env):
    env = make_env("kuhn_poker(players=3)")
    assert env.exact_outcomes([]).shape == (0, 3, 3)


def test_exact_outcomes_are_unavailable_where_exact_returns_are():
    env = OpenSpielEnv(game="kuhn_poker", exact_limit=10)
    profile = {a: TabularPolicy(2) for a in env.agents}
    assert not env.supports_exact()
    with pytest.raises(ConfigError, match="cannot be evaluated exactly") as returns_error:
        env.exact_returns([profile])
    with pytest.raises(ConfigError) as outcomes_error:
        env.exact_outcomes([profile])
    assert str(outcomes_error.value) == str(returns_error.value)
