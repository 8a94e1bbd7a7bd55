"""Done-when: a run started in a subprocess is looked at while it runs (``show``, ``eval``,
``popmarl.load_run`` and ``show --follow`` answer from its last committed checkpoint and say
it is running), then killed with ``kill -9`` (they answer and say it was interrupted, with
the resume hint; ``--follow`` ends), then continued with ``--resume`` to its end.

The run would go on for 100,000 iterations: it ends only when the test kills it. Every
wait is for a state of the run directory (or a line of output), with a hang guard far
above what the run takes on a loaded machine; no verdict depends on how fast it runs.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import popmarl
from popmarl.runs.process_file import PROCESS_FILE

#: Sampled payoff entries (not the matrix env's exact ones) keep each iteration's work
#: growing slowly, so the run stays small while the test looks at it.
CONFIG = {"env": {"params": {"game": "random_general_sum", "size": 30, "seed": 0}},
          "evaluation": {"exact": "never", "episodes_per_entry": 1000},
          "stopping": {"max_iterations": 100_000}}
#: Seconds before a wait that sees no progress fails the test (a hang guard, not a timing).
HANG_GUARD_S = 600


def _committed(run: Path) -> int | None:
    try:
        return int(json.loads((run / "checkpoints" / "state.json").read_text())["iteration"])
    except (OSError, ValueError, KeyError):
        return None


def _wait_for_iteration(run: Path, at_least: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while (_committed(run) or 0) < at_least:
        assert proc.poll() is None, f"the run ended: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, f"no iteration {at_least} committed in {HANG_GUARD_S} s"
        time.sleep(0.01)


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """``proc``'s stdout lines, read by a thread (None at its end), so a wait can be guarded."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _next_json(lines: queue.Queue[str | None]) -> dict[str, Any] | None:
    line = lines.get(timeout=HANG_GUARD_S)
    return None if line is None else json.loads(line)


def _show(run_cli: Any, run: Path) -> dict[str, str]:
    result = run_cli("show", run)
    assert result.returncode == 0, result
    return dict(line.split(None, 1) for line in result.stdout.splitlines()[:8] if len(line.split(None, 1)) == 2)


def _eval(run_cli: Any, run: Path) -> tuple[list[str], dict[str, Any]]:
    result = run_cli("eval", run, "--episodes", "20", "--json")
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    return lines, json.loads(lines[-1])


def _assert_consistent(loaded: popmarl.LoadedRun) -> None:
    """One commit's policies and meta-strategy (the uniform solver: every policy, alike)."""
    for population in loaded.populations.values():
        assert len(population.policy_ids) == loaded.iteration + 1
        np.testing.assert_allclose(population.mixture, np.full(loaded.iteration + 1, 1 / (loaded.iteration + 1)))


def test_a_run_is_watched_while_it_runs_and_after_kill_9(tmp_path: Path, write_config, popen_cli, run_cli,
                                                         cli) -> None:
    config = write_config(**CONFIG)
    run = tmp_path / "run"
    proc = popen_cli("run", config, "--out", run)
    follow = None
    try:
        _wait_for_iteration(run, 1, proc)

        # While it runs: each answers from a checkpoint it committed, and says it is running.
        fields = _show(run_cli, run)
        assert fields["status"].startswith("running, iteration ")
        assert int(fields["iterations"]) == int(fields["status"].rsplit(" ", 1)[1]) >= 1
        loaded = popmarl.load_run(run)
        assert loaded.status.state == "running" and loaded.status.pid == proc.pid
        assert loaded.iteration == loaded.status.iteration >= 1
        _assert_consistent(loaded)
        lines, report = _eval(run_cli, run)
        assert lines[0].startswith(f"{run}: running, iteration ")
        assert report["status"]["state"] == "running" and report["iteration"] >= 1
        assert set(report["populations"]) == {"player_0", "player_1"}

        # --follow prints each new commit.
        follow = subprocess.Popen(cli.command(["show", run, "--follow", "--json", "--interval", "0.05"]),
                                  cwd=tmp_path, env=cli.env(), text=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        followed = _lines(follow)
        first = _next_json(followed)
        assert first is not None and first["status"] == "running"
        while (line := _next_json(followed)) is not None and line["iteration"] == first["iteration"]:
            pass
        assert line is not None and line["status"] == "running" and line["iteration"] > first["iteration"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == -signal.SIGKILL

    # --follow sees the run end, says how, and ends (status 0).
    assert follow is not None
    while (line := _next_json(followed)) is not None and line["status"] == "running":
        pass
    assert line is not None and line["status"] == "interrupted"
    follow.communicate(timeout=HANG_GUARD_S)
    assert follow.returncode == 0

    # Killed: each answers from the last committed checkpoint, and says it was interrupted.
    last = _committed(run)
    assert last is not None and last >= 2
    assert (line["iteration"], line["description"]) == (last, f"interrupted at iteration {last}: continue with --resume")
    assert not (run / "summary.json").exists()
    fields = _show(run_cli, run)
    assert fields["status"] == f"interrupted at iteration {last}: continue with --resume"
    assert fields["iterations"] == str(last)
    loaded = popmarl.load_run(run)
    assert (loaded.status.state, loaded.iteration) == ("interrupted", last)
    _assert_consistent(loaded)
    lines, report = _eval(run_cli, run)
    assert lines[0] == f"{run}: interrupted at iteration {last}: continue with --resume"
    assert (report["status"]["state"], report["iteration"]) == ("interrupted", last)

    # --resume ends it; then it reads as any finished run.
    resumed = run_cli("run", "--resume", run, "--set", f"stopping.max_iterations={last + 1}")
    assert resumed.returncode == 0, resumed
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["iterations"]) == ("completed", last + 1)
    assert not (run / PROCESS_FILE).exists()
    assert _show(run_cli, run)["status"] == "completed"
    assert popmarl.load_run(run).status.state == "completed"
