"""A heterogeneous PSRO run on Kuhn poker: player_0 answers with OpenSpiel's exact best
response, player_1 trains DQN best responses (popmarl-tianshou). It completes, exports
``final_policy.json`` (the meta-strategy of both, each rebuilt with its own algorithm)
and ``popmarl eval`` plays it."""

from __future__ import annotations

import json
from pathlib import Path

import popmarl
import popmarl_openspiel
import pytest
import yaml
from open_spiel.python.algorithms import exploitability
from popmarl.cli import main
from popmarl.tools.evaluate import load_run

pytest.importorskip("popmarl_tianshou")
from popmarl_torch.policies import QPolicy, TorchPolicy  # noqa: E402

CONFIG = {
    "scenario": "psro", "seed": 0,
    "env": {"name": "openspiel", "params": {"game": "kuhn_poker", "observation": "info_state"}},
    "agents": {"mapping": "per_player"},
    "algorithm": {"player_0": "exact_br", "player_1": {"name": "dqn", "params": {"hidden": [16], "learning_starts": 100}}},
    "solver": "nash",
    "stopping": {"max_iterations": 2},
    "training": {"max_env_steps": 1500, "episodes_per_update": 32, "num_envs": 16},
    "trackers": [],
}


def test_exact_br_against_dqn_on_kuhn_completes_exports_and_evaluates(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    run = tmp_path / "run"
    summary = popmarl.run(popmarl.load_config(str(path)), out=str(run))
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert summary["populations"]["player_1"]["policies"] == ["player_1/0", "player_1/1", "player_1/2"]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["train/player_1/updates"] > 0  # DQN trained; exact_br answered without games
    assert "train/player_0/updates" not in metrics[-1]
    # The export is the meta-strategy of both players, each population rebuilt with its own
    # algorithm: its NashConv is the run's.
    loaded_policy = popmarl_openspiel.load_policy(str(run / "final_policy.json"))
    assert exploitability.nash_conv(loaded_policy.game, loaded_policy) == pytest.approx(summary["nash_conv"],
                                                                                        abs=1e-9)
    loaded = load_run(run)
    assert all(isinstance(p, QPolicy) for p in loaded.pools["player_1"].policies)
    assert not any(isinstance(p, TorchPolicy) for p in loaded.pools["player_0"].policies)
    assert main(["eval", str(run), "--episodes", "200", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])["populations"]
    # Kuhn is evaluated exactly, each population rebuilt with its own algorithm in the backend.
    assert {p: (r["exact"], r["episodes"]) for p, r in report.items()} == {"player_0": (True, 0),
                                                                           "player_1": (True, 0)}
    # Against uniform random play, an exact best response to a meta-strategy wins on average.
    assert report["player_0"]["mean_return"] > 0
