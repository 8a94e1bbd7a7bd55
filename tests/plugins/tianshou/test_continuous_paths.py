"""Box (continuous) actions through every path of popmarl, with tiny budgets: they test
that each path works and what it writes, not how well anything learns.

A Cournot duopoly (:mod:`testkit.cournot`) is run by PSRO with ``sac`` and by a league
of Gaussian ``ppo`` players; those runs are evaluated (``popmarl eval``, ``--main``,
``--opponent``), ranked, exploited and loaded. A PettingZoo game with Box actions
(``mpe2``'s simple spread, ``continuous_actions``) is played by the loaded run's actors in
PettingZoo's own loop and by a person typing numbers (``popmarl play``); the exact
oracles refuse it. test_sac.py has PSRO and ``marl`` with ``sac`` ending near the
duopoly's equilibrium; tests/core/test_continuous_actions.py the paths without torch.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from tianshou_helpers import requires_nash, requires_openspiel

import popmarl
from popmarl.api import Box, Observations
from popmarl.cli import main
from testkit.cournot import Cournot

pytestmark = [requires_nash, pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")]
requires_pettingzoo = pytest.mark.skipif("pettingzoo" not in popmarl.envs.names(),
                                         reason="env 'pettingzoo' (plugin popmarl-pettingzoo) is not installed")

FIRMS = ("firm_0", "firm_1")
SAC = {"name": "sac", "params": {"hidden": [16], "batch_size": 16, "learning_starts": 16}}
PPO = {"name": "ppo", "params": {"hidden": [16], "batch_size": 16, "epochs": 1}}
SNAPSHOTS = {"min_snapshot_steps": 64, "max_snapshot_steps": 64}
TRAINING = {"num_envs": 8, "episodes_per_update": 8}
EVALUATION = {"episodes_per_entry": 16, "num_envs": 8, "versus_random_every": 1, "versus_random_episodes": 8}
SPREAD = {"name": "pettingzoo", "params": {"module": "mpe2.simple_spread_v3",
                                           "kwargs": {"N": 2, "max_cycles": 2, "continuous_actions": True}}}
SPREAD_BOX = Box(shape=(5,), low=0.0, high=1.0)


def _run(directory: Path, name: str, **config: Any) -> Path:
    """Run ``config`` with ``popmarl run`` in this process (where the test env is registered)."""
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**config, "trackers": []}, sort_keys=False), encoding="utf-8")
    assert main(["run", str(path), "--out", str(directory / name)]) == 0
    return directory / name


def _cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """``popmarl argv`` in this process: its exit status, stdout and stderr."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _metrics(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def cournot() -> Iterator[str]:
    """The test env ``cournot`` registered for this module's tests."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(popmarl, "envs", popmarl.envs.with_component("cournot", Cournot))
        yield "cournot"


@pytest.fixture(scope="module")
def psro(cournot: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PSRO with sac, 2 iterations; approximate NashConv (trained responses) at the second."""
    return _run(tmp_path_factory.mktemp("psro"), "psro", env={"name": cournot}, algorithm=SAC,
                solver={"name": "nash"}, stopping={"max_iterations": 2}, training={"max_env_steps": 64, **TRAINING},
                evaluation={**EVALUATION, "ratings": True, "approx_nash_conv_every": 2,
                            "approx_nash_conv_env_steps": 64})


@pytest.fixture(scope="module")
def league(cournot: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A league of Gaussian ppo players (every role), a snapshot each round, 2 rounds."""
    params = {"steps_per_round": 64, "main_agents": SNAPSHOTS, "main_exploiters": SNAPSHOTS,
              "league_exploiters": SNAPSHOTS}
    return _run(tmp_path_factory.mktemp("league"), "league", env={"name": cournot},
                scenario={"name": "league", "params": params}, algorithm=PPO, stopping={"max_iterations": 2},
                training=TRAINING, evaluation=EVALUATION)


def test_psro_with_sac_reports_approximate_nash_conv_versus_random_and_elo(psro: Path) -> None:
    summary = json.loads((psro / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["nash_conv"] is None
    assert {p: len(info["policies"]) for p, info in summary["populations"].items()} == dict.fromkeys(FIRMS, 3)
    first, second = _metrics(psro)
    assert "approx_nash_conv" not in first
    assert second["approx_nash_conv"] >= 0 and np.isfinite(second["approx_nash_conv_ci95"])
    for line in (first, second):
        for firm in FIRMS:
            assert np.isfinite(line[f"versus_random/{firm}/return"]) and np.isfinite(line[f"elo/{firm}"])


def test_a_league_of_gaussian_ppo_players_snapshots_and_plays_its_main_agents(
        league: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = json.loads((league / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["main_nash_conv"] is None
    players = summary["league"]["players"]
    assert len(players) == 6  # three roles in each firm's population
    assert all(p["trained"] == 128 and p["snapshots"] == 2 for p in players)
    assert {p: len(info["policies"]) for p, info in summary["populations"].items()} == dict.fromkeys(FIRMS, 7)
    assert summary["main_policies"] == {firm: f"{firm}/main" for firm in FIRMS}
    assert all(0.0 <= _metrics(league)[-1][f"win_rate/{firm}.main_agent_0"] <= 1.0 for firm in FIRMS)
    code, out, _ = _cli(capsys, "eval", league, "--main", "--episodes", "16", "--json")
    assert code == 0
    report = json.loads(out.splitlines()[-1])["populations"]
    assert all(report[firm]["episodes"] == 16 and not report[firm]["exact"] for firm in FIRMS)


def test_eval_plays_a_continuous_run_against_random_and_against_another_run(
        psro: Path, league: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for opponent in ("random", league):
        code, out, _ = _cli(capsys, "eval", psro, "--opponent", opponent, "--episodes", "16", "--json")
        assert code == 0
        assert "16 episodes per seat" in out
        report = json.loads(out.splitlines()[-1])["populations"]
        for firm in FIRMS:
            assert report[firm]["episodes"] == 16 and not report[firm]["exact"]
            assert np.isfinite(report[firm]["mean_return"])


def test_rank_cross_plays_two_continuous_runs(psro: Path, league: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "rank", psro, league, "--episodes", "8", "--json")
    assert code == 0
    report = json.loads(out.splitlines()[-1])
    assert not report["exact"] and report["episodes"] == 8 and report["pairs"] >= 1


@pytest.mark.parametrize(("given", "used"), [((), "sac"), (("--algorithm", "ppo"), "ppo")])
def test_exploit_trains_box_responses(given: tuple[str, ...], used: str, psro: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The run's own sac by default, Gaussian ppo when asked; exploit.json holds what
    was printed."""
    code, out, _ = _cli(capsys, "exploit", psro, "--env-steps", "64", *given, "--json")
    assert code == 0
    result = json.loads(out.splitlines()[-1])
    assert json.loads((psro / "exploit.json").read_text()) == result
    assert result["kind"] == "nash_conv" and result["approx_nash_conv"] >= 0
    for firm in FIRMS:
        (seed,) = result["seats"][firm]["seeds"]
        assert result["seats"][firm]["algorithm"] == used and seed["env_steps"] == 64
        assert np.isfinite(seed["response_value"]["value"])


def test_exploit_with_a_discrete_algorithm_is_refused_in_one_line(league: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "exploit", league, "--env-steps", "64", "--algorithm", "dqn")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("popmarl: error: algorithm dqn: population exploit:firm_0 needs discrete actions, got Box(")
    assert not (league / "exploit.json").exists()


def test_a_loaded_continuous_run_acts_in_its_box(psro: Path) -> None:
    run = popmarl.load_run(psro)
    assert run.iteration == 2
    batch = Observations(obs=np.ones((64, 1), np.float32))
    rng = np.random.default_rng(0)
    for firm in FIRMS:
        pool = run.pools[firm]
        assert pool.space.action_space == Box(shape=(1,), low=0.0, high=9.0)
        assert pool.policy_ids and pool.mixture.sum() == pytest.approx(1.0)
        for policy in pool.policies:
            greedy = policy.act(batch, explore=False, rng=rng)
            explored = policy.act(batch, explore=True, rng=rng)
            for actions in (greedy, explored):
                assert actions.shape == (64, 1) and np.all((actions >= 0.0) & (actions <= 9.0))
            assert np.all(greedy == greedy[0])


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PSRO with Gaussian ppo on simple spread with Box actions (2 agents, 2 steps)."""
    return _run(tmp_path_factory.mktemp("spread"), "spread", env=SPREAD, algorithm=PPO, solver={"name": "uniform"},
                stopping={"max_iterations": 1}, training={"max_env_steps": 64, "num_envs": 4, "episodes_per_update": 4},
                evaluation={"episodes_per_entry": 4, "num_envs": 4, "versus_random_every": 0})


@requires_pettingzoo
def test_actors_of_a_loaded_run_play_box_actions_in_pettingzoos_own_loop(spread: Path) -> None:
    from mpe2 import simple_spread_v3

    run = popmarl.load_run(spread)
    rng = np.random.default_rng(0)
    actors = {seat: run.actor(seat, rng=rng) for seat in run.env.agents}
    game = simple_spread_v3.parallel_env(N=2, max_cycles=2, continuous_actions=True)
    observations, _ = game.reset(seed=0)
    moves = 0
    while game.agents:
        actions = {agent: actors[agent].act(observations[agent]) for agent in game.agents}
        for action in actions.values():
            assert action.shape == (5,) and action.dtype == np.float32
            assert np.all((action >= 0.0) & (action <= 1.0))
        observations, *_ = game.step(actions)
        moves += 1
    assert moves == 2


@requires_pettingzoo
def test_play_reads_a_box_action_typed_as_numbers(spread: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Each bad line gets one line saying what is wrong and what to type, and a new prompt."""
    lines = ["up", "0.5 0.5", "0 0 0 0 2", "[0.1 0.2 0.3 0.4 0.5]", "nan 0 0 0 0", "1,1,1,1,1"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    code, out, err = _cli(capsys, "play", spread, "--seat", "agent_0", "--seed", "3")
    assert code == 0 and err == ""
    retry = "type 5 numbers separated by spaces or commas, each in [0, 1], or quit"
    assert "Type 5 numbers separated by spaces or commas, each in [0, 1], or quit." in out
    assert out.count("action: 5 numbers separated by spaces or commas, each in [0, 1]\n") == 2  # one per move
    for said in (f"'up' is not a number; {retry}", f"'0.5 0.5': 2 numbers, the action needs 5; {retry}",
                 f"entry 5: 2 is outside [0, 1]; {retry}", f"entry 1: nan is not a finite number; {retry}"):
        assert f"\n{said}\n" in out
    assert out.count("your move: ") == len(lines)
    assert out.count("agent_1 plays [") == 2  # the actor's Box action, as numbers
    assert "game over:" in out and "returns: agent_0 " in out

    monkeypatch.setattr(sys, "stdin", io.StringIO("0.5\nquit\n"))
    code, out, _ = _cli(capsys, "play", spread, "--seed", "3")
    assert code == 0 and out.endswith("your move: quit\ngame abandoned\n")


@requires_pettingzoo
@pytest.mark.parametrize("oracle", ["exact_matrix_br", pytest.param("exact_br", marks=requires_openspiel)])
def test_exact_oracles_refuse_box_actions_in_one_line(oracle: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "exact.yaml"
    config.write_text(yaml.safe_dump({"env": SPREAD, "algorithm": {"name": oracle}, "trackers": []}), encoding="utf-8")
    code, _, err = _cli(capsys, "run", config, "--out", tmp_path / "run")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"popmarl: error: algorithm {oracle}: population agent_0 acts in Box(shape=(5,), low=0.0, "
                          "high=1.0")
    assert "exact best responses need Discrete actions" in err
    assert not (tmp_path / "run").exists()
