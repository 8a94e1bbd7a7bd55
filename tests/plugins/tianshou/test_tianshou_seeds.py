"""Seeds of 64 bits (what :func:`popmarl.api.stream_seed` derives) and past them reach
every Tianshou algorithm's seeded parts: torch's generator, the replay buffer's and the
minibatch shuffling's ``RandomState`` (32 bits: they take :func:`popmarl.api.seed32`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tianshou_helpers import ALGORITHMS, algorithm, metrics, run_psro, train_against

import popmarl
from popmarl.builtin.matrix_env import MixedStrategyPolicy

#: The largest 64-bit seed, and one past 64 bits (a trainer's ``seed + 1`` stream of it).
BIG_SEEDS = (2**64 - 1, 2**64 + 5)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_training_with_seeds_of_64_bits_and_past_them(name: str) -> None:
    env = popmarl.envs.load("matrix")(game="rps")
    opponent = MixedStrategyPolicy(np.array([0.7, 0.0, 0.3]))
    params = {"learning_starts": 50, "batch_size": 16} if name == "dqn" else {}
    for seed in BIG_SEEDS:
        policy = train_against(env, algorithm(name, hidden=[8], **params), "player_0", {"player_1": [(opponent, 1.0)]},
                               steps=300, seed=seed)
        again = train_against(env, algorithm(name, hidden=[8], **params), "player_0", {"player_1": [(opponent, 1.0)]},
                              steps=300, seed=seed)
        first, second = policy.get_weights(), again.get_weights()
        assert first.keys() == second.keys()
        assert all(np.array_equal(first[k], second[k]) for k in first)  # the seed decides everything


def test_a_psro_run_seeded_past_2_63_trains(tmp_path: Path) -> None:
    """The run seed is the user's, of any size; the learners' and tasks' seeds derived
    from it take 64 bits."""
    summary, run_dir = run_psro(
        tmp_path, "dqn", seed=2**63 + 7, env={"name": "matrix", "params": {"game": "rps"}},
        algorithm={"name": "dqn", "params": {"hidden": [8], "learning_starts": 50, "batch_size": 16}},
        solver={"name": "uniform"}, stopping={"max_iterations": 1}, training={"max_env_steps": 300, "num_envs": 8})
    assert summary["status"] == "completed" and summary["seed"] == 2**63 + 7
    assert [r["iteration_env_steps"] > 0 for r in metrics(run_dir)] == [True]
