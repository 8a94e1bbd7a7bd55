"""Reading, comparing and interrupting run directories: helpers of the core tests and of plugin tests that check the same (fixtures are in conftest.py)."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Summary keys that measure time, so differ between otherwise identical runs.
TIME_KEYS = ("wall_time_s",)


def read_summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "summary.json").read_text(encoding="utf-8"))


def without_times(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary (or metrics line) minus everything measured in seconds."""
    return {k: v for k, v in summary.items() if k not in TIME_KEYS and not k.endswith("_s") and k != "steps_per_s"}


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    text = (Path(run_dir) / "metrics.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, refusing pickles (raises on an object array)."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def assert_same_arrays(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def tree_digest(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root`` (empty if it does not exist)."""
    root = Path(root)
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def brute_force_payoffs(tensor: np.ndarray, mixtures: Sequence[np.ndarray]) -> np.ndarray:
    """Each player's expected payoff, summing over every pure profile (no tensor algebra)."""
    n = tensor.shape[0]
    values = np.zeros(n)
    for profile in itertools.product(*(range(len(m)) for m in mixtures)):
        weight = 1.0
        for k, action in enumerate(profile):
            weight *= mixtures[k][action]
        for k in range(n):
            values[k] += weight * tensor[(k, *profile)]
    return values


def brute_force_nash_conv(tensor: np.ndarray, mixtures: Sequence[np.ndarray]) -> float:
    """Sum over players of (best pure deviation - current value), by enumeration."""
    current = brute_force_payoffs(tensor, mixtures)
    total = 0.0
    for k in range(tensor.shape[0]):
        best = -np.inf
        for action in range(len(mixtures[k])):
            pure = np.zeros(len(mixtures[k]))
            pure[action] = 1.0
            deviated = [pure if j == k else m for j, m in enumerate(mixtures)]
            best = max(best, brute_force_payoffs(tensor, deviated)[k])
        total += best - current[k]
    return float(total)


def collapsed_strategies(run_dir: Path, summary: Mapping[str, Any], agents: Sequence[str]) -> list[np.ndarray]:
    """Each agent's meta-strategy collapsed to a mixed strategy over actions, from the
    saved policy weights (``checkpoints/policies/<population>/<i>.npz``, key ``probs``)."""
    config_mapping = {a: a for a in agents}  # per_player: population name == agent name
    result = []
    for agent in agents:
        population = config_mapping[agent]
        info = summary["populations"][population]
        mixture = np.asarray(summary["meta_strategies"][agent])
        strategy = 0.0
        for policy_id, weight in zip(info["policies"], mixture):
            pop, index = policy_id.rsplit("/", 1)
            probs = read_npz(Path(run_dir) / "checkpoints" / "policies" / pop / f"{index}.npz")["probs"]
            strategy = strategy + weight * probs
        result.append(np.asarray(strategy))
    return result


def kill_during(proc: subprocess.Popen[str], metrics: Path, lines: int, sleep_s: float,
                timeout_s: float = 300) -> None:
    """Wait until the run ``proc`` writes its ``lines``-th metrics line (it must still be
    running), ``sleep_s`` more, then kill its process group with SIGKILL."""
    try:
        deadline = time.monotonic() + timeout_s
        while not metrics.exists() or metrics.read_bytes().count(b"\n") < lines:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, f"{metrics} never reached {lines} lines"
            time.sleep(0.002)
        time.sleep(sleep_s)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL


def kill_at_random(proc: subprocess.Popen[str], run: Path, reference: Path, rng: random.Random, *,
                   iterations: int, spare: int = 3) -> None:
    """Kill the run ``proc`` (writing ``run``) with SIGKILL at a moment drawn from ``rng``:
    after one of its first ``iterations - spare`` metrics lines, then up to 0.3 s or the
    next iteration's time in ``reference`` (the same run, uninterrupted, of ``iterations``)
    more. The next iteration's own time, not the mean: a first iteration that carries the
    start-up would let the mean span several short ones, and the run could end unkilled."""
    lines = rng.randint(1, iterations - spare)
    wall = [float(m["wall_time_s"]) for m in read_metrics(reference)]
    kill_during(proc, run / "metrics.jsonl", lines, rng.uniform(0, min(0.3, wall[lines] - wall[lines - 1])))


def assert_same_run(run: Path, reference: Path, context: str) -> None:
    """``run`` wrote the metrics lines and summary ``reference`` did, times aside."""
    assert [without_times(m) for m in read_metrics(run)] == [without_times(m) for m in read_metrics(reference)], context
    assert without_times(read_summary(run)) == without_times(read_summary(reference)), context
