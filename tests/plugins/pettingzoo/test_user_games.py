"""Games a user wrote against PettingZoo's Parallel API (``user_allocation``: one-shot
Colonel Blotto) and AEC API with chance (``user_dice``: dice poker), and their exact
NashConv calculators: the games follow PettingZoo's API, the models the calculators use
agree with the envs, uniform play's NashConv agrees with a second count, an equilibrium's
is 0, a meta-strategy counts as its mixture, and a popmarl run loads each game by
``module:`` path (a run of uniformly random policies has uniform play's NashConv)."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import popmarl
import pytest
import yaml
from pettingzoo.test import api_test, parallel_api_test
from popmarl.config.schema import ComponentConfig
from popmarl.interfaces.policy import ExplicitPolicy
from popmarl.data.episodes import Observations
from popmarl.data.policies import Weights
from popmarl.runs.runner import build

import user_allocation as blotto
import user_dice as dice

DICE_ENV = {"name": "pettingzoo", "params": {"module": "user_dice:Dice", "kwargs": {"faces": 4}, "has_chance": True}}
BLOTTO_ENV = {"name": "pettingzoo", "params": {"module": "user_allocation:Allocation",
                                               "kwargs": {"soldiers": 5, "fields": 3}}}


# -- the games follow PettingZoo's API, and the models agree with them ------------------------


def test_the_games_pass_pettingzoos_api_tests() -> None:
    api_test(dice.Dice(), num_cycles=200)
    parallel_api_test(blotto.Allocation(), num_cycles=200)


def test_the_blotto_matrix_is_what_the_env_pays() -> None:
    game, matrix = blotto.Allocation(), blotto.payoff_matrix()
    assert len(game.splits) == 21 and matrix.shape == (21, 21)
    assert np.array_equal(matrix, -matrix.T)  # symmetric zero-sum
    for i, j in itertools.product(range(21), repeat=2):
        observations, _ = game.reset(seed=0)
        assert all(np.array_equal(o, [1.0]) for o in observations.values())
        _, rewards, terminations, _, _ = game.step({"red": i, "blue": j})
        assert rewards == {"red": matrix[i, j], "blue": -matrix[i, j]} and all(terminations.values())
        assert game.agents == []
    # (3, 1, 1) against (2, 2, 1): one field each, one tie
    assert blotto.outcome((3, 1, 1), (2, 2, 1)) == 0 and blotto.outcome((2, 2, 1), (1, 1, 3)) == 1


def play_dice(dice_rolls: tuple[int, int], history: str, faces: int = 4) -> tuple[dict[str, float], dice.Dice]:
    game = dice.Dice(faces)
    game.reset(seed=0, options={"dice": dice_rolls})
    totals = dict.fromkeys(dice.AGENTS, 0.0)
    for letter in history:
        mover = game.agent_selection
        assert mover == dice.AGENTS[dice.NODES[game.history]]
        _, _, terminated, _, _ = game.last()
        assert not terminated
        mask = game.observe(mover)["action_mask"]
        assert np.flatnonzero(mask).tolist() == list(dice.legal(game.history))
        game.step(dice.LETTERS.index(letter))
        for agent in dice.AGENTS:
            totals[agent] += game.rewards[agent]
    return totals, game


def test_the_dice_model_is_what_the_env_pays_and_shows() -> None:
    for rolls in itertools.product(range(1, 5), repeat=2):
        for history in dice.TERMINALS:
            totals, game = play_dice(rolls, history)
            assert totals == {"first": dice.payoff(history, rolls), "second": -dice.payoff(history, rolls)}
            assert all(game.terminations.values())
            for k in range(len(history)):  # every decision: the model's observation is the env's
                node = history[:k]
                player = dice.NODES[node]
                _, shown = play_dice(rolls, node)
                seen = shown.observe(dice.AGENTS[player])
                expected = dice.observation(4, rolls[player], node)
                assert all(np.array_equal(seen[key], expected[key]) for key in ("observation", "action_mask"))
                state = (rolls[player], node)
                reached = dice.reach_observation(4, state, player)  # the calculators' route: the opponent's die unseen
                assert all(np.array_equal(seen[key], reached[key]) for key in ("observation", "action_mask"))
    assert dice.payoff("cbc", (4, 2)) == 2 and dice.payoff("cc", (3, 3)) == 0 and dice.payoff("bf", (1, 4)) == 1


def test_dice_are_rolled_from_the_seed() -> None:
    game = dice.Dice()
    rolls = []
    for seed in (0, 0, 1, None):
        game.reset(seed=seed)
        rolls.append(game.dice)
    assert rolls[0] == rolls[1]
    game.reset(seed=0)
    counts = np.zeros((4, 4))
    for _ in range(4000):
        game.reset()
        counts[game.dice[0] - 1, game.dice[1] - 1] += 1
    assert counts.min() > 180  # 250 expected each


# -- the calculators --------------------------------------------------------------------------


def test_blotto_uniform_nash_conv_is_4_7ths_counted_with_fractions() -> None:
    splits = blotto.allocations()
    gains = [Fraction(sum(blotto.outcome(mine, theirs) for theirs in splits), len(splits)) for mine in splits]
    assert max(gains) == Fraction(2, 7)  # e.g. (1, 2, 2); the same in either seat
    assert blotto.uniform_nash_conv() == pytest.approx(float(2 * max(gains))) == pytest.approx(4 / 7)


def test_a_blotto_equilibrium_has_no_nash_conv() -> None:
    red, blue, value = blotto.equilibrium()
    matrix = blotto.payoff_matrix()
    assert value == pytest.approx(0.0, abs=1e-9)
    assert blotto.nash_conv(red, blue, matrix) == pytest.approx(0.0, abs=1e-9)
    assert (red > 1e-6).sum() > 1  # mixed
    # A pure split is exploited by a whole field's worth; NashConv is never negative.
    pure = np.eye(21)[0]
    assert blotto.nash_conv(pure, pure, matrix) == 2.0
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, y = rng.dirichlet(np.ones(21)), rng.dirichlet(np.ones(21))
        assert blotto.nash_conv(x, y, matrix) >= 0.0


def pure_strategies(player: int, faces: int) -> list[dict[tuple[int, str], int]]:
    states = dice.SequenceForm(faces).infostates[player]
    return [dict(zip(states, choice)) for choice in itertools.product(*(dice.legal(s[1]) for s in states))]


def expected_payoff(first: Any, second: Any, faces: int) -> Fraction:
    """first's expected payoff, walking the game tree with exact fractions; a strategy is a
    function (die, node) -> {action: probability}."""
    def walk(rolls: tuple[int, int], history: str) -> Fraction:
        if history in dice.TERMINALS:
            return Fraction(dice.payoff(history, rolls))
        player = dice.NODES[history]
        strategy = first if player == 0 else second
        return sum((p * walk(rolls, history + dice.LETTERS[a])
                    for a, p in strategy((rolls[player], history)).items() if p), Fraction(0))

    rolls = list(itertools.product(range(1, faces + 1), repeat=2))
    return sum((walk(r, "") for r in rolls), Fraction(0)) / len(rolls)


def test_dice_uniform_nash_conv_is_13_16ths_by_enumerating_pure_best_responses() -> None:
    """A second method: every pure strategy of each player against uniform play, on the
    tree itself, with fractions (not the sequence form)."""
    def uniform(state: tuple[int, str]) -> dict[int, Fraction]:
        return {a: Fraction(1, 2) for a in dice.legal(state[1])}

    for faces, expected in ((3, None), (4, Fraction(13, 16))):
        first = max(expected_payoff(lambda s, p=p: {p[s]: 1}, uniform, faces) for p in pure_strategies(0, faces))
        second = max(-expected_payoff(uniform, lambda s, p=p: {p[s]: 1}, faces) for p in pure_strategies(1, faces))
        # dice even out; folds don't: second folds to a bet 1/4 of the time, first 1/8
        assert expected_payoff(uniform, uniform, faces) == Fraction(1, 4) - Fraction(1, 8)
        assert dice.uniform_nash_conv(faces) == pytest.approx(float(first + second))
        if expected is not None:
            assert first + second == expected


def test_a_dice_equilibrium_has_no_nash_conv_and_the_value_minus_1_22nd() -> None:
    first, second, value = dice.equilibrium(4)
    form = dice.SequenceForm(4)
    x, y = form.plan(0, first), form.plan(1, second)
    assert value == pytest.approx(-1 / 22) and form.value(x, y) == pytest.approx(-1 / 22)
    assert form.nash_conv(x, y) == pytest.approx(0.0, abs=1e-9)
    # second's own linear program finds the same value from its side
    assert dice._maximin(form, 1)[1] == pytest.approx(1 / 22)
    # each best response is worth exactly the value: enumeration agrees
    best_first = max(expected_payoff(lambda s, p=p: {p[s]: 1}, lambda s: dict(enumerate(second[s])), 4)
                     for p in pure_strategies(0, 4))
    assert float(best_first) == pytest.approx(-1 / 22)
    # a best response to the equilibrium's best response is not the equilibrium: NashConv > 0 away from it
    assert dice.uniform_nash_conv(4) > 0.5


class Tabular(ExplicitPolicy):
    """A policy that reads (die, node) off the observation, for the calculators' tests."""

    def __init__(self, strategy: dict[tuple[int, str], np.ndarray], faces: int = 4) -> None:
        self.strategy, self.faces = strategy, faces

    def probabilities(self, batch: Observations) -> np.ndarray:
        rows = []
        for vector in np.asarray(batch.obs):
            die = int(np.argmax(vector[:self.faces])) + 1
            node = list(dice.NODES)[int(np.argmax(vector[self.faces:]))]
            rows.append(self.strategy[(die, node)])
        return np.array(rows)

    def get_weights(self) -> Weights:
        return {}

    def set_weights(self, weights: Weights) -> None:
        pass


class Pool:
    def __init__(self, policies: list[ExplicitPolicy], mixture: list[float]) -> None:
        self.policies, self.mixture = policies, np.asarray(mixture)


def popmarl_env(spec: dict[str, Any]) -> Any:
    return build("envs", ComponentConfig(name=spec["name"], params=spec["params"]), "env.params")


def test_a_meta_strategy_counts_as_its_mixture_in_dice() -> None:
    """Two pure policies per seat, mixed: the calculator's NashConv is that of the
    behaviour strategy the mixture is equivalent to (each information state's action
    probabilities weighted by each policy's weight times its reach there), counted on
    the tree with fractions; and an equilibrium read through the env's observations has
    none."""
    env, form = popmarl_env(DICE_ENV), dice.SequenceForm(4)
    rng = np.random.default_rng(3)
    policies = {p: [pure_strategies(p, 4)[k] for k in rng.choice(len(pure_strategies(p, 4)), 2, replace=False)]
                for p in (0, 1)}
    weights = [0.3, 0.7]

    def table(pure: dict[tuple[int, str], int]) -> dict[tuple[int, str], np.ndarray]:
        return {s: np.eye(dice.N_ACTIONS)[a] for s, a in pure.items()}

    pools = {seat: Pool([Tabular(table(pure)) for pure in policies[p]], weights) for p, seat in enumerate(dice.AGENTS)}
    computed = dice.pools_nash_conv(env, pools, 4)

    def behaviour(player: int) -> Any:
        def strategy(state: tuple[int, str]) -> dict[int, Fraction]:
            reach = [Fraction(w).limit_denominator(10) for w in weights]
            if player == 0 and state[1] == "cb":  # first reached "cb" by checking at the start
                reach = [r if pure[(state[0], "")] == dice.CALL else 0 for r, pure in zip(reach, policies[0])]
            total = sum(reach)
            if total == 0:
                return {a: Fraction(1, 2) for a in dice.legal(state[1])}
            mixed: dict[int, Fraction] = {}
            for r, pure in zip(reach, policies[player]):
                mixed[pure[state]] = mixed.get(pure[state], Fraction(0)) + r / total
            return mixed
        return strategy

    first, second = behaviour(0), behaviour(1)
    best_first = max(expected_payoff(lambda s, p=p: {p[s]: 1}, second, 4) for p in pure_strategies(0, 4))
    best_second = max(-expected_payoff(first, lambda s, p=p: {p[s]: 1}, 4) for p in pure_strategies(1, 4))
    assert computed == pytest.approx(float(best_first + best_second))
    # not the mixture of the policies' own NashConvs
    own = sum(wa * wb * form.nash_conv(form.plan(0, table(a)), form.plan(1, table(b)))
              for wa, a in zip(weights, policies[0]) for wb, b in zip(weights, policies[1]))
    assert computed != pytest.approx(own)
    # an equilibrium, read through the env's observations, mixed with itself
    eq_first, eq_second, _ = dice.equilibrium(4)
    pools = {"first": Pool([Tabular(eq_first), Tabular(eq_first)], [0.5, 0.5]), "second": Pool([Tabular(eq_second)], [1.0])}
    assert dice.pools_nash_conv(env, pools, 4) == pytest.approx(0.0, abs=1e-9)


def test_a_blotto_meta_strategy_is_its_mixture() -> None:
    env, matrix = popmarl_env(BLOTTO_ENV), blotto.payoff_matrix()

    class Fixed(ExplicitPolicy):
        def __init__(self, probs: np.ndarray) -> None:
            self.probs = probs

        def probabilities(self, batch: Observations) -> np.ndarray:
            return np.tile(self.probs, (len(batch.obs), 1))

        def get_weights(self) -> Weights:
            return {}

        def set_weights(self, weights: Weights) -> None:
            pass

    red, blue, _ = blotto.equilibrium()
    pool = Pool([Fixed(np.eye(21)[k]) for k in np.flatnonzero(red > 1e-9)], list(red[red > 1e-9]))
    mixed = blotto.policy_mixture(pool, env, "red", np.ones(1, np.float32))
    assert np.allclose(mixed, red)
    assert blotto.nash_conv(mixed, blue, matrix) == pytest.approx(0.0, abs=1e-9)


# -- popmarl runs load each game by module path ------------------------------------------------


@pytest.mark.parametrize("game", ["dice", "allocation"])
def test_a_run_of_random_policies_has_uniform_plays_nash_conv(tmp_path: Path, game: str) -> None:
    env, module = (DICE_ENV, dice) if game == "dice" else (BLOTTO_ENV, blotto)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "scenario": "psro", "seed": 0, "env": env, "algorithm": "random", "solver": "uniform",
        "evaluation": {"episodes_per_entry": 20, "num_envs": 4}, "stopping": {"max_iterations": 2}, "trackers": []}))
    summary = popmarl.run(popmarl.load_config(config), out=str(tmp_path / "run"))
    assert summary["status"] == "completed"
    assert module.run_nash_conv(tmp_path / "run") == pytest.approx(module.uniform_nash_conv())
