"""A ``marl`` team of ``mappo`` or ``qmix`` killed with SIGKILL at a random point and
continued with ``--resume`` ends exactly as an uninterrupted run: the team learner's
whole state (critic or mixer, target networks, value normaliser, replay buffer, Adam,
ε schedule, counters and generators) is checkpointed with each iteration and restored."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from testkit.team_configs import SPEAKER_LISTENER, marl_config

from testkit.run_files import assert_same_run, kill_at_random, read_metrics, read_npz

ITERATIONS = 6
SEED = int(os.environ.get("POPMARL_TEST_KILL_SEED", random.SystemRandom().randrange(1 << 30)))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["mappo", "qmix"])
def test_a_killed_and_resumed_team_equals_an_uninterrupted_run(algorithm: str, tmp_path: Path, run_cli: Any,
                                                               popen_cli: Any) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(marl_config(algorithm, SPEAKER_LISTENER, iterations=ITERATIONS, env_steps=400,
                                                 seed=5)))
    straight = run_cli("run", config, "--out", "straight", timeout=900)
    assert straight.returncode == 0, straight
    reference = tmp_path / "straight"
    learned = read_metrics(reference)
    key = "train/speaker_0/gradient_steps"
    assert learned[-1][key] > learned[1][key] > 0  # the team learner carries on across iterations

    rng = random.Random(f"{SEED}-{algorithm}")
    run = tmp_path / "killed"
    kill_at_random(popen_cli("run", config, "--out", run), run, reference, rng, iterations=ITERATIONS, spare=2)
    context = f"{algorithm}, POPMARL_TEST_KILL_SEED={SEED}"
    assert len(read_metrics(run)) < ITERATIONS, context

    resumed = run_cli("run", config, "--resume", run, timeout=900)
    assert resumed.returncode == 0, f"{context}\n{resumed}"
    assert_same_run(run, reference, context)
    for population in ("speaker_0", "listener_0"):
        last = f"checkpoints/policies/{population}/{ITERATIONS}.npz"
        mine, theirs = read_npz(run / last), read_npz(reference / last)
        assert sorted(mine) == sorted(theirs)
        assert all(np.array_equal(mine[k], theirs[k]) for k in mine), f"{context}: {last} differs"
