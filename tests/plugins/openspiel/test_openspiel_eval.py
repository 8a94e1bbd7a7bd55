"""``popmarl eval`` on an OpenSpiel game: exact where the game is small enough (win /
draw / loss probabilities from the exact engine), and the same figures, within sampling
error, when the run's evaluation samples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import popmarl
import pytest
import yaml
from popmarl.cli import main

CONFIG = {
    "scenario": "psro", "seed": 0,
    "env": {"name": "openspiel", "params": {"game": "kuhn_poker"}},
    "algorithm": {"name": "exact_br"}, "solver": {"name": "nash"},
    "stopping": {"max_iterations": 3}, "trackers": [],
}
EPISODES = 20_000


def _eval(run: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["eval", str(run), "--episodes", str(EPISODES), "--json"]) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])["populations"]


def test_exact_eval_agrees_with_sampled_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    popmarl.run(popmarl.load_config(str(path)), out=str(tmp_path / "run"))
    exact = _eval(tmp_path / "run", capsys)
    # The same run, evaluated by sampling (its config's evaluation.exact: never).
    shutil.copytree(tmp_path / "run", tmp_path / "sampled")
    config = yaml.safe_load((tmp_path / "sampled" / "config.yaml").read_text())
    config["evaluation"]["exact"] = "never"
    (tmp_path / "sampled" / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    sampled = _eval(tmp_path / "sampled", capsys)
    for population in ("player_0", "player_1"):
        e, s = exact[population], sampled[population]
        assert e["exact"] and e["episodes"] == 0 and not s["exact"] and s["episodes"] == EPISODES
        assert e["win"] + e["draw"] + e["loss"] == pytest.approx(1.0)
        assert e["draw"] == pytest.approx(0.0, abs=1e-12)  # Kuhn has no draws
        # A frequency over 20,000 games has sd <= 0.0036; a Kuhn return (|r| <= 2) sd of the mean <= 0.015.
        for key, tolerance in (("win", 0.015), ("loss", 0.015), ("mean_return", 0.06)):
            assert s[key] == pytest.approx(e[key], abs=tolerance), (population, key)
    # Against uniform random play, the meta-strategy wins more than it loses in either seat.
    assert all(exact[p]["mean_return"] > 0 for p in exact)
