"""``popmarl.load_run``, its actors and ``popmarl play`` on the builtin matrix env.

The run: double oracle on rock-paper-scissors with a uniform meta-solver, 2 iterations.
Its populations are [Rock, Paper, Paper] (the initial first pure strategy, then the best
responses to Rock and to Rock/Paper), so which policy an actor drew shows in its action.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from popmarl.builtin.matrix_env import MixedStrategyPolicy
from popmarl.interfaces.spaces import Box, Discrete

ROCK, PAPER = 0, 1


@pytest.fixture
def rps_run(run_inprocess, tmp_path: Path) -> Path:
    run_inprocess(stopping={"max_iterations": 2})
    return tmp_path / "run"


def test_a_loaded_run_has_its_env_mapping_and_final_populations(rps_run: Path) -> None:
    run = popmarl.load_run(rps_run)
    assert run.iteration == 2 and run.env.agents == ("player_0", "player_1")
    assert run.mapping.population_of == {"player_0": "player_0", "player_1": "player_1"}
    population = run.population("player_0")
    assert population.seats == ("player_0",)
    assert population.policy_ids == ("player_0/0", "player_0/1", "player_0/2")
    np.testing.assert_allclose(population.mixture, [1 / 3] * 3)
    policy = population.policy("player_0/1")
    assert isinstance(policy, MixedStrategyPolicy) and policy.probs.tolist() == [0.0, 1.0, 0.0]
    rng = np.random.default_rng(0)
    drawn = Counter(int(np.argmax(_strategy(population.sample(rng)))) for _ in range(3000))
    assert drawn[ROCK] / 3000 == pytest.approx(1 / 3, abs=0.03)  # sd 0.009


def _strategy(policy: popmarl.Policy) -> np.ndarray:
    assert isinstance(policy, MixedStrategyPolicy)
    return policy.probs


def test_an_iteration_loads_the_meta_strategy_it_had(rps_run: Path) -> None:
    first = popmarl.load_run(rps_run, iteration=1)
    assert first.iteration == 1
    assert first.population("player_1").policy_ids == ("player_1/0", "player_1/1")
    np.testing.assert_allclose(first.population("player_1").mixture, [0.5, 0.5])
    initial = popmarl.load_run(rps_run, iteration=0)
    assert initial.population("player_1").policy_ids == ("player_1/0",)
    actor = initial.actor("player_1", rng=np.random.default_rng(0))
    assert {actor.act(None) for _ in range(20)} == {ROCK}  # the initial policy: the first pure strategy


def test_an_actor_draws_its_policy_once_per_game(rps_run: Path) -> None:
    run = popmarl.load_run(rps_run)
    actor = run.actor("player_0", rng=np.random.default_rng(1))
    games = []
    for _ in range(3000):
        actor.reset()
        moves = {actor.act(None) for _ in range(5)}
        assert len(moves) == 1, "the actor changed policy within a game"
        assert actor.policy_id in run.population("player_0").policy_ids
        games.append(moves.pop())
    assert isinstance(games[0], int)
    assert games.count(ROCK) / 3000 == pytest.approx(1 / 3, abs=0.03)
    assert games.count(PAPER) / 3000 == pytest.approx(2 / 3, abs=0.03)


def _one_line(excinfo: pytest.ExceptionInfo[Exception]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_bad_paths_iterations_seats_and_names_get_one_line_naming_what_is_allowed(rps_run: Path,
                                                                                  tmp_path: Path) -> None:
    with pytest.raises(popmarl.UserError) as excinfo:
        popmarl.load_run(tmp_path / "nowhere")
    assert _one_line(excinfo) == f"{tmp_path / 'nowhere'}: no such run directory"
    with pytest.raises(popmarl.UserError) as excinfo:
        popmarl.load_run(tmp_path)
    assert "not a run directory (no config.yaml)" in _one_line(excinfo)
    for bad in (3, -1):
        with pytest.raises(popmarl.UserError) as excinfo:
            popmarl.load_run(rps_run, iteration=bad)
        assert f"iteration {bad}: the run at {rps_run} has iterations 0 to 2" in _one_line(excinfo)
    with pytest.raises(popmarl.UserError) as excinfo:
        popmarl.load_run(rps_run, iteration="last")  # type: ignore[arg-type]
    assert "iteration: must be a whole number or None" in _one_line(excinfo)
    run = popmarl.load_run(rps_run)
    with pytest.raises(popmarl.UserError) as excinfo:
        run.actor("player_2")
    assert _one_line(excinfo).endswith("its seats: player_0, player_1")
    with pytest.raises(popmarl.UserError) as excinfo:
        run.population("shared")
    assert _one_line(excinfo).endswith("its populations: player_0, player_1")
    with pytest.raises(popmarl.UserError) as excinfo:
        run.population("player_0").policy("player_0/7")
    assert "(did you mean 'player_0/" in _one_line(excinfo)
    assert _one_line(excinfo).endswith("it has player_0/0, player_0/1, player_0/2")


class NoNativeObservations(popmarl.Env):
    """An env that says nothing of native observations (as a third-party env may)."""

    agents = ("a", "b")

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(1,))

    def action_space(self, agent: str) -> Discrete:
        return Discrete(n=2)

    def vector(self, *, num_envs: int, seed: int) -> Any:
        raise NotImplementedError


def test_an_env_without_observe_says_so_in_one_line() -> None:
    with pytest.raises(popmarl.UserError) as excinfo:
        NoNativeObservations().observe("a", np.zeros(1))
    assert _one_line(excinfo).startswith("env NoNativeObservations cannot read native observations")


def _play(cli: Any, run: Path, *args: str, moves: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli.command(["play", run, *args]), input=moves, capture_output=True, text=True,
                          cwd=run.parent, env=cli.env(env), timeout=900)


def test_play_a_matrix_game_piped(cli, rps_run: Path) -> None:
    # At iteration 0 the opponent plays Rock: Paper wins.
    played = _play(cli, rps_run, "--iteration", "0", "--seed", "3", moves="Lizard\npaper\n")
    assert played.returncode == 0, played.stderr
    out = played.stdout
    assert "your payoffs (rows: your moves; columns: player_1's)" in out
    assert "moves: 0 Rock, 1 Paper, 2 Scissors" in out
    assert "'Lizard' is not a legal move here; type a number or name from the moves listed, or quit" in out
    assert "player_1 plays Rock" in out
    assert out.rstrip().endswith("returns: player_0 1, player_1 -1; you won")


def test_play_ends_cleanly_at_the_end_of_the_input_and_refuses_an_unknown_seat(cli, rps_run: Path) -> None:
    played = _play(cli, rps_run, "--seat", "player_1", "--seed", "0", moves="")
    assert played.returncode == 0 and played.stderr == ""
    assert played.stdout.rstrip().endswith("end of input: game abandoned")
    refused = _play(cli, rps_run, "--seat", "player_9", moves="")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("popmarl: error: --seat player_9: not a seat of")
    assert refused.stderr.rstrip().endswith("its seats: player_0, player_1")
