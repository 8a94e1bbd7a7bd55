"""Defaults that adapt to the game (issue 35): the best-response budget that follows
learning (:class:`popmarl.config.schema.TrainingConfig`), the stopping conditions of a run that
sets none (:class:`popmarl.config.schema.StoppingConfig`, PSRO's convergence rule), and the
env's traits they read (:mod:`popmarl.interfaces.env_traits`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import popmarl
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.config.schema import (AUTO_MAX_ENV_STEPS, AUTO_MIN_ENV_STEPS, AUTO_PATIENCE, DEFAULT_MAX_WALL_TIME_S,
                            ROUND_ENV_STEPS, StoppingConfig, TrainingConfig)
from popmarl.data.tasks import TrainBudget
from popmarl.interfaces.env_traits import measure
from popmarl.gametheory.metagame import new_strategy_gains


def test_no_budget_key_trains_until_a_plateau_scaled_by_the_games_length() -> None:
    short = TrainingConfig().budget(episode_steps=2.0)
    assert (short.min_env_steps, short.max_env_steps, short.patience) == (AUTO_MIN_ENV_STEPS, AUTO_MAX_ENV_STEPS,
                                                                          AUTO_PATIENCE)
    long = TrainingConfig().budget(episode_steps=21.0)
    assert (long.min_env_steps, long.max_env_steps) == (105_000, 525_000)


def test_a_budget_key_is_the_budget_as_given() -> None:
    capped = TrainingConfig(max_env_steps=20_000).budget(episode_steps=21.0)
    assert (capped.max_env_steps, capped.min_env_steps, capped.patience) == (20_000, None, None)
    by_episodes = TrainingConfig(max_episodes=100).budget()
    assert (by_episodes.max_env_steps, by_episodes.max_episodes, by_episodes.patience) == (None, 100, None)
    plateau = TrainingConfig(patience=5).budget(episode_steps=2.0)  # no cap given: the default cap
    assert (plateau.patience, plateau.min_env_steps, plateau.max_env_steps) == (5, None, AUTO_MAX_ENV_STEPS)
    floor = TrainingConfig(min_env_steps=500_000, patience=2).budget()
    assert floor.max_env_steps == 500_000
    assert TrainingConfig().round_env_steps == ROUND_ENV_STEPS
    assert TrainingConfig(max_env_steps=7).round_env_steps == 7


def test_stopping_defaults_apply_only_where_nothing_is_set() -> None:
    psro_default = StoppingConfig(patience=5, max_wall_time_s=DEFAULT_MAX_WALL_TIME_S)
    assert StoppingConfig().with_defaults(psro_default) == psro_default
    assert StoppingConfig(max_iterations=4).with_defaults(psro_default) == StoppingConfig(max_iterations=4)
    # a target alone gets the wall-clock cap, not the default's other conditions
    assert StoppingConfig(target_nash_conv=0.1).with_defaults(psro_default) == StoppingConfig(
        target_nash_conv=0.1, max_wall_time_s=DEFAULT_MAX_WALL_TIME_S)


def test_new_strategy_gains_are_the_new_policies_regrets_against_the_old_meta_strategy() -> None:
    rps = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
    payoffs = np.stack([rps, -rps])  # [2, 3, 3]
    # the old game: rock against rock; paper and scissors are new to both players
    gains = new_strategy_gains(payoffs, [np.array([1.0]), np.array([1.0])])
    assert gains.tolist() == [1.0, 1.0]  # paper beats rock
    # against uniform over all three, nothing new gains
    assert np.allclose(new_strategy_gains(payoffs, [np.ones(3) / 3, np.ones(3) / 3]), 0.0)


def _psro_config(tmp_path: Path, **extra: Any) -> Path:
    import yaml

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"scenario": "psro", "env": {"name": "matrix", "params": {"game": "prisoners_dilemma"}},
                                    "algorithm": "exact_matrix_br", "solver": "latest", "trackers": ["jsonl"], **extra}))
    return path


def test_psro_with_no_stopping_block_stops_once_its_meta_game_converged(tmp_path: Path) -> None:
    summary = popmarl.run(popmarl.load_config(str(_psro_config(tmp_path))), out=str(tmp_path / "run"))
    assert summary["stop_reason"] == "converged"
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    shares = [row["oracle_gain_share"] for row in rows]
    assert all(s <= 0.01 for s in shares[-5:]) and any(s > 0.01 for s in shares[:-5])  # patience 5
    assert len(rows) == summary["iterations"] < 10
    assert summary["nash_conv"] == pytest.approx(0.0, abs=1e-6)


def test_psro_with_a_stopping_block_keeps_to_it(tmp_path: Path) -> None:
    config = _psro_config(tmp_path, stopping={"max_iterations": 12})
    summary = popmarl.run(popmarl.load_config(str(config)), out=str(tmp_path / "run"))
    assert (summary["stop_reason"], summary["iterations"]) == ("max_iterations", 12)


def test_traits_of_a_simultaneous_matrix_game_measured_by_random_play() -> None:
    traits = measure(MatrixEnv(game="rps"))
    assert (traits.seats, traits.simultaneous, traits.has_chance, traits.num_actions) == (2, True, False, 3)
    assert traits.episode_steps == 2.0 and traits.terminal_rewards and not traits.long_deterministic


def test_traits_are_measured_once_per_env_object_even_an_unhashable_one() -> None:
    from popmarl.interfaces.env_traits import traits_of

    class Unhashable(MatrixEnv):
        __hash__ = None  # type: ignore[assignment]  # as an attrs class with eq would be

    env = Unhashable(game="rps")
    assert traits_of(env) is traits_of(env)
    assert traits_of(MatrixEnv(game="rps")) == traits_of(env)


def test_the_training_keys_a_config_sets_are_those_off_their_default() -> None:
    """``self_play: 0.0`` is set (to no self-play): a marl or league run refuses it like
    any other psro-only key."""
    keys = ("self_play", "opponent_epsilon", "keep")
    assert TrainingConfig().given(keys) == []
    assert TrainingConfig(self_play=0.0).given(keys) == ["self_play"]
    assert TrainingConfig(self_play=0.5, keep="best").given(keys) == ["self_play", "keep"]
    assert TrainingConfig().budget(self_play=0.5).self_play == 0.5  # unset: the env's default ...
    assert TrainingConfig(self_play=0.0).budget(self_play=0.5).self_play == 0.0  # ... set: the config's


#: Training configs a marl run accepts: every key it reads, set or not.
MARL_CONFIGS = [TrainingConfig(), TrainingConfig(max_env_steps=3_000), TrainingConfig(max_episodes=40),
                TrainingConfig(max_wall_time_s=2.5, episodes_per_update=16),
                TrainingConfig(max_env_steps=500, max_episodes=9, max_wall_time_s=1.0, episodes_per_update=4)]
#: A league reads opponent_epsilon too.
LEAGUE_CONFIGS = [*MARL_CONFIGS, TrainingConfig(opponent_epsilon=0.2)]


@pytest.mark.parametrize("training", MARL_CONFIGS)
def test_a_marl_iteration_budget_is_the_rounds_env_steps_and_the_configs_limits(training: TrainingConfig) -> None:
    """What marl built by hand: the round's env steps, the config's other limits and update
    size, nothing that follows learning."""
    by_hand = TrainBudget(max_env_steps=training.round_env_steps, max_episodes=training.max_episodes,
                          max_wall_time_s=training.max_wall_time_s, episodes_per_update=training.episodes_per_update)
    assert training.budget(follows_learning=False, max_env_steps=training.round_env_steps) == by_hand


@pytest.mark.parametrize("training", LEAGUE_CONFIGS)
@pytest.mark.parametrize("algorithm_epsilon", [0.0, 0.3])
def test_a_league_round_budget_is_its_steps_with_no_plateau_rule(training: TrainingConfig,
                                                                 algorithm_epsilon: float) -> None:
    """What league built: the budget that follows learning with the round's env steps and
    its plateau rule taken out."""
    steps = 1_234
    evolved = attrs.evolve(training.budget(algorithm_epsilon), max_env_steps=steps, min_env_steps=None, patience=None)
    assert training.budget(algorithm_epsilon, follows_learning=False, max_env_steps=steps) == evolved


def test_a_budget_that_does_not_follow_learning_is_the_configs_as_given() -> None:
    fixed = TrainingConfig().budget(episode_steps=21.0, follows_learning=False)
    assert (fixed.max_env_steps, fixed.min_env_steps, fixed.patience) == (None, None, None)
    both = TrainingConfig().budget(episode_steps=2.0, max_env_steps=7)  # following learning, a run's own length
    assert (both.max_env_steps, both.min_env_steps, both.patience) == (7, AUTO_MIN_ENV_STEPS, AUTO_PATIENCE)
    kept = TrainingConfig(max_env_steps=9, patience=2, min_env_steps=4).budget(follows_learning=False)
    assert (kept.max_env_steps, kept.min_env_steps, kept.patience) == (9, 4, 2)


@pytest.mark.parametrize("training", [*LEAGUE_CONFIGS, TrainingConfig(self_play=0.5, keep="best", target_win_rate=0.9),
                                      TrainingConfig(patience=3, min_env_steps=10, window=20, max_episodes=5)])
def test_an_exploit_response_budget_is_its_env_steps_in_the_runs_update_rounds(training: TrainingConfig) -> None:
    """What exploit built by hand: whatever the run's training config, a response trains
    for its env steps exactly."""
    from popmarl.tools.exploit import response_budget

    by_hand = TrainBudget(max_env_steps=9_000, episodes_per_update=training.episodes_per_update,
                          window=training.window)
    assert response_budget(training, 9_000) == by_hand
