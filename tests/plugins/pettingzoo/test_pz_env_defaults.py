"""Params that follow the env (issue 35): ``dqn``'s ``lr``, ``gamma`` and ``n_step`` from
the traits random play measures (:mod:`popmarl.interfaces.env_traits`), filled where the config
leaves them unset, said in the run's log, and never over a value the config sets; and a
``psro`` best response's opponent exploration and self-play in a long turn-based game."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import popmarl
import pytest
import yaml
from popmarl.config.schema import ComponentConfig
from popmarl.interfaces.env_traits import measure
from popmarl.runs.runner import with_env_defaults
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
    assert (three["gamma"], three["n_step"], three["lr"]) == (1.0, 1, 0.01)
    given = {"p": ComponentConfig(name="dqn", params={"gamma": 0.5, "n_step": None})}
    assert with_env_defaults(given, PettingZooEnv(**CONNECT_FOUR))["p"].params == {
        "gamma": 0.5, "n_step": 3, "lr": 3e-4, "updates_per_step": 0.0625}
    assert with_env_defaults(given, PettingZooEnv(**TICTACTOE))["p"].params == {
        "gamma": 0.5, "n_step": 1, "lr": 1e-3, "updates_per_step": 0.03125}


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
    assert ("popmarl: dqn (player_0, player_1): lr 0.0003, gamma 0.95, n_step 3, updates_per_step 0.0625, from the env "
            "(2 seats, no chance, turn-based") in out
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["algorithm"]["params"]["gamma"] is None  # resolved again, the same, on --resume


@pytest.mark.parametrize(("training", "expected"), [
    ({}, (0.5, 0.5)),  # long and turn-based without chance: more opponent exploration, self-play
    ({"opponent_epsilon": 0.1, "self_play": 0.0}, (0.0, 0.1)),  # the config's values win
])
def test_a_connect_four_best_response_meets_random_moves_and_itself_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, training: dict[str, Any],
        expected: tuple[float, float]) -> None:
    """What a psro best response's games were played with (the rollout worker's arguments,
    recorded on their way through): its share of self-play and its opponents' exploration."""
    from popmarl.engine.rollout import RolloutWorker

    asked: list[tuple[float, float]] = []
    explore = RolloutWorker.explore

    def recording(self: RolloutWorker, **kwargs: Any) -> Any:
        asked.append((kwargs["self_play"], kwargs["opponent_epsilon"]))
        return explore(self, **kwargs)

    monkeypatch.setattr(RolloutWorker, "explore", recording)
    config: dict[str, Any] = {"scenario": "psro", "env": {"name": "pettingzoo", "params": CONNECT_FOUR},
                              "algorithm": {"name": "dqn", "params": {"hidden": [16]}}, "solver": "uniform",
                              "training": {"max_episodes": 64, "episodes_per_update": 32, "num_envs": 8, **training},
                              "stopping": {"max_iterations": 1}, "trackers": []}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    popmarl.run(popmarl.load_config(str(path)), out=str(tmp_path / "run"))
    assert len(asked) == 4 and set(asked) == {expected}  # two populations, two rounds each


def test_no_self_play_by_default_where_the_populations_spaces_differ_or_the_game_is_short() -> None:
    from popmarl.interfaces.algorithm import PolicySpace, default_self_play, opponent_exploration
    from popmarl.runs.runner import build
    from popmarl.interfaces.spaces import Box, Discrete

    four, three = PettingZooEnv(**CONNECT_FOUR), PettingZooEnv(**TICTACTOE)
    board = Box(low=0, high=1, shape=(84,))

    def space(name: str, actions: int) -> PolicySpace:
        return PolicySpace(population=name, agents=(name,), observation_space=board, action_space=Discrete(n=actions))

    same = [space("player_0", 7), space("player_1", 7)]
    assert (default_self_play(four, same), default_self_play(three, same)) == (0.5, 0.0)
    assert default_self_play(four, [space("player_0", 7), space("player_1", 6)]) == 0.0
    dqn = build("algorithms", ComponentConfig(name="dqn"), "algorithm.params")
    a2c = build("algorithms", ComponentConfig(name="a2c"), "algorithm.params")
    assert (opponent_exploration(dqn, four), opponent_exploration(dqn, three)) == (0.5, 0.3)
    assert opponent_exploration(a2c, four) == 0.0  # an algorithm that asks for none gets none
