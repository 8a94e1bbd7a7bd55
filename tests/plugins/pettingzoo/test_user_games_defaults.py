"""Defaults on games of a user's own making (issue 35): PSRO with ``dqn``'s and ``ppo``'s
defaults (no ``training`` block, no algorithm params, ``solver: nash``) on a one-shot
simultaneous game written against PettingZoo's Parallel API (``user_allocation``:
Colonel Blotto, 5 soldiers on 3 fields) and on a hidden-information dice game written
against its AEC API with chance (``user_dice``: dice poker, 3 faces here, where
``benchmarks/defaults.py`` plays 4: the same game, half the iterations); the final
meta-strategy's exact NashConv must be at most 20% of uniform random play's. Stopping:
PSRO's default convergence rule (as ``benchmarks/defaults.py``'s ``allocation`` and
``dice`` checks, which set no ``stopping``), its 30-minute cap replaced by twice the
iterations the run converges in, so that the verdict is what was learned whatever the
machine's speed, and a run that never converges cannot hold CI up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import popmarl
import pytest
import yaml
from popmarl.scenario.psro.scenario import PSRO

import user_allocation
import user_dice

pytestmark = pytest.mark.slow

GAMES: dict[str, tuple[dict[str, Any], Any]] = {
    "allocation": ({"name": "pettingzoo", "params": {"module": "user_allocation:Allocation",
                                                     "kwargs": {"soldiers": 5, "fields": 3}}}, user_allocation),
    "dice": ({"name": "pettingzoo", "params": {"module": "user_dice:Dice", "kwargs": {"faces": 3},
                                               "has_chance": True}}, user_dice),
}
#: Twice the iteration each run converges at (allocation with dqn: 17, dice with ppo: 26).
MAX_ITERATIONS = {"allocation": 34, "dice": 52}
TARGET = 0.2  # of uniform play's NashConv


# One game of each API, with the algorithm that converges sooner on it; benchmarks/defaults.py
# runs all four pairs.
@pytest.mark.parametrize(("game", "algorithm"), [("allocation", "dqn"), ("dice", "ppo")])
def test_defaults_reach_a_fifth_of_uniform_plays_nash_conv(tmp_path: Path, game: str, algorithm: str) -> None:
    env, module = GAMES[game]
    config = tmp_path / "defaults.yaml"
    config.write_text(yaml.safe_dump({
        "scenario": "psro", "seed": 0, "env": env, "algorithm": {"name": algorithm}, "solver": {"name": "nash"},
        "stopping": {"patience": PSRO.default_stopping.patience, "max_iterations": MAX_ITERATIONS[game]},
        "trackers": ["jsonl"]}))
    summary = popmarl.run(popmarl.load_config(config), out=str(tmp_path / "run"))
    assert summary["status"] == "completed"
    nash_conv, uniform = module.run_nash_conv(tmp_path / "run"), module.uniform_nash_conv()
    assert nash_conv <= TARGET * uniform, (game, algorithm, nash_conv, uniform, nash_conv / uniform)
