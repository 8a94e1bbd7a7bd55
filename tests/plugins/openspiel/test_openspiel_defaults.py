"""Defaults that follow the game on OpenSpiel games (issue 35): PSRO's convergence rule
when no ``stopping`` is set, the oracle gain it reads, and the traits OpenSpiel declares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import popmarl
from popmarl.interfaces.env_traits import measure
from popmarl_openspiel.env import OpenSpielEnv

pytestmark = pytest.mark.skipif("nash" not in popmarl.solvers.names(),
                                reason="solver 'nash' (plugin popmarl-solvers) is not installed")


def test_exact_psro_with_no_stopping_block_stops_once_converged_and_its_gain_is_the_last_nash_conv(
        tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"scenario": "psro", "env": {"name": "openspiel", "params": {"game": "kuhn_poker"}},
                                    "algorithm": "exact_br", "solver": "nash", "trackers": ["jsonl"]}))
    summary = popmarl.run(popmarl.load_config(str(path)), out=str(tmp_path / "run"))
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert summary["stop_reason"] == "converged" and summary["nash_conv"] == pytest.approx(0.0, abs=1e-9)
    # exact best responses evaluated exactly: what they gain is the previous meta-strategy's NashConv
    assert rows[0]["oracle_gain"] == pytest.approx(0.916667, abs=1e-6)  # uniform random play's
    for before, row in zip(rows, rows[1:]):
        assert row["oracle_gain"] == pytest.approx(before["nash_conv"], abs=1e-9)
    assert [row["oracle_gain_share"] <= 0.01 for row in rows[-6:]] == [False] + [True] * 5  # patience 5


def test_openspiel_declares_chance_and_simultaneous_moves() -> None:
    kuhn = measure(OpenSpielEnv(game="kuhn_poker"))
    assert (kuhn.has_chance, kuhn.simultaneous, kuhn.terminal_rewards, kuhn.num_actions) == (True, False, True, 2)
    assert 2.0 <= kuhn.episode_steps <= 3.0  # two or three bets
    goofspiel = measure(OpenSpielEnv(game="goofspiel", game_params={"num_cards": 4}))
    assert goofspiel.simultaneous and goofspiel.episode_steps == 6.0  # 3 bids each (the 4th is forced)
    assert not kuhn.long_deterministic and not goofspiel.long_deterministic
