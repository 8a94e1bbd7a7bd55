"""``benchmarks/marl.py``: ``--param`` and ``--first-seed`` reach the runs, and bad input
stops it with one line before any run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("popmarl_torchrl")
pytest.importorskip("mpe2")

SCRIPT = Path(__file__).parents[3] / "benchmarks" / "marl.py"


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def test_params_and_seeds_reach_the_runs() -> None:
    done = run("--env-steps", "300", "--iterations", "1", "--seeds", "2", "--first-seed", "5", "--tasks", "spread",
               "--algorithms", "ppo,mappo", "--param", "ppo:clip=0.1", "--param", "mappo:critic_lr=0.001",
               "--eval-episodes", "2", "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("params: ppo {") and "seeds [5, 6]" in lines[0]
    out = json.loads(lines[-1])
    assert out["seeds"] == [5, 6]
    assert out["params"]["ppo"]["clip"] == 0.1 and out["params"]["ppo"]["epochs"] == 6  # over the recipe
    assert out["params"]["mappo"] == {"critic_lr": 0.001}
    for algorithm in ("ppo", "mappo"):
        row = out[f"spread/{algorithm}"]
        assert row["seed"] == [5, 6]  # the runs' own configs' seeds
        assert len(row["team"]) == 2 and all(steps >= 300 for steps in row["env_steps"])


@pytest.mark.parametrize(("args", "message"), [
    (["--param", "ppo:clip"], "--param ppo: expected KEY=VALUE, got 'clip'"),
    (["--param", "clip=0.1"], "--param: expected ALGORITHM:KEY=VALUE with ALGORITHM one of ppo, mappo, got 'clip=0.1'"),
    (["--param", "mappo:foo=1"], "algorithm.params.foo: unknown key; allowed: lr,"),
    (["--param", "ppo:clip=-1"], "algorithm.params.clip"),
    (["--algorithms", "ppo,maddpg"], "--algorithms: unknown maddpg; allowed: ppo, dqn, mappo, vdn, qmix"),
    (["--seeds", "0"], "--seeds: must be at least 1"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    done = run("--tasks", "spread", "--algorithms", "ppo,mappo", *args, timeout=900)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
