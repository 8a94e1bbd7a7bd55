"""Defaults that work beyond poker: PSRO with an algorithm's defaults and no ``training``
block on tic-tac-toe and on a game a user wrote against PettingZoo's AEC API
(``user_nim``), registered by ``module:`` path; the final meta-strategy is judged against
a uniformly random opponent with ``popmarl eval``'s code, seat by seat (tic-tac-toe, with no
``stopping`` but an iteration cap in place of the 30-minute one: at most 2% lost; Nim, 6 iterations: next to perfect play's
win rate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import popmarl
import pytest
import yaml
from popmarl.scenario.psro.scenario import PSRO
from popmarl.tools.evaluate import evaluate_run, load_run, opponent_pools

from user_nim import win_rate_against_random

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")]

TOKENS = 11


def against_random(tmp_path: Path, env: dict[str, Any], stopping: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Run PSRO with dqn's defaults on ``env``; the final meta-strategy's results against random."""
    config = tmp_path / "defaults.yaml"
    config.write_text(yaml.safe_dump({
        "scenario": "psro", "seed": 0, "env": env, "algorithm": {"name": "dqn"}, "solver": {"name": "nash"},
        "stopping": stopping, "trackers": ["jsonl"]}))
    summary = popmarl.run(popmarl.load_config(config), out=str(tmp_path / "run"))
    assert summary["status"] == "completed"
    run = load_run(tmp_path / "run")
    return evaluate_run(run, opponent_pools(run, "random"), episodes=1000, seed=1)


def test_dqn_defaults_learn_tictactoe(tmp_path: Path) -> None:
    # PSRO's default stopping (it converges at iteration 53), its 30-minute cap replaced
    # by twice that many iterations: the verdict is what was learned, whatever the
    # machine's speed.
    stopping = {"patience": PSRO.default_stopping.patience, "max_iterations": 106}
    report = against_random(tmp_path, {"name": "pettingzoo", "params": {"module": "pettingzoo.classic.tictactoe_v3"}},
                            stopping=stopping)
    for population in ("player_1", "player_2"):
        assert report[population]["loss"] <= 0.02, (population, report[population])


def test_dqn_defaults_learn_a_users_nim(tmp_path: Path) -> None:
    report = against_random(tmp_path, {"name": "pettingzoo",
                                       "params": {"module": "user_nim:Nim", "kwargs": {"tokens": TOKENS}}},
                            stopping={"max_iterations": 6})
    for seat, population in enumerate(("first", "second")):
        perfect = win_rate_against_random(TOKENS, seat)
        assert report[population]["win"] >= perfect - 0.03, (population, report[population], perfect)
