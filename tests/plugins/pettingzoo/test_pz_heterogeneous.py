"""Heterogeneous runs on PettingZoo tic-tac-toe: player_1 learns with PPO, player_2 with
DQN (popmarl-tianshou), in ``psro`` (one best response per population and iteration) and
in ``marl`` (both learners in the same games, their states checkpointed together). Each
completes, its policies are saved in the formats of their own algorithms, and
``popmarl eval`` rebuilds and plays them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import popmarl
import pytest
import yaml
from popmarl.cli import main
from popmarl.tools.evaluate import load_run
from popmarl.runs.rundir import RunDirectory

pytest.importorskip("popmarl_tianshou")
from popmarl_torch.policies import CategoricalPolicy, QPolicy  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")

ALGORITHMS = {"player_1": {"name": "ppo", "params": {"hidden": [32], "batch_size": 64, "epochs": 2}},
              "player_2": {"name": "dqn", "params": {"hidden": [32], "learning_starts": 100}}}
SCENARIOS: dict[str, dict[str, Any]] = {
    "psro": {"scenario": "psro", "solver": "uniform"},
    "marl": {"scenario": "marl"},
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_ppo_against_dqn_on_tictactoe_completes_saves_and_evaluates(scenario: str, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = {**SCENARIOS[scenario], "seed": 0, "algorithm": ALGORITHMS, "agents": {"mapping": "per_player"},
              "env": {"name": "pettingzoo", "params": {"module": "pettingzoo.classic.tictactoe_v3"}},
              "training": {"max_env_steps": 1000, "episodes_per_update": 16, "num_envs": 8},
              "evaluation": {"episodes_per_entry": 20, "num_envs": 8},
              "stopping": {"max_iterations": 2}, "trackers": []}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    run = tmp_path / "run"
    summary = popmarl.run(popmarl.load_config(str(path)), out=str(run))
    assert summary["status"] == "completed" and summary["iterations"] == 2
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(metrics[-1][f"train/{p}/updates"] > 0 for p in ALGORITHMS)  # both learned
    run_dir, pools = RunDirectory(run), load_run(run).pools
    for population, kind in (("player_1", CategoricalPolicy), ("player_2", QPolicy)):
        assert summary["populations"][population]["policies"][-1] == f"{population}/2"
        assert run_dir.load_policy(f"{population}/2")  # saved, readable without pickles
        assert pools[population].policies and all(isinstance(p, kind) for p in pools[population].policies)
    if scenario == "marl":  # both learners' states, each in its trainer's own files
        learners = run_dir.load_learners(run_dir.load_state()[0])
        assert sorted(learners) == ["player_1", "player_2"]
        assert all(state.trainer for state in learners.values())
        assert set(learners["player_1"].trainer) != set(learners["player_2"].trainer)
    assert main(["eval", str(run), "--episodes", "50", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])["populations"]
    assert {p: r["episodes"] for p, r in report.items()} == {"player_1": 50, "player_2": 50}
    assert all(np.isfinite(r["mean_return"]) for r in report.values())
