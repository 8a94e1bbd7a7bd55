"""Scenario ``league`` with learning players (dqn, ppo) on OpenSpiel poker: its rounds,
snapshots and resets, its outputs (the Nash mixture, the main agents), what it refuses,
and a resume that ends as an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from testkit.run_files import assert_same_run, kill_at_random, read_metrics, read_npz, read_summary

SMALL_DQN = {"name": "dqn", "params": {"hidden": [32], "learning_starts": 64, "batch_size": 32,
                                       "eps_decay_steps": 1_000, "target_update_freq": 20}}
SMALL_PPO = {"name": "ppo", "params": {"hidden": [32], "batch_size": 64, "epochs": 2}}
SNAPSHOTS = {"min_snapshot_steps": 500, "max_snapshot_steps": 1_000}


def _league(*, rounds: int = 3, mapping: str = "shared", algorithm: dict[str, Any] = SMALL_DQN,
            **params: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "league", "params": {
            "steps_per_round": 500, "main_agents": dict(SNAPSHOTS), "main_exploiters": dict(SNAPSHOTS),
            "league_exploiters": dict(SNAPSHOTS), **params}},
        "seed": 5, "env": {"name": "openspiel", "params": {"game": "kuhn_poker"}},
        "agents": {"mapping": mapping}, "algorithm": algorithm, "solver": None,
        "stopping": {"max_iterations": rounds},
        "training": {"episodes_per_update": 32, "num_envs": 16},
        "evaluation": {"episodes_per_entry": 50},
        "trackers": ["jsonl"],
    }


def test_a_shared_league_snapshots_resets_and_outputs_its_nash_mixture(write_config, run_cli, tmp_path) -> None:
    from open_spiel.python.algorithms import exploitability

    from popmarl_openspiel import load_policy

    config = write_config(**_league(rounds=4))
    done = run_cli("run", config, "--out", "run", timeout=900)
    assert done.returncode == 0, done
    run = tmp_path / "run"
    summary, metrics = read_summary(run), read_metrics(run)
    players = {p["key"]: p for p in summary["league"]["players"]}
    assert sorted(players) == ["shared.league_exploiter_0", "shared.main_agent_0", "shared.main_exploiter_0"]
    # 500 steps a round, a snapshot at 1,000 steps at the latest: every player has 2 by round 4.
    assert all(p["trained"] >= 4 * 500 and p["snapshots"] >= 2 for p in players.values())
    frozen = summary["league"]["frozen"]["shared"]
    assert frozen[0] == {"policy_id": "shared/0", "parent": "shared.main_agent_0", "role": "main_agent"}
    assert len(frozen) == 1 + sum(p["snapshots"] for p in players.values())
    assert summary["populations"]["shared"]["policies"] == [f["policy_id"] for f in frozen]
    assert [m["population_size/shared"] for m in metrics] == sorted(m["population_size/shared"] for m in metrics)
    for key in players:
        assert 0.0 <= metrics[-1][f"win_rate/{key}"] <= 1.0
        assert 0.0 <= metrics[-1][f"min_win_rate/{key}"] <= 1.0
    assert np.isfinite(metrics[-1]["elo/shared.main_agent_0"])
    # The outputs: NashConv of the Nash mixture and of the main agent as OpenSpiel computes it.
    import pyspiel

    game = pyspiel.load_game("kuhn_poker")
    assert summary["nash_conv"] == pytest.approx(exploitability.nash_conv(game, load_policy(run / "final_policy.json")))
    assert summary["main_nash_conv"] == pytest.approx(
        exploitability.nash_conv(game, load_policy(run / "main_policy.json")))
    assert summary["main_policies"] == {"shared": "shared/main"}
    main = run_cli("eval", run, "--main", "--json")
    nash = run_cli("eval", run, "--json")
    assert main.returncode == 0 and nash.returncode == 0, (main, nash)
    played = {name: json.loads(result.stdout.splitlines()[-1])["populations"]["shared"]
              for name, result in (("main", main), ("nash", nash))}
    assert played["main"]["exact"] and played["nash"]["exact"]


def test_a_league_per_seat_meets_only_the_other_seats_players(write_config, run_cli, tmp_path) -> None:
    config = write_config(**_league(rounds=3, mapping="per_player", algorithm=SMALL_PPO,
                                    main_exploiters={"count": 0}, league_exploiters={"count": 2, **SNAPSHOTS}))
    done = run_cli("run", config, "--out", "run", timeout=900)
    assert done.returncode == 0, done
    summary = read_summary(tmp_path / "run")
    keys = sorted(p["key"] for p in summary["league"]["players"])
    assert keys == ["player_0.league_exploiter_0", "player_0.league_exploiter_1", "player_0.main_agent_0",
                    "player_1.league_exploiter_0", "player_1.league_exploiter_1", "player_1.main_agent_0"]
    for population in ("player_0", "player_1"):
        frozen = summary["league"]["frozen"][population]
        assert all(f["policy_id"].startswith(population + "/") and f["parent"].startswith(population + ".")
                   for f in frozen)
        assert len(summary["meta_strategies"][population]) == len(frozen)
    assert summary["main_policies"] == {"player_0": "player_0/main", "player_1": "player_1/main"}
    # A round's win-rate table only has games across the seats.
    _, arrays = _state(tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "checkpoints" / "state.json").read_text())
    players = saved["table_players"]
    games = arrays["win_rates_games"]
    same_seat = [(i, j) for i, a in enumerate(players) for j, b in enumerate(players)
                 if _population(a) == _population(b) and games[i, j] > 0]
    assert not same_seat
    assert games.sum() > 0


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        mergeable = isinstance(value, dict) and value and isinstance(merged.get(key), dict)
        merged[key] = _merged(merged[key], value) if mergeable else value
    return merged


def _population(table_id: str) -> str:
    return table_id.split("/")[0].split(".")[0]


def _state(run: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    saved = json.loads((run / "checkpoints" / "state.json").read_text())
    return saved, read_npz(run / "checkpoints" / saved["arrays"])


@pytest.mark.parametrize(("override", "message"), [
    ({"env": {"params": {"game": "kuhn_poker(players=3)"}}}, "scenario: a league is for two-player games; this env has 3 seats"),
    ({"training": {"max_env_steps": 100}}, "scenario.params.steps_per_round: set both it and training.max_env_steps"),
    ({"training": {"init": "fresh"}}, "training.init: not used by the league scenario (its players carry on, "
                                      "snapshot and reset as their roles say); remove it"),
    ({"solver": {"name": "cce"}, "agents": {"mapping": "per_player"}},
     "solver: cce gives a joint distribution; a league's output is one mixture per seat"),
    ({"algorithm": {"name": "random", "params": {}}}, "algorithm: random (population shared) does not learn; a league's players learn"),
    ({"scenario": {"params": {"main_agents": {"pfsp_share": 0.9}}}},
     "scenario.params.main_agents: pfsp_share + self_play_share + verification_share must be 1, got 1.4"),
    ({"scenario": {"params": {"league_exploiters": {"weighting": "cubic"}}}},
     "scenario.params.league_exploiters.weighting: 'cubic' is not allowed"),
])
def test_a_league_refuses_what_it_cannot_run(override, message, write_config, run_cli, tmp_path) -> None:
    config = write_config(**_merged(_league(), override))
    done = run_cli("run", config, "--out", "run")
    assert done.returncode == 2, done
    assert message in done.stderr, done
    assert len(done.stderr.strip().splitlines()) == 1, done
    assert not (tmp_path / "run").exists()


ROUNDS = 8
SEED = int(os.environ.get("POPMARL_TEST_KILL_SEED", random.SystemRandom().randrange(1 << 30)))


@pytest.mark.slow
def test_a_league_killed_and_resumed_equals_an_uninterrupted_one(write_config, run_cli, popen_cli, tmp_path) -> None:
    config = write_config(**_league(rounds=ROUNDS))
    straight = run_cli("run", config, "--out", "straight", timeout=600)
    assert straight.returncode == 0, straight
    reference = tmp_path / "straight"
    rng = random.Random(SEED)
    run = tmp_path / "killed"
    kill_at_random(popen_cli("run", config, "--out", run), run, reference, rng, iterations=ROUNDS)
    context = f"POPMARL_TEST_KILL_SEED={SEED}"
    assert len(read_metrics(run)) < ROUNDS, context
    resumed = run_cli("run", "--resume", run, timeout=600)
    assert resumed.returncode == 0, f"{context}\n{resumed}"
    assert_same_run(run, reference, context)
    for name in ("final_policy.json", "main_policy.json"):
        assert (run / name).read_text() == (reference / name).read_text(), f"{context}: {name}"
