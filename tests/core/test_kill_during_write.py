"""Reliability: a process killed in the middle of writing any checkpoint file (policy,
iteration arrays, state, payoff table) loses at most the current iteration, leaves
nothing corrupt, and ``--resume`` ends exactly like an uninterrupted run.

The kill is injected at the N-th atomic file write: half of the bytes go to the
temporary file, then the process dies with ``os._exit`` as SIGKILL would leave it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.run_files import assert_same_arrays, read_metrics, read_npz, read_summary, without_times

CONFIG = {"env": {"params": {"game": "random_general_sum", "size": 12, "seed": 3}},
          "stopping": {"max_iterations": 6}}

#: Runs the CLI with popmarl.data.atomic.write_bytes dying at its N-th call (N from argv).
DIE_AT_WRITE = """
import os, sys
import popmarl.data.atomic as atomic
from popmarl.cli import main
die_at, calls = int(sys.argv[1]), [0]
real = atomic.write_bytes
def dying(path, data):
    calls[0] += 1
    if calls[0] == die_at:
        with open(f"{path}.partial-tmp", "wb") as f:
            f.write(data[: len(data) // 2])
        os._exit(137)
    real(path, data)
atomic.write_bytes = dying
sys.exit(main(sys.argv[2:]))
"""


def _writes_of_a_full_run(tmp_path: Path, config: Path) -> int:
    code = DIE_AT_WRITE.replace("os._exit(137)", "pass").replace(
        "sys.exit(main(sys.argv[2:]))", "status = main(sys.argv[2:]); print(calls[0]); sys.exit(status)")
    out = subprocess.run([sys.executable, "-c", code, "0", "run", str(config), "--out", str(tmp_path / "count")],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def reference(tmp_path_factory, config_writer, cli):
    root = tmp_path_factory.mktemp("reference")
    config = config_writer(root, **CONFIG)
    result = cli.run("run", config, "--out", root / "run", cwd=root)
    assert result.returncode == 0, result
    return root, config


def test_a_kill_during_any_file_write_loses_at_most_an_iteration(reference, tmp_path: Path, run_cli) -> None:
    root, config = reference
    total = _writes_of_a_full_run(tmp_path, config)
    # Every write of the first checkpoint and of one middle iteration, then a spread of others.
    per_iteration = max(1, (total - 1) // (CONFIG["stopping"]["max_iterations"] + 1))
    points = sorted({*range(1, 2 + per_iteration), *range(total // 2, total // 2 + per_iteration + 1),
                     total - 2, total - 1})
    assert len(points) >= 5
    for n in points:
        run = tmp_path / f"killed-at-{n}"
        died = subprocess.run([sys.executable, "-c", DIE_AT_WRITE, str(n), "run", str(config), "--out", str(run)],
                              capture_output=True, text=True, timeout=900)
        assert died.returncode == 137, f"write {n} of {total}: {died.stderr}"
        for name in ("summary.json", "checkpoints/state.json"):  # whatever exists must parse
            if (run / name).exists():
                json.loads((run / name).read_text())
        # Killed while writing config.yaml, nothing was done yet: the same --out starts it.
        again = ("--resume", run) if (run / "config.yaml").exists() else ("--out", run)
        resumed = run_cli("run", config, *again)
        assert resumed.returncode == 0, f"write {n} of {total}: {resumed}"
        assert without_times(read_summary(run)) == without_times(read_summary(root / "run")), n
        assert_same_arrays(read_npz(run / "payoffs.npz"), read_npz(root / "run" / "payoffs.npz"))
        assert [m["iteration"] for m in read_metrics(run)] == [1, 2, 3, 4, 5, 6], n
