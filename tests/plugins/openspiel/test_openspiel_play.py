"""A loaded OpenSpiel run acting on pyspiel states (``popmarl.load_run``, actors) and
``popmarl play`` on Kuhn poker: the person sees its own information state only, and
every hand at the end."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import popmarl
import pyspiel
import pytest
from popmarl.tools.actor import Actor
from popmarl_openspiel.env import OpenSpielEnv

CONFIG = {
    "scenario": "psro", "seed": 0,
    "env": {"name": "openspiel", "params": {"game": "kuhn_poker"}},
    "algorithm": {"name": "exact_br"}, "solver": {"name": "uniform"},
    "stopping": {"max_iterations": 3}, "trackers": [],
}
#: Kuhn's whole state as ``str(state)``: both cards, then the betting.
FULL_STATE = re.compile(r"^[012] [012]( [pb]+)?$")


@pytest.fixture(scope="module")
def kuhn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("kuhn") / "run"
    summary = popmarl.run(popmarl.validate(CONFIG), out=str(out))
    return out, summary


def _play_game(game: pyspiel.Game, actors: dict[str, Actor], rng: np.random.Generator) -> list[float]:
    """One game of pyspiel's own, chance drawn from its distributions, each player an actor."""
    for actor in actors.values():
        actor.reset()
    state = game.new_initial_state()
    while not state.is_terminal():
        if state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes())
            state.apply_action(int(rng.choice(outcomes, p=probs)))
        else:
            state.apply_action(actors[f"player_{state.current_player()}"].act(state))
    return list(state.returns())


def test_actors_play_the_meta_strategies_the_run_solved(kuhn: tuple[Path, dict[str, Any]]) -> None:
    path, summary = kuhn
    run = popmarl.load_run(path)
    assert run.iteration == 3 and run.population("player_0").policy_ids == tuple(f"player_0/{k}" for k in range(4))
    rng = np.random.default_rng(0)
    actors = {seat: run.actor(seat, rng=rng) for seat in run.env.agents}
    game = pyspiel.load_game("kuhn_poker")
    returns = np.array([_play_game(game, actors, rng) for _ in range(6000)])
    # The meta-game value is exact; each seat draws one policy per game from its mixture.
    # Player 0's return has sd < 1.6, so the mean's sd is < 0.021.
    assert returns[:, 0].mean() == pytest.approx(summary["meta_game_values"]["player_0"], abs=0.07)


def test_an_actor_of_a_past_iteration_plays_its_policies(kuhn: tuple[Path, dict[str, Any]]) -> None:
    path, _ = kuhn
    initial = popmarl.load_run(path, iteration=0)
    assert initial.population("player_1").policy_ids == ("player_1/0",)
    # Iteration 0's policy is the uniform random one: at Kuhn's first bet both answers occur.
    actor = initial.actor("player_1", rng=np.random.default_rng(1))
    state = pyspiel.load_game("kuhn_poker").new_initial_state()
    for action in (0, 1, 1):  # deal J, Q; player 0 bets
        state.apply_action(action)
    assert {actor.act(state) for _ in range(50)} == {0, 1}
    assert {actor.act(state, np.array([True, False])) for _ in range(20)} == {0}  # a mask it is given


def test_observe_gives_the_batch_the_env_vector_gives() -> None:
    """Step a pyspiel tic-tac-toe state and the env's own vector with the same moves: at
    every decision, ``observe`` of the state is the vector's row (tensor, mask, key)."""
    env = OpenSpielEnv(game="tic_tac_toe", observation="observation")
    vector = env.vector(num_envs=1, seed=0)
    step = vector.reset()
    state = env.spiel.game.new_initial_state()
    rng = np.random.default_rng(0)
    while not state.is_terminal():
        (agent, (_, expected)), = step.decisions.items()
        seen = env.observe(agent, state)
        np.testing.assert_array_equal(seen.obs, expected.obs)
        np.testing.assert_array_equal(seen.mask, expected.mask)
        assert seen.keys == expected.keys and seen.agent == agent
        action = int(rng.choice(state.legal_actions()))
        state.apply_action(action)
        step = vector.step({agent: np.array([action])})
    assert step.finished.tolist() == [0]


def test_an_actor_refuses_states_it_cannot_act_in(kuhn: tuple[Path, dict[str, Any]]) -> None:
    actor = popmarl.load_run(kuhn[0]).actor("player_1")
    state = pyspiel.load_game("kuhn_poker").new_initial_state()
    state.apply_action(0)
    state.apply_action(1)
    with pytest.raises(ValueError, match=r"^player_1 does not act in this state \(player 0 is to move\)$"):
        actor.act(state)
    with pytest.raises(TypeError, match="an openspiel actor acts on a pyspiel.State, got str"):
        actor.act(str(state))


def _play(cli: Any, run: Path, *args: str, moves: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli.command(["play", run, *args]), input=moves, capture_output=True, text=True,
                          cwd=run.parent, env=cli.env(), timeout=900)


@pytest.mark.parametrize("seed", range(4))
def test_play_kuhn_piped_hides_the_other_hand_until_the_end(cli, kuhn: tuple[Path, dict[str, Any]], seed: int) -> None:
    played = _play(cli, kuhn[0], "--seat", "player_1", "--seed", str(seed), moves="Raise\nBet\nBet\n")
    assert played.returncode == 0, played.stderr
    lines = played.stdout.splitlines()
    assert lines[0].startswith(f"{kuhn[0]}, iteration 3: you play player_1 against player_0")
    assert lines[1].startswith("player_0 plays ")  # the opponent moves first, and the person sees it
    end = lines.index("game over:")
    before, after = lines[:end], lines[end + 1:]
    assert not any(FULL_STATE.match(line) for line in before), "the opponent's card was shown during the game"
    assert any(re.fullmatch(r"your information state: [012][pb]+", line) for line in before)
    assert "moves: 0 Pass, 1 Bet" in played.stdout
    assert "your move: Raise" in before  # piped moves are echoed
    assert "'Raise' is not a legal move here; type a number or name from the moves listed, or quit" in before
    assert FULL_STATE.match(after[0]), after  # every card, at the end
    assert re.fullmatch(r"returns: player_0 -?\d, player_1 -?\d; you (won|lost)", after[-1]), after[-1]


def test_quit_abandons_the_game(cli, kuhn: tuple[Path, dict[str, Any]]) -> None:
    played = _play(cli, kuhn[0], "--seed", "0", moves="quit\nBet\n")
    assert played.returncode == 0 and played.stderr == ""
    assert played.stdout.splitlines()[-1] == "game abandoned"
    assert "game over:" not in played.stdout


@pytest.mark.skipif("dqn" not in popmarl.algorithms.names(), reason="algorithm dqn (popmarl-tianshou) is not installed")
def test_a_marl_run_plays_its_newest_policy_of_each_iteration(tmp_path: Path) -> None:
    config = {"scenario": "marl", "seed": 0, "env": CONFIG["env"],
              "algorithm": {"name": "dqn", "params": {"hidden": [8]}}, "stopping": {"max_iterations": 2},
              "training": {"max_env_steps": 300}, "trackers": []}
    popmarl.run(popmarl.validate(config), out=str(tmp_path / "run"))
    run = popmarl.load_run(tmp_path / "run", iteration=1)
    population = run.population("player_0")
    assert population.policy_ids == ("player_0/0", "player_0/1")
    assert population.mixture.tolist() == [0.0, 1.0]  # marl records no mixture: its newest policy plays
    actor = run.actor("player_0", rng=np.random.default_rng(0))
    state = pyspiel.load_game("kuhn_poker").new_initial_state()
    state.apply_action(2)
    state.apply_action(0)
    greedy = population.policy("player_0/1").act(run.env.observe("player_0", state), explore=False,
                                                   rng=np.random.default_rng(0))
    for _ in range(5):
        actor.reset()
        assert actor.policy_id == "player_0/1" and actor.act(state) == int(greedy[0])
    assert popmarl.load_run(tmp_path / "run").population("player_0").policy_ids[-1] == "player_0/2"
