"""Env ``openspiel``: config errors, spaces, and the batched vector of games."""

from __future__ import annotations

import types

import numpy as np
import pyspiel
import pytest
from openspiel_helpers import random_tabular

import popmarl
from popmarl.errors import ConfigError
from popmarl_openspiel.env import OpenSpielEnv
from popmarl_openspiel.tabular import TabularPolicy
from popmarl_openspiel.vector import _list_fill


def _env_config(write_config, **params):
    return write_config(env={"name": "openspiel", "params": params}, algorithm={"name": "exact_br"})


def test_unknown_game_is_reported_at_its_path_with_a_suggestion(write_config):
    with pytest.raises(ConfigError) as info:
        popmarl.load_config(str(_env_config(write_config, game="leduc_pokr")))
    message = str(info.value)
    assert "env.params.game: unknown OpenSpiel game 'leduc_pokr' (did you mean 'leduc_poker'?)" in message
    assert "pyspiel.registered_names()" in message


def test_bad_game_params_are_reported_each_at_its_path(write_config, tmp_path):
    config = popmarl.load_config(str(_env_config(write_config, game="kuhn_poker",
                                                 game_params={"player": 3, "seed": 1})))
    with pytest.raises(ConfigError) as info:
        popmarl.run(config, out=str(tmp_path / "run"))
    message = str(info.value)
    assert "env.params.game_params.player: unknown parameter (did you mean 'players'?); kuhn_poker accepts: players" in message
    assert "env.params.game_params.seed: unknown parameter" in message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("params", "expected"), [
    ({"game": "kuhn_poker", "game_params": {"players": "three"}},
     "env.params.game_params.players: must be an integer (default 2), got 'three'"),
    ({"game": "kuhn_poker", "game_params": {"players": 30}}, "env.params.game_params: OpenSpiel rejects"),
    ({"game": "kuhn_poker(players=3)", "game_params": {"players": 3}}, "either inline in game"),
    ({"game": "leduc_poker", "observation": "observation", "game_params": {"players": 2}}, None),
    ({"game": "mfg_crowd_modelling"}, "env.params.game: mfg_crowd_modelling has MEAN_FIELD dynamics"),
])
def test_game_params_checks(params, expected):
    if expected is None:
        env = OpenSpielEnv(**params)
        assert env.observation_space("player_0").shape == (env.spiel.game.observation_tensor_size(),)
        return
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        OpenSpielEnv(**params)


def test_cli_reports_a_bad_game_in_one_line(run_cli, write_config):
    result = run_cli("run", _env_config(write_config, game="kuhn_pokr"), "--out", "run")
    assert result.returncode == 2, result
    assert "env.params.game: unknown OpenSpiel game 'kuhn_pokr' (did you mean 'kuhn_poker'?)" in result.stderr
    assert "Traceback" not in result.stderr


def test_exact_br_without_perfect_recall_fails_in_one_line_before_writing(run_cli, write_config, tmp_path):
    """Goofspiel's default (public) bids forget each player's own earlier bids as OpenSpiel
    keys them: exact_br is refused before the run directory exists, in one line naming the
    fix, and the same --out then works with the fix."""
    config = _env_config(write_config, game="goofspiel", game_params={"num_cards": 4})
    result = run_cli("run", config, "--out", "run", "--set", "stopping.max_iterations=2")
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and "\\n" not in result.stderr and "Warning" not in result.stderr, result
    assert result.stderr.startswith("popmarl: error: env.params.game: goofspiel cannot be evaluated exactly"), result
    assert "exact_br" in result.stderr and "env.params.game_params.imp_info: true" in result.stderr, result
    assert not (tmp_path / "run").exists()
    fixed = run_cli("run", config, "--out", "run", "--set", "stopping.max_iterations=2",
                    "--set", "env.params.game_params.imp_info=true")
    assert fixed.returncode == 0, fixed


@pytest.mark.parametrize(("game", "zero_sum", "players", "chance"), [
    ("kuhn_poker", True, 2, True), ("leduc_poker", True, 2, True), ("kuhn_poker(players=3)", False, 3, True),
    ("tiny_hanabi", False, 2, True), ("matrix_pd", False, 2, False), ("goofspiel(num_cards=3)", True, 2, True),
])
def test_agents_spaces_zero_sum_and_chance(make_env, game, zero_sum, players, chance):
    env = make_env(game)
    assert env.agents == tuple(f"player_{p}" for p in range(players))
    assert env.zero_sum is zero_sum
    assert env.has_chance is chance
    assert env.action_space("player_0").n == env.spiel.game.num_distinct_actions()
    assert env.observation_space("player_0").shape == (env.spiel.game.information_state_tensor_size(),)


def _play(env, num_envs, steps, seed=0, policy=None):
    """Step a vector with uniformly random legal actions; check every batch against the
    states' own methods; return (decisions, finished returns)."""
    vec = env.vector(num_envs=num_envs, seed=seed)
    rng = np.random.default_rng(seed)
    step = vec.reset()
    decisions, returns = 0, []
    for _ in range(steps):
        actions = {}
        for agent, (ids, batch) in step.decisions.items():
            player = int(agent.split("_")[1])
            assert batch.agent == agent and len(batch.keys) == len(ids) == len(batch.obs) == len(batch.mask)
            assert batch.mask.dtype == bool and batch.mask.shape == (len(ids), env.spiel.num_actions)
            for row, i in enumerate(ids):
                state = vec._states[i]
                assert batch.keys[row] == state.information_state_string(player)
                np.testing.assert_array_equal(batch.obs[row], np.asarray(state.information_state_tensor(player),
                                                                         np.float32))
                np.testing.assert_array_equal(batch.mask[row], np.asarray(state.legal_actions_mask(player), bool))
            probs = (policy or TabularPolicy(env.spiel.num_actions)).probabilities(batch)
            actions[agent] = np.array([rng.choice(len(p), p=p) for p in probs])
            decisions += len(ids)
        step = vec.step(actions)
        assert step.rewards.shape == (num_envs, len(env.agents))
        assert len(step.finished) == len(step.returns) == len(step.truncated)
        np.testing.assert_allclose(step.rewards[step.finished], step.returns)
        unfinished = np.setdiff1d(np.arange(num_envs), step.finished)
        assert not step.rewards[unfinished].any()
        returns.extend(step.returns.tolist())
    return decisions, np.array(returns)


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker", "goofspiel(num_cards=3)", "kuhn_poker(players=3)",
                                  "matrix_rps"])
def test_vector_batches_match_the_states(make_env, game):
    env = make_env(game)
    decisions, returns = _play(env, num_envs=7, steps=30)
    assert decisions >= 7 * 30  # every game decides every step (all seats at simultaneous nodes)
    assert len(returns) > 0
    if env.zero_sum or env.spiel.type.utility == pyspiel.GameType.Utility.ZERO_SUM:
        np.testing.assert_allclose(returns.sum(axis=1), 0.0, atol=1e-12)


def test_chance_is_sampled_from_its_distribution(make_env):
    env = make_env("kuhn_poker")
    vec = env.vector(num_envs=300, seed=3)
    step = vec.reset()
    _, batch = step.decisions["player_0"]
    cards = np.array([int(k[0]) for k in batch.keys])  # Kuhn's info state starts with the card
    counts = np.bincount(cards, minlength=3)
    assert counts.sum() == 300 and np.all(np.abs(counts - 100) < 35)


def test_vector_is_deterministic_in_its_seed(make_env):
    env = make_env("leduc_poker")
    _, a = _play(env, num_envs=5, steps=20, seed=11)
    _, b = _play(env, num_envs=5, steps=20, seed=11)
    np.testing.assert_array_equal(a, b)


def test_vector_rejects_illegal_and_missing_actions(make_env):
    env = make_env("leduc_poker")
    vec = env.vector(num_envs=2, seed=0)
    step = vec.reset()
    agent, (_, batch) = next(iter(step.decisions.items()))
    illegal = np.array([np.flatnonzero(~m)[0] for m in batch.mask])  # Leduc: fold is illegal at first
    with pytest.raises(ValueError, match="outside the legal-action mask"):
        vec.step({agent: illegal})
    with pytest.raises(ValueError, match=f"no actions for {agent}"):
        vec.step({})


def test_observation_tensors_and_the_fast_writer_agree(make_env):
    env = make_env("leduc_poker", observation="observation")
    vec = env.vector(num_envs=4, seed=0)
    step = vec.reset()
    for agent, (ids, batch) in step.decisions.items():
        states = [vec._states[i] for i in ids]
        expected = _list_fill(env.spiel)(states, int(agent[-1]))
        np.testing.assert_array_equal(batch.obs, expected)
        assert batch.obs.shape[1] == env.spiel.game.observation_tensor_size()


@pytest.mark.parametrize("game", ["kuhn_poker", "goofspiel(num_cards=3)", "kuhn_poker(players=3)"])
def test_sampled_returns_agree_with_exact_returns(make_env, game):
    env = make_env(game)
    rng = np.random.default_rng(7)
    profiles = [{a: random_tabular(env, rng, [p]) for p, a in enumerate(env.agents)} for _ in range(2)]
    exact = env.exact_returns(profiles)
    episodes = 4000
    sampled, steps = popmarl.RolloutWorker(env=env, num_envs=64).evaluate(profiles, episodes=episodes, seed=1)
    assert steps > 0
    spread = np.abs(env.exact.tree.terminal_utility).max()
    np.testing.assert_allclose(sampled, exact, atol=5 * spread / np.sqrt(episodes))


def test_intermediate_rewards_add_up_to_the_returns(make_env):
    env = make_env("cliff_walking")  # rewards every step (reward model REWARDS)
    vec = env.vector(num_envs=4, seed=0)
    rng = np.random.default_rng(0)
    step = vec.reset()
    totals, checked = np.zeros((4, 1)), 0
    for _ in range(400):
        _, batch = step.decisions["player_0"]
        step = vec.step({"player_0": np.array([rng.choice(np.flatnonzero(m)) for m in batch.mask])})
        totals += step.rewards
        assert np.any(step.rewards != 0)
        for row, i in enumerate(step.finished):
            assert totals[i] == pytest.approx(step.returns[row])
            totals[i] = 0.0
            checked += 1
    assert checked > 0


def _random_actions(env, step, rng):
    return {agent: np.array([rng.choice(np.flatnonzero(m)) for m in batch.mask])
            for agent, (ids, batch) in step.decisions.items()}


@pytest.mark.parametrize("game", ["leduc_poker", "goofspiel(num_cards=3)"])
def test_stopped_restarts_leave_each_game_finished_once(make_env, game):
    env = make_env(game)
    vec = env.vector(num_envs=6, seed=0)
    rng = np.random.default_rng(0)
    step = vec.reset()
    step = vec.step(_random_actions(env, step, rng))
    assert vec.stop_restarts() is True
    finished = step.finished.tolist()
    for _ in range(100):
        if not step.decisions:
            break
        step = vec.step(_random_actions(env, step, rng))
        finished.extend(step.finished.tolist())
    assert not step.decisions
    assert len(vec.step({}).finished) == 0  # nothing left to step
    # Each game finished the episode it was in and asked for nothing after.
    assert set(finished) == set(range(6)) and len(finished) == len(set(finished))
    step = vec.reset()  # a reset restarts every game, and restarts again
    assert set(np.concatenate([ids for ids, _ in step.decisions.values()]).tolist()) == set(range(6))


def test_explore_does_not_step_games_it_no_longer_needs(make_env):
    """Once the last episode has started, games that finish stay finished: the env is
    asked for about the decisions the learner's episodes need, not for throwaway games
    restarted over and over while the last ones end."""
    from popmarl.engine.rollout import RolloutWorker
    from popmarl.engine.seating import OpponentDraw, Seating

    env = make_env("leduc_poker")
    asked, ended = [], []
    make_vector = env.vector

    class Counting:
        def __init__(self, vec):
            self.vec, self.num_envs = vec, vec.num_envs

        def _count(self, step):
            asked.append(sum(len(ids) for ids, _ in step.decisions.values()))
            ended.append(len(step.finished))
            return step

        def reset(self):
            return self._count(self.vec.reset())

        def step(self, actions):
            return self._count(self.vec.step(actions))

        def stop_restarts(self):
            return self.vec.stop_restarts()

        def close(self):
            self.vec.close()

    policy = TabularPolicy(env.spiel.num_actions)
    draw = OpponentDraw({"player_1": ([policy], np.ones(1))})
    worker = RolloutWorker(env=env, num_envs=64)
    worker.env = types.SimpleNamespace(vector=lambda **kw: Counting(make_vector(**kw)))
    played = worker.explore(learners=[Seating(policy=TabularPolicy(env.spiel.num_actions), seats=("player_0",))],
                            opponents=draw, max_episodes=640, max_steps=None, seed=0)
    assert len(played.tags) == 640
    assert sum(ended) <= 640 + 64  # at most one unneeded episode per game
    # Decisions no episode needed: those of the few games that restarted in the step the
    # last episode started (52 here; 251 when every finished game restarted).
    assert sum(asked) - played.env_steps < 100
