"""Short PSRO runs (core ``random`` oracle, ``uniform`` solver, sampled evaluation) on
real PettingZoo envs, through ``popmarl.run`` like a user's config file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import popmarl
import pytest

from pz_guards import Ledger

pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")

WriteConfig = Callable[..., Path]

#: name -> (env params, agents.mapping, expected populations, zero-sum)
RUNS: dict[str, tuple[dict[str, Any], Any, set[str], bool]] = {
    "tictactoe": ({"module": "pz_guard:tictactoe"}, "per_player", {"player_1", "player_2"}, True),
    "connect_four": ({"module": "pz_guard:connect_four"}, "per_player", {"player_0", "player_1"}, True),
    "leduc": ({"module": "pz_guard:leduc"}, "per_player", {"player_0", "player_1"}, True),
    "rps_parallel": ({"module": "pz_guard:rps", "kwargs": {"max_cycles": 3}}, "per_player",
                     {"player_0", "player_1"}, True),
    "spread_discrete": ({"module": "pz_guard:spread", "kwargs": {"N": 2, "max_cycles": 5}}, "shared",
                        {"shared"}, False),
    # Box actions; agents mapped by regex. 8 episodes per entry on 4 games keeps every
    # slot busy until the end; test_box_actions_with_idle_games covers idle games.
    "adversary_box": ({"module": "pz_guard:adversary", "kwargs": {"max_cycles": 5, "continuous_actions": True}},
                      {"adversary_.*": "adversaries", "agent_.*": "good"}, {"adversaries", "good"}, False),
    # Agents die (line_death) and leave while the other plays on.
    "kaz_leaving": ({"module": "pz_guard:kaz", "kwargs": {"num_archers": 1, "num_knights": 1, "line_death": True,
                                                         "max_cycles": 30}},
                    "per_player", {"archer_0", "knight_0"}, False),
}


def _run(write_config: WriteConfig, tmp_path: Path, env: dict[str, Any], mapping: Any = "per_player",
         **overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "env": {"name": "pettingzoo", "params": {"game": None, **env}},  # game: the base config's matrix param
        "agents": {"mapping": mapping},
        "algorithm": {"name": "random"},
        "solver": {"name": "uniform"},
        "evaluation": {"episodes_per_entry": 8, "num_envs": 4},
        "stopping": {"max_iterations": 2},
    }
    config = write_config(**{**settings, **overrides})
    return popmarl.run(popmarl.load_config(config), out=str(tmp_path / "run"))


@pytest.mark.parametrize("name", list(RUNS))
def test_psro_run(name: str, write_config: WriteConfig, tmp_path: Path, ledger: Ledger) -> None:
    params, mapping, populations, zero_sum = RUNS[name]
    fewer = {"evaluation": {"episodes_per_entry": 4, "num_envs": 4}} if name == "kaz_leaving" else {}
    summary = _run(write_config, tmp_path, params, mapping, **fewer)
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert set(summary["populations"]) == populations
    assert all(len(p["policies"]) == 3 for p in summary["populations"].values())
    assert summary["env_steps"] > 0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "completed"
    with np.load(tmp_path / "run" / "payoffs.npz") as data:
        payoffs, filled = data["payoffs"], data["filled"]
    assert filled.all() and np.isfinite(payoffs).all()
    if zero_sum:
        np.testing.assert_allclose(payoffs.sum(axis=0), 0.0, atol=1e-9)
    assert ledger.violations == []
    episodes = ledger.episodes()
    assert episodes, "the guarded env played no episode"
    if name == "kaz_leaving":
        assert ledger.left_early > 0


def test_payoffs_are_the_env_returns_averaged(write_config: WriteConfig, tmp_path: Path, ledger: Ledger) -> None:
    """One entry, one game: the table holds the mean of the env's own episode totals."""
    summary = _run(write_config, tmp_path, {"module": "pz_guard:leduc"}, stopping={"max_iterations": 0},
                   evaluation={"episodes_per_entry": 12, "num_envs": 1})
    assert summary["iterations"] == 0
    with np.load(tmp_path / "run" / "payoffs.npz") as data:
        payoffs = data["payoffs"]
    (game,) = [g for g in ledger.instances if g.episodes]  # the probe plays none
    totals = np.array([[e[0][a] for a in ("player_0", "player_1")] for e in game.episodes[:12]])
    np.testing.assert_allclose(payoffs[:, 0, 0], totals.mean(axis=0))


def test_agents_with_different_spaces_in_one_population_is_a_config_error(
        write_config: WriteConfig, tmp_path: Path) -> None:
    with pytest.raises(popmarl.ConfigError) as error:
        _run(write_config, tmp_path, {"module": "mpe2.simple_adversary_v3"}, mapping="shared")
    message = str(error.value)
    assert message.startswith("agents.mapping:") and "adversary_0" in message and "spaces differ" in message
    assert not (tmp_path / "run").exists()


def test_box_actions_with_idle_games(write_config: WriteConfig, tmp_path: Path) -> None:
    summary = _run(write_config, tmp_path, {"module": "mpe2.simple_spread_v3",
                                            "kwargs": {"N": 2, "max_cycles": 3, "continuous_actions": True}},
                   mapping="shared", evaluation={"episodes_per_entry": 3, "num_envs": 4})
    assert summary["status"] == "completed"


def test_has_chance_is_the_games_word_and_turns_off_the_default_opponent_exploration() -> None:
    """PettingZoo cannot tell whether chance plays; ``has_chance`` says so, and a ``psro``
    best response of ``dqn`` (opponent exploration 0.3 by default) then gets none."""
    pytest.importorskip("popmarl_tianshou")
    from popmarl.interfaces.algorithm import opponent_exploration
    from popmarl.config.schema import ComponentConfig
    from popmarl.runs.runner import build

    dqn = build("algorithms", ComponentConfig(name="dqn"), "algorithm.params")
    params = {"module": "pettingzoo.classic.tictactoe_v3"}
    board = build("envs", ComponentConfig(name="pettingzoo", params=params), "env.params")
    dice = build("envs", ComponentConfig(name="pettingzoo", params={**params, "has_chance": True}), "env.params")
    assert (board.has_chance, dice.has_chance) == (False, True)
    assert (opponent_exploration(dqn, board), opponent_exploration(dqn, dice)) == (0.3, 0.0)
