"""Env ``matrix`` and the meta-game arithmetic (popmarl.builtin.matrix_env, popmarl.gametheory.metagame),
checked against independent, enumerate-everything computations."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import popmarl
from popmarl.builtin.matrix_env import MatrixEnv, MixedStrategyPolicy
from popmarl.errors import ConfigError
from popmarl.gametheory.metagame import entropy, expected_payoffs, nash_conv, regrets
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.interfaces.spaces import Discrete

from testkit.run_files import brute_force_nash_conv, brute_force_payoffs, collapsed_strategies, read_summary


def test_rock_paper_scissors() -> None:
    env = MatrixEnv(game="rps")
    rock, paper, scissors = 0, 1, 2
    a = env.payoffs[0]
    assert a[paper, rock] == a[rock, scissors] == a[scissors, paper] == 1
    assert a[rock, paper] == -1 and np.all(np.diag(a) == 0)
    assert env.zero_sum and env.agents == ("player_0", "player_1")
    assert env.action_space("player_1") == Discrete(n=3)


def test_matching_pennies() -> None:
    env = MatrixEnv(game="matching_pennies")
    assert env.payoffs[0].tolist() == [[1, -1], [-1, 1]] and env.zero_sum


def test_prisoners_dilemma() -> None:
    env = MatrixEnv(game="prisoners_dilemma")
    cooperate, defect = 0, 1
    assert not env.zero_sum
    # Defecting is strictly better whatever the other does, for both players...
    assert np.all(env.payoffs[0][defect] > env.payoffs[0][cooperate])
    assert np.all(env.payoffs[1][:, defect] > env.payoffs[1][:, cooperate])
    # ...yet both cooperating beats both defecting.
    assert np.all(env.payoffs[:, cooperate, cooperate] > env.payoffs[:, defect, defect])


def test_random_zero_sum_is_seeded_and_sized() -> None:
    a = MatrixEnv(game="random_zero_sum", size=4, seed=1)
    assert a.payoffs.shape == (2, 4, 4) and a.zero_sum
    np.testing.assert_array_equal(a.payoffs, MatrixEnv(game="random_zero_sum", size=4, seed=1).payoffs)
    assert not np.allclose(a.payoffs, MatrixEnv(game="random_zero_sum", size=4, seed=2).payoffs)


def test_random_general_sum_is_seeded_sized_and_n_player() -> None:
    env = MatrixEnv(game="random_general_sum", size=3, players=3, seed=5)
    assert env.payoffs.shape == (3, 3, 3, 3) and not env.zero_sum
    assert env.agents == ("player_0", "player_1", "player_2")
    assert np.all(np.abs(env.payoffs) <= 1)
    np.testing.assert_array_equal(env.payoffs, MatrixEnv(game="random_general_sum", size=3, players=3, seed=5).payoffs)
    assert not np.allclose(env.payoffs, MatrixEnv(game="random_general_sum", size=3, players=3, seed=6).payoffs)


def test_game_from_npy_file(tmp_path: Path) -> None:
    tensor = np.arange(2 * 2 * 3, dtype=float).reshape(2, 2, 3)
    np.save(tmp_path / "game.npy", tensor)
    env = MatrixEnv(game="file", path=str(tmp_path / "game.npy"))
    np.testing.assert_array_equal(env.payoffs, tensor)
    assert env.action_space("player_0") == Discrete(n=2) and env.action_space("player_1") == Discrete(n=3)


@pytest.mark.parametrize(("content", "message"), [
    (None, "required"),
    ("missing", "no such file"),
    (b"junk", "not a .npy"),
    (np.zeros((2, 2)), "shape"),
    (np.zeros((3, 2, 2)), "shape"),
    (np.full((2, 2, 2), np.nan), "finite"),
])
def test_game_from_a_bad_file(tmp_path: Path, content: object, message: str) -> None:
    path = tmp_path / "game.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, np.ndarray):
        np.save(path, content)
    with pytest.raises(ConfigError, match=message):
        MatrixEnv(game="file", path=None if content is None else str(path))


def _mixed(probs: list[float]) -> MixedStrategyPolicy:
    return MixedStrategyPolicy(np.asarray(probs, float))


@pytest.mark.parametrize(("game", "x", "y", "expected"), [
    ("rps", [1 / 3] * 3, [1 / 3] * 3, 0.0),
    ("rps", [1, 0, 0], [1, 0, 0], 2.0),
    ("rps", [1, 0, 0], [0, 1, 0], 2.0),  # rock loses to paper: -1 -> +1 with scissors; paper gains 0
    ("matching_pennies", [0.5, 0.5], [0.5, 0.5], 0.0),
    ("prisoners_dilemma", [0, 1], [0, 1], 0.0),
    ("prisoners_dilemma", [1, 0], [1, 0], 2.0),
])
def test_nash_conv_of_known_profiles(game: str, x: list[float], y: list[float], expected: float) -> None:
    env = MatrixEnv(game=game)
    profile = {"player_0": [(_mixed(x), 1.0)], "player_1": [(_mixed(y), 1.0)]}
    assert env.nash_conv(profile) == pytest.approx(expected)
    assert env.nash_conv(profile) == pytest.approx(brute_force_nash_conv(env.payoffs, [np.array(x), np.array(y)]))


@pytest.mark.parametrize(("players", "size", "seed"), [(2, 3, 0), (2, 6, 1), (3, 3, 2), (4, 2, 3)])
def test_exact_nash_conv_of_random_mixtures_matches_enumeration(players: int, size: int, seed: int) -> None:
    env = MatrixEnv(game="random_general_sum", players=players, size=size, seed=seed)
    rng = np.random.default_rng(seed)
    profile, collapsed = {}, []
    for agent in env.agents:
        # A mixture of three random mixed policies, collapsed by hand for the check.
        weights = rng.dirichlet(np.ones(3))
        policies = [rng.dirichlet(np.ones(size)) for _ in range(3)]
        profile[agent] = [(_mixed(p), float(w)) for p, w in zip(policies, weights)]
        collapsed.append(sum(w * p for p, w in zip(policies, weights)))
    assert env.nash_conv(profile) == pytest.approx(brute_force_nash_conv(env.payoffs, collapsed), abs=1e-10)
    assert env.nash_conv(profile) > 0
    returns = env.exact_returns([{a: _mixed(collapsed[k]) for k, a in enumerate(env.agents)}])
    np.testing.assert_allclose(returns[0], brute_force_payoffs(env.payoffs, collapsed), atol=1e-12)


def _brute_force_outcomes(tensor: np.ndarray, mixtures: list[np.ndarray]) -> np.ndarray:
    """``[3, n]`` each player's win / draw / loss probability, summing over every pure
    profile: a player wins where its payoff beats all others', loses where one beats it."""
    n = tensor.shape[0]
    total = np.zeros((3, n))
    for profile in itertools.product(*(range(len(m)) for m in mixtures)):
        weight = np.prod([mixtures[k][action] for k, action in enumerate(profile)])
        payoffs = [tensor[(k, *profile)] for k in range(n)]
        for k in range(n):
            best_other = max(payoffs[j] for j in range(n) if j != k)
            total[0 if payoffs[k] > best_other else 2 if payoffs[k] < best_other else 1, k] += weight
    return total


def test_exact_outcomes_of_rock_paper_scissors() -> None:
    env = MatrixEnv(game="rps")
    rock, paper, scissors, uniform = _mixed([1, 0, 0]), _mixed([0, 1, 0]), _mixed([0, 0, 1]), _mixed([1 / 3] * 3)
    outcomes = env.exact_outcomes([
        {"player_0": uniform, "player_1": uniform},
        {"player_0": rock, "player_1": scissors},
        {"player_0": rock, "player_1": paper},
        {"player_0": paper, "player_1": paper},
    ])
    assert outcomes.shape == (4, 3, 2)
    np.testing.assert_allclose(outcomes[0], np.full((3, 2), 1 / 3), atol=1e-12)
    np.testing.assert_array_equal(outcomes[1], [[1, 0], [0, 0], [0, 1]])  # (win, draw, loss) x seat
    np.testing.assert_array_equal(outcomes[2], [[0, 1], [0, 0], [1, 0]])
    np.testing.assert_array_equal(outcomes[3], [[0, 0], [1, 1], [0, 0]])


@pytest.mark.parametrize(("players", "size", "grid"), [(3, 3, None), (3, 3, 0.5), (4, 2, 0.5), (2, 4, 1.0)])
def test_exact_outcomes_of_random_mixtures_match_enumeration(tmp_path: Path, players: int, size: int,
                                                             grid: float | None) -> None:
    """Random general-sum games; on a coarse payoff ``grid`` payoffs tie, so draws occur."""
    env = MatrixEnv(game="random_general_sum", players=players, size=size, seed=players + size)
    if grid is not None:
        np.save(tmp_path / "game.npy", np.round(env.payoffs / grid) * grid)
        env = MatrixEnv(game="file", path=str(tmp_path / "game.npy"))
    rng = np.random.default_rng(size)
    mixtures = [[rng.dirichlet(np.ones(size)) for _ in range(players)] for _ in range(3)]
    outcomes = env.exact_outcomes([{a: MixedStrategyPolicy(m[k]) for k, a in enumerate(env.agents)} for m in mixtures])
    assert outcomes.shape == (3, 3, players)
    for row, mixture in zip(outcomes, mixtures):
        np.testing.assert_allclose(row, _brute_force_outcomes(env.payoffs, mixture), atol=1e-12)
        np.testing.assert_allclose(row.sum(axis=0), 1.0, atol=1e-12)
    if grid is not None:
        assert np.any(outcomes[:, 1] > 0.01)  # draws do occur


def test_metagame_functions_agree_with_enumeration() -> None:
    rng = np.random.default_rng(7)
    tensor = rng.normal(size=(3, 2, 4, 3))
    mixtures = [rng.dirichlet(np.ones(n)) for n in (2, 4, 3)]
    np.testing.assert_allclose(expected_payoffs(tensor, mixtures), brute_force_payoffs(tensor, mixtures))
    assert nash_conv(tensor, mixtures) == pytest.approx(brute_force_nash_conv(tensor, mixtures))
    assert np.all(regrets(tensor, mixtures) >= -1e-12)
    assert entropy(np.full(4, 0.25)) == pytest.approx(np.log(4))
    assert entropy(np.array([1.0, 0.0])) == 0.0


def test_rollouts_of_mixed_policies_estimate_the_exact_payoffs() -> None:
    env = MatrixEnv(game="random_zero_sum", size=3, seed=4)
    profiles = [
        {"player_0": _mixed([0.2, 0.5, 0.3]), "player_1": _mixed([0.6, 0.1, 0.3])},
        {"player_0": _mixed([0.0, 0.0, 1.0]), "player_1": _mixed([0.5, 0.5, 0.0])},
    ]
    exact = env.exact_returns(profiles)
    for profile, row in zip(profiles, exact):
        strategies = [profile[a].probs for a in env.agents]
        np.testing.assert_allclose(row, brute_force_payoffs(env.payoffs, strategies), atol=1e-12)
    values, steps = RolloutWorker(env=env, num_envs=64).evaluate(profiles, episodes=4000, seed=0)
    assert steps == 2 * 4000 * 2  # two agents act once per episode
    np.testing.assert_allclose(values, exact, atol=0.08)  # ~5 standard errors
    np.testing.assert_allclose(values.sum(axis=1), 0.0, atol=1e-12)  # zero-sum, episode by episode
    again, _ = RolloutWorker(env=env, num_envs=64).evaluate(profiles, episodes=4000, seed=0)
    np.testing.assert_array_equal(again, values)  # deterministic in its seed


@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0])
def test_opponent_epsilon_randomises_only_the_opponents_decisions(epsilon: float) -> None:
    """In rock-paper-scissors, a rock-only learner against a rock-only opponent draws
    unless the opponent's move was replaced by a uniform one (probability epsilon, then
    paper or scissors with 2/3): the learner wins or loses each with probability epsilon/3."""
    env = MatrixEnv(game="rps")
    learner, opponent = _mixed([1, 0, 0]), _mixed([1, 0, 0])
    played = RolloutWorker(env=env, num_envs=64).explore(
        learners=[Seating(policy=learner, seats=("player_0",))],
        opponents=OpponentDraw({"player_1": ([opponent], np.ones(1))}),
        max_episodes=6000, max_steps=None, seed=3, opponent_epsilon=epsilon)
    (episodes,) = played.episodes
    returns = np.array([e.episode_return for e in episodes])
    assert len(returns) == 6000
    assert all((e.actions == 0).all() for e in episodes)  # the learner's own moves are untouched
    np.testing.assert_allclose([np.mean(returns == 1), np.mean(returns == -1)], [epsilon / 3] * 2, atol=0.02)


class ExploresPaper(MixedStrategyPolicy):
    """Rock when acting as an opponent (``explore`` false), paper when exploring."""

    def __init__(self) -> None:
        super().__init__(np.eye(3)[0])

    def act(self, batch, *, explore, rng):
        return np.full(len(batch), 1 if explore else 0)


@pytest.mark.parametrize(("learner_agents", "self_play"), [(("player_0",), 1.0), (("player_0", "player_1"), 1.0),
                                                           (("player_0",), 0.5)])
def test_self_play_learner_plays_and_learns_its_drawn_seat_against_copies(learner_agents, self_play) -> None:
    """Self-play: the learner plays its drawn seat (exploring: paper) and a copy of it every
    other seat, as an opponent would (not exploring: rock), so the learner wins; only its
    own seat's transitions are kept, one episode per episode played. The meta-strategy
    opponent plays scissors, so the learner (paper) loses to it."""
    env = MatrixEnv(game="rps")
    learner = ExploresPaper()
    scissors = OpponentDraw({a: ([_mixed([0, 0, 1])], np.ones(1)) for a in env.agents})
    played = RolloutWorker(env=env, num_envs=64).explore(
        learners=[Seating(policy=learner, seats=learner_agents, one_seat=True)], opponents=scissors,
        max_episodes=2000, max_steps=None, seed=5, self_play=self_play)
    (episodes,), steps = played.episodes, played.env_steps
    assert len(episodes) == 2000 and steps == 2 * 2000
    assert {e.agent for e in episodes} == set(learner_agents)
    assert all((e.actions == 1).all() for e in episodes)  # only the exploring learner's moves
    returns = np.array([e.episode_return for e in episodes])
    assert set(returns) == ({1.0} if self_play == 1 else {1.0, -1.0})
    assert np.mean(returns == 1.0) == pytest.approx(self_play, abs=0.05)


def test_a_run_reports_the_true_nash_conv_of_its_meta_strategy(run_inprocess, tmp_path: Path) -> None:
    """The summary's nash_conv is the NashConv, in the real game, of the meta-strategy mixed
    over the saved policies, recomputed here by enumeration."""
    params = {"game": "random_general_sum", "size": 6, "seed": 11}
    summary = run_inprocess(env={"params": params}, stopping={"max_iterations": 6})
    env = MatrixEnv(**params)
    strategies = collapsed_strategies(tmp_path / "run", summary, env.agents)
    assert summary["nash_conv"] == pytest.approx(brute_force_nash_conv(env.payoffs, strategies), abs=1e-10)
    assert summary["exploitability"] is None  # general-sum: exploitability is not defined
    assert read_summary(tmp_path / "run") == summary


def test_zero_sum_exploitability_is_half_nash_conv(run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(stopping={"max_iterations": 4})
    strategies = collapsed_strategies(tmp_path / "run", summary, ("player_0", "player_1"))
    expected = brute_force_nash_conv(MatrixEnv(game="rps").payoffs, strategies)
    assert summary["nash_conv"] == pytest.approx(expected) and expected > 0
    assert summary["exploitability"] == pytest.approx(expected / 2)


def test_env_is_registered_and_configured_by_name() -> None:
    env = popmarl.envs.load("matrix")(game="random_zero_sum", size=2, seed=9)
    assert env.payoffs.shape == (2, 2, 2)
