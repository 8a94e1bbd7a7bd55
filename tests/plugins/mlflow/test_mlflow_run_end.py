"""The end of a ``popmarl run`` process and its MLflow run: a closed stdout (``| head -2``)
only silences the console, the run completes and its MLflow run ends FINISHED; SIGTERM or
Ctrl-C stop the run, whose MLflow run ends KILLED. Real subprocesses, real pipes."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mlflow_helpers import client, config, mlflow_run_id, mlflow_tracker


def mlflow_status(run_dir: Path, uri: str) -> str:
    return str(client(uri).get_run(mlflow_run_id(run_dir, uri)).info.status)


def test_a_closed_stdout_only_silences_the_console(tmp_path: Path, cli, write_config,
                                                    fresh_store: Callable[[Path], str]) -> None:
    uri = fresh_store(tmp_path)
    # 60 iterations print ~6 kB: more than the 4 kB pipe below holds, so writes fail after the close.
    config = write_config(trackers=["console", mlflow_tracker(uri)], stopping={"max_iterations": 60})
    with subprocess.Popen(cli.command(["run", config, "--out", "runs/piped"]), cwd=tmp_path, env=cli.env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        fcntl.fcntl(proc.stdout.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
        head = b""
        while head.count(b"\n") < 2:  # as `| head -2`: two lines, then the reader goes away
            chunk = os.read(proc.stdout.fileno(), 1)
            assert chunk, f"the run ended before two lines: {head!r}"
            head += chunk
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        returncode = proc.wait(timeout=900)
    assert head.decode().splitlines()[1].startswith("iteration 1/60")
    assert returncode == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    summary = json.loads((tmp_path / "runs/piped/summary.json").read_text())
    assert (summary["status"], summary["stop_reason"], summary["iterations"]) == ("completed", "max_iterations", 60)
    assert mlflow_status(tmp_path / "runs/piped", uri) == "FINISHED"


@pytest.mark.parametrize(("sig", "reason", "code"), [(signal.SIGTERM, "terminated", 128 + signal.SIGTERM),
                                                      (signal.SIGINT, "interrupted", 130)], ids=["sigterm", "ctrl-c"])
def test_a_signalled_run_stops_and_its_mlflow_run_is_killed(sig: int, reason: str, code: int, tmp_path: Path,
                                                            popen_cli, write_config,
                                                            fresh_store: Callable[[Path], str]) -> None:
    uri = fresh_store(tmp_path)
    config = write_config(trackers=[mlflow_tracker(uri)], stopping={"max_iterations": 100000})
    run_dir = tmp_path / "runs/signalled"
    proc = popen_cli("run", config, "--out", run_dir)
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline and not (
            metrics.is_file() and metrics.read_text().count("\n") >= 2):
        time.sleep(0.05)
    # SIGTERM as `kill PID` sends it; SIGINT to the process group, as Ctrl-C in a terminal.
    if sig == signal.SIGTERM:
        os.kill(proc.pid, sig)
    else:
        os.killpg(proc.pid, sig)
    _, stderr = proc.communicate(timeout=900)
    assert proc.returncode == code, stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["stop_reason"]) == ("stopped", reason)
    assert mlflow_status(run_dir, uri) == "KILLED"
    assert "--resume" in stderr


def test_a_signal_during_an_mlflow_write_waits_for_the_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             fresh_store: Callable[[Path], str]) -> None:
    """Ctrl-C in the middle of a write used to cut it short: on a sqlite store its open
    transaction kept the database locked, the run's end could not be written and the MLflow
    run stayed RUNNING (about 1 in 6 of the Ctrl-C runs above). Now the write finishes first."""
    import popmarl
    from popmarl_mlflow.writer import RunWriter

    events: list[str] = []
    calls = iter(range(1, 1000))
    write = RunWriter.log_iterations

    def interrupted_write(self: RunWriter, *args: Any, **kwargs: Any) -> Any:
        call = next(calls)
        if call == 1:
            events.append("signal in write 1")
            signal.raise_signal(signal.SIGINT)  # Ctrl-C while the write is under way
        written = write(self, *args, **kwargs)
        events.append(f"write {call} done")
        return written

    monkeypatch.setattr(RunWriter, "log_iterations", interrupted_write)
    uri = fresh_store(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        popmarl.run(config([mlflow_tracker(uri)], stopping={"max_iterations": 5}), out=str(tmp_path / "run"))
    # The interrupted write completed, then the run stopped.
    assert events[:2] == ["signal in write 1", "write 1 done"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["status"], summary["stop_reason"]) == ("stopped", "interrupted")
    assert mlflow_status(tmp_path / "run", uri) == "KILLED"


def test_a_second_signal_does_not_wait() -> None:
    from popmarl_mlflow.connection import uninterrupted

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            signal.raise_signal(signal.SIGINT)
            reached.append("held")
            signal.raise_signal(signal.SIGINT)  # asked twice: at once
            reached.append("not reached")
    assert reached == ["held"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler
