"""A ``marl`` team of ``mappo`` or ``qmix`` killed with SIGKILL at a random point and
continued with ``--resume`` ends exactly as an uninterrupted run: the team learner's
whole state (critic or mixer, target networks, value normaliser, replay buffer, Adam,
ε schedule, counters and generators) is checkpointed with each iteration and restored."""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from torchrl_helpers import SPEAKER_LISTENER, marl_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "core"))
from core_helpers import read_metrics, read_npz, read_summary, without_times  # noqa: E402

ITERATIONS = 6
SEED = int(os.environ.get("POPMARL_TEST_KILL_SEED", random.SystemRandom().randrange(1 << 30)))


def _wait_for_lines(metrics: Path, count: int, proc: Any) -> None:
    deadline = time.monotonic() + 120
    while not metrics.exists() or metrics.read_bytes().count(b"\n") < count:
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, f"{metrics} never reached {count} lines"
        time.sleep(0.002)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["mappo", "qmix"])
def test_a_killed_and_resumed_team_equals_an_uninterrupted_run(algorithm: str, tmp_path: Path, run_cli: Any,
                                                               popen_cli: Any) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(marl_config(algorithm, SPEAKER_LISTENER, iterations=ITERATIONS, env_steps=400,
                                                 seed=5)))
    straight = run_cli("run", config, "--out", "straight", timeout=300)
    assert straight.returncode == 0, straight
    reference = tmp_path / "straight"
    learned = read_metrics(reference)
    key = "train/speaker_0/gradient_steps"
    assert learned[-1][key] > learned[1][key] > 0  # the team learner carries on across iterations

    rng = random.Random(f"{SEED}-{algorithm}")
    run = tmp_path / "killed"
    iteration_s = float(read_summary(reference)["wall_time_s"]) / ITERATIONS
    proc = popen_cli("run", config, "--out", run)
    try:
        _wait_for_lines(run / "metrics.jsonl", rng.randint(1, ITERATIONS - 2), proc)
        time.sleep(rng.uniform(0, min(0.3, iteration_s)))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    context = f"{algorithm}, POPMARL_TEST_KILL_SEED={SEED}"
    assert proc.returncode == -signal.SIGKILL, context
    assert len(read_metrics(run)) < ITERATIONS, context

    resumed = run_cli("run", config, "--resume", run, timeout=300)
    assert resumed.returncode == 0, f"{context}\n{resumed}"
    assert [without_times(m) for m in read_metrics(run)] == [without_times(m) for m in learned], context
    assert without_times(read_summary(run)) == without_times(read_summary(reference)), context
    for population in ("speaker_0", "listener_0"):
        last = f"checkpoints/policies/{population}/{ITERATIONS}.npz"
        mine, theirs = read_npz(run / last), read_npz(reference / last)
        assert sorted(mine) == sorted(theirs)
        assert all(np.array_equal(mine[k], theirs[k]) for k in mine), f"{context}: {last} differs"
