"""Params that follow the env (issue 35): ``dqn``'s ``gamma`` and ``n_step`` from the
traits random play measures (:mod:`popmarl.env_traits`), filled where the config leaves
them unset, said in the run's log, and never over a value the config sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import popmarl
import pytest
import yaml
from popmarl.config import ComponentConfig
from popmarl.env_traits import measure
from popmarl.runner import with_env_defaults
from popmarl_pettingzoo.env import PettingZooEnv

pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")

CONNECT_FOUR = {"module": "pettingzoo.classic.connect_four_v3"}
TICTACTOE = {"module": "pettingzoo.classic.tictactoe_v3"}


def test_connect_four_is_a_long_turn_based_game_without_chance_and_tictactoe_is_not() -> None:
    four, three = measure(PettingZooEnv(**CONNECT_FOUR)), measure(PettingZooEnv(**TICTACTOE))
    assert (four.simultaneous, four.has_chance, four.terminal_rewards, four.num_actions) == (False, False, True, 7)
    assert 18 < four.episode_steps < 24 and four.long_deterministic  # random play: ~21 moves
    assert 7 < three.episode_steps < 8 and not three.long_deterministic
    rps = measure(PettingZooEnv(module="pettingzoo.classic.rps_v2"))  # a Parallel env: seats asked at once
    assert rps.simultaneous and not rps.terminal_rewards and not rps.long_deterministic


def test_unset_params_follow_the_env_and_set_ones_win() -> None:
    unset = {"p": ComponentConfig(name="dqn", params={"gamma": None, "n_step": None, "lr": 0.01})}
    four = with_env_defaults(unset, PettingZooEnv(**CONNECT_FOUR))["p"].params
    assert (four["gamma"], four["n_step"], four["lr"]) == (0.95, 3, 0.01)
    three = with_env_defaults(unset, PettingZooEnv(**TICTACTOE))["p"].params
    assert (three["gamma"], three["n_step"]) == (1.0, 1)
    given = {"p": ComponentConfig(name="dqn", params={"gamma": 0.5, "n_step": None})}
    assert with_env_defaults(given, PettingZooEnv(**CONNECT_FOUR))["p"].params == {"gamma": 0.5, "n_step": 3}


def test_a_run_says_what_it_filled_and_saves_the_config_as_written(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config: dict[str, Any] = {"scenario": "psro", "env": {"name": "pettingzoo", "params": CONNECT_FOUR},
                              "algorithm": {"name": "dqn", "params": {"hidden": [16]}}, "solver": "uniform",
                              "training": {"max_env_steps": 300}, "stopping": {"max_iterations": 1},
                              "trackers": []}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    popmarl.run(popmarl.load_config(str(path)), out=str(tmp_path / "run"))
    out = capsys.readouterr().out
    assert "popmarl: dqn (player_0, player_1): gamma 0.95, n_step 3, from the env (2 seats, no chance, turn-based" in out
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["algorithm"]["params"]["gamma"] is None  # resolved again, the same, on --resume
