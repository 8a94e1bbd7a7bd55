"""``training.init``: how each new best response of ``psro`` starts (fresh, carrying on
the previous learner, or a fresh learner from the population's newest weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from popmarl.builtin.matrix_env import MatrixEnv
from testkit.run_files import read_metrics, read_npz
from learning_schedule import ScheduleAlgorithm

ROCK, PAPER, SCISSORS = np.eye(3)


@pytest.fixture
def with_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("schedule", ScheduleAlgorithm))


def run(tmp_path: Path, runner_in: Any, init: str) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
    # rock-paper-scissors; one update per best response, so all of a best response's
    # episodes are played by the weights it starts from. Iteration 1 (against the initial
    # rock) adds paper, whatever init says; in iteration 2 the meta-strategy is paper
    # (the newest policy, as Nash of the rock/paper meta-game would also say; the core
    # tests run without the solvers plugin).
    runner_in(tmp_path, init, algorithm={"name": "schedule", "params": {"schedule": [0, 1, 2]}},
              solver="latest", stopping={"max_iterations": 2},
              training={"max_env_steps": None, "max_episodes": 4, "episodes_per_update": 4, "init": init,
                        "opponent_epsilon": 0.0})
    policies = tmp_path / init / "checkpoints" / "policies" / "player_0"
    return [read_npz(policies / f"{k}.npz")["probs"] for k in (1, 2)], read_metrics(tmp_path / init)


@pytest.mark.parametrize(("init", "starts_with", "second", "return_2"), [
    ("fresh", "rock", PAPER, -1.0),            # a new learner: rock, one update to paper
    ("previous", "paper", SCISSORS, 0.0),      # carries on: paper, its second update to scissors
    ("newest_weights", "paper", PAPER, 0.0),   # paper's weights, a new trainer: one update to paper
])
def test_init_decides_the_weights_and_trainer_a_best_response_starts_with(
        tmp_path: Path, runner_in: Any, with_schedule: None, init: str, starts_with: str, second: np.ndarray,
        return_2: float) -> None:
    (first, last), metrics = run(tmp_path, runner_in, init)
    np.testing.assert_array_equal(first, PAPER)
    np.testing.assert_array_equal(last, second)
    # Against paper, the starting weights' games: rock loses them all, paper draws.
    assert metrics[1]["train/player_0/window_return"] == return_2, starts_with


class RandomOpponents(ScheduleAlgorithm):
    """The schedule learner, asking for opponents that always move at random."""

    opponent_epsilon = 1.0


def test_opponent_exploration_is_off_by_default_in_simultaneous_and_chance_games_and_the_config_overrides_it(
        tmp_path: Path, runner_in: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("schedule", RandomOpponents))
    runs = iter(range(100))

    def first_return(**training: Any) -> float:
        name = f"run{next(runs)}"
        runner_in(tmp_path, name, algorithm={"name": "schedule", "params": {"schedule": [0, 0, 0]}},
                  stopping={"max_iterations": 1},
                  training={"max_env_steps": None, "max_episodes": 64, "episodes_per_update": 64, "window": 64,
                            **training})
        return float(read_metrics(tmp_path / name)[0]["train/player_0/window_return"])

    # Rock against the initial policy's rock: all draws, unless the opponent's moves are random.
    # A matrix game is simultaneous: the algorithm's own exploration is not applied; the config's is.
    assert first_return(opponent_epsilon=0.0) == 0.0
    assert first_return() == 0.0
    assert first_return(opponent_epsilon=1.0) != 0.0
    # Nor where chance takes part (the algorithm's own applies in a turn-based game without
    # chance: tests/plugins/pettingzoo/test_runs.py).
    monkeypatch.setattr(MatrixEnv, "has_chance", True)
    assert first_return() == 0.0
    assert first_return(opponent_epsilon=1.0) != 0.0


class WarmStarted(ScheduleAlgorithm):
    """The schedule learner, noting the policies its new learners warm-start from."""

    warm: list[np.ndarray] = []

    def warm_start(self, policy: Any, *, seed: int) -> None:
        WarmStarted.warm.append(policy.probs.copy())


@pytest.mark.parametrize(("init", "warm_starts"), [("newest_weights", 4), ("fresh", 0), ("previous", 0)])
def test_only_learners_started_from_newest_weights_are_warm_started(
        tmp_path: Path, runner_in: Any, monkeypatch: pytest.MonkeyPatch, init: str, warm_starts: int) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("schedule", WarmStarted))
    monkeypatch.setattr(WarmStarted, "warm", [])
    runner_in(tmp_path, init, algorithm={"name": "schedule", "params": {"schedule": [0, 1, 2]}},
              solver="latest", stopping={"max_iterations": 3},
              training={"max_env_steps": None, "max_episodes": 4, "episodes_per_update": 4, "init": init,
                        "opponent_epsilon": 0.0})
    # Both populations' learners of iterations 2 and 3, from their newest policy (paper
    # after iteration 1); none in iteration 1, which starts fresh.
    assert len(WarmStarted.warm) == warm_starts
    if warm_starts:
        np.testing.assert_array_equal(WarmStarted.warm[0], PAPER)
