"""A ``marl`` run of learning algorithms killed with SIGKILL at a random point and
continued with ``--resume`` ends exactly as an uninterrupted run: the learners' whole
state (optimiser, replay buffer, ε schedule, counters, random generators) is
checkpointed with each iteration and restored, not only their weights."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import pytest

from testkit.run_files import assert_same_run, kill_at_random, read_metrics, read_npz

ITERATIONS = 10
SEED = int(os.environ.get("POPMARL_TEST_KILL_SEED", random.SystemRandom().randrange(1 << 30)))
ALGORITHMS: dict[str, dict[str, Any]] = {
    "dqn": {"name": "dqn", "params": {"hidden": [32], "learning_starts": 64, "batch_size": 32,
                                      "eps_decay_steps": 2_000, "target_update_freq": 20}},
    "ppo": {"name": "ppo", "params": {"hidden": [32], "batch_size": 64, "epochs": 2}},
}


def _config(algorithm: str) -> dict[str, Any]:
    return {
        "scenario": "marl", "seed": 3,
        "env": {"name": "openspiel", "params": {"game": "kuhn_poker"}},
        "algorithm": ALGORITHMS[algorithm], "solver": None,
        "stopping": {"max_iterations": ITERATIONS},
        "training": {"max_env_steps": 600, "episodes_per_update": 32, "num_envs": 16},
        "evaluation": {"episodes_per_entry": 50, "exact": "never"},
    }


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_marl_killed_and_resumed_equals_an_uninterrupted_run(algorithm, tmp_path, write_config, run_cli,
                                                            popen_cli) -> None:
    config = write_config(**_config(algorithm))
    straight = run_cli("run", config, "--out", "straight", timeout=600)
    assert straight.returncode == 0, straight
    reference = tmp_path / "straight"
    learned = read_metrics(reference)
    # The learners carry on across iterations (the quantities a weights-only resume reset).
    key = "train/player_0/gradient_steps"
    assert learned[-1][key] > learned[0][key] > 0

    rng = random.Random(f"{SEED}-{algorithm}")
    run = tmp_path / "killed"
    # A random point within the next iteration (as long as one took the uninterrupted run):
    # a longer wait could let a fast run finish before the kill.
    kill_at_random(popen_cli("run", config, "--out", run), run, reference, rng, iterations=ITERATIONS)
    context = f"{algorithm}, POPMARL_TEST_KILL_SEED={SEED}"
    assert len(read_metrics(run)) < ITERATIONS, context

    resumed = run_cli("run", config, "--resume", run, timeout=600)
    assert resumed.returncode == 0, f"{context}\n{resumed}"
    assert_same_run(run, reference, context)
    for population in ("player_0", "player_1"):
        last = f"checkpoints/policies/{population}/{ITERATIONS}.npz"
        mine, theirs = read_npz(run / last), read_npz(reference / last)
        assert sorted(mine) == sorted(theirs)
        assert all(np.array_equal(mine[k], theirs[k]) for k in mine), f"{context}: {last} differs"
