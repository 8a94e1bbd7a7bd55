"""Tracker ``plots``: valid PNGs in the run directory, written atomically, never fatal,
drawn every few iterations by a child process that never outlives the run."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from mlflow_helpers import PNG_SIGNATURE, config
from popmarl.cli import main
from popmarl_mlflow import drawing as drawing_module, plots
from popmarl_mlflow.drawing import NICENESS, Drawer, DrawingProcess, Snapshot, Update

PLOTS = ("nash_conv.png", "payoffs.png", "meta_strategies.png")


def check_png(path: Path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_SIGNATURE), path


def test_plots_after_a_run(tmp_path: Path, run_popmarl: Callable[..., dict[str, Any]],
                           capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    assert run_popmarl(run_dir, ["plots"], iterations=2)["status"] == "completed"
    for name in PLOTS:
        check_png(run_dir / name)
    assert not [p.name for p in run_dir.iterdir() if p.name.startswith(".")]  # no temp files left
    capsys.readouterr()
    assert main(["show", str(run_dir)]) == 0
    shown = capsys.readouterr().out
    for name in PLOTS:
        assert f"plot       {run_dir / name}" in shown


def test_three_agents_and_resume(tmp_path: Path) -> None:
    env = {"name": "matrix", "params": {"game": "random_general_sum", "players": 3, "size": 3}}
    run_dir = tmp_path / "run"
    popmarl.run(config(["plots"], env=env, stopping={"max_iterations": 1}), out=str(run_dir))
    before = (run_dir / "nash_conv.png").read_bytes()
    summary = popmarl.run(config(["plots"], env=env, stopping={"max_iterations": 2}), resume=str(run_dir))
    assert summary["status"] == "completed"
    for name in PLOTS:
        check_png(run_dir / name)
    assert (run_dir / "nash_conv.png").read_bytes() != before  # redrawn with iteration 2


def test_a_failing_plot_does_not_stop_the_run(tmp_path: Path, run_popmarl: Callable[..., dict[str, Any]],
                                              caplog: pytest.LogCaptureFixture) -> None:
    run_dir = tmp_path / "run"
    assert run_popmarl(run_dir, [], iterations=1)["status"] == "completed"
    (run_dir / "payoffs.png").mkdir()  # in the way of the heat map: it cannot be written
    assert run_popmarl(run_dir, ["plots"], iterations=3, resume=True)["status"] == "completed"
    [warning] = [r.getMessage() for r in caplog.records if r.name == "popmarl_mlflow"]
    assert "plots stopped (IsADirectoryError: [Errno 21] Is a directory" in warning and "payoffs.png" in warning
    check_png(run_dir / "nash_conv.png")  # drawn before the heat map failed
    assert not (run_dir / "meta_strategies.png").exists()  # none drawn after the failure


def test_plot_functions_on_thin_data(tmp_path: Path) -> None:
    check_png(plots.nash_conv([{"iteration": 1, "nash_conv": None, "wall_time_s": 0.1}], tmp_path / "a.png"))
    check_png(plots.meta_strategies({}, tmp_path / "b.png"))
    lines = [{"iteration": i, "meta_strategy/p": [1 / (i + 1)] * (i + 1)} for i in range(1, 14)]
    history = plots.meta_history(lines)
    assert sorted(history["p"]) == list(range(1, 14)) and history["p"][2] == [1 / 3] * 3
    check_png(plots.meta_strategies(history, tmp_path / "c.png"))
    lines = [{"iteration": i, "nash_conv": 10.0 ** -i, "wall_time_s": float(i)} for i in range(1, 6)]
    check_png(plots.nash_conv(lines, tmp_path / "d.png"))  # spans 4 decades: log scale


def test_plots_are_redrawn_every_10_iterations_by_a_child_process_and_last_at_the_end(
        tmp_path: Path, run_popmarl: Callable[..., dict[str, Any]], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="popmarl_mlflow")
    assert run_popmarl(tmp_path / "run", ["plots"], iterations=25)["iterations"] == 25
    drawn = [re.fullmatch(r"popmarl-mlflow: plots of iteration (\d+) drawn in [\d.]+ s by process (\d+)",
                          r.getMessage()) for r in caplog.records if r.name == "popmarl_mlflow"]
    assert drawn and all(drawn), caplog.records
    iterations = [int(m[1]) for m in drawn if m]
    # Requested at 10, 20 and the end; a request waiting for the time budget is replaced
    # by the next (this run is too short for any but the end's). The run returned after
    # the end's drawing.
    assert 1 <= len(iterations) <= 3 and set(iterations) <= {10, 20, 25} and iterations[-1] == 25, iterations
    assert {int(m[2]) for m in drawn if m} != {os.getpid()}
    for name in PLOTS:
        check_png(tmp_path / "run" / name)


def test_nash_conv_axis_is_logarithmic_with_integer_iteration_ticks(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    saved = []
    real = plots.save
    monkeypatch.setattr(plots, "save", lambda figure, path: saved.append(figure) or real(figure, path))
    lines = [{"iteration": i, "nash_conv": v, "wall_time_s": 0.5 * i}
             for i, v in enumerate([4.7, 0.9, 0.3, 1e-12, 0.0], start=1)]
    check_png(plots.nash_conv(lines, tmp_path / "nash_conv.png"))
    [figure] = saved
    by_iteration, by_time = figure.axes
    assert by_iteration.get_yscale() == by_time.get_yscale() == "log"
    low, high = by_iteration.get_ylim()
    assert 0 < low <= 1e-12 and high >= 4.7  # the 0 is drawn at a floor below 1e-12
    ticks = [t for t in by_iteration.get_xticks() if 1 <= t <= 5]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_drawer_keeps_to_its_share_of_time_and_draws_the_newest_request_at_close(tmp_path: Path) -> None:
    clock = FakeClock(100.0)
    drawn: list[int] = []
    first_drawn = threading.Event()

    def draw(snapshot: Snapshot) -> None:
        clock.now += 0.05  # each drawing takes 0.05 s
        drawn.append(len(snapshot.lines))
        first_drawn.set()

    def snapshot(n: int) -> Snapshot:
        return Snapshot(run_dir=tmp_path, lines=[{}] * n, meta={})

    # 1% of the 5 s since start: the first (estimated 0.04 s) may start at once, the
    # second (0.05 s drawn, 0.05 s estimated) only 10 s after start, a time the clock
    # never reaches: only close() can draw it.
    drawer = Drawer(draw, max_share=0.01, start=95.0, estimate=0.04, clock=clock)
    drawer.request(snapshot(1))
    assert first_drawn.wait(600)
    for n in range(2, 11):  # each replaces the one before
        drawer.request(snapshot(n))
    assert drawn == [1]  # waiting, not drawing 10
    drawer.close()  # would wait forever if close did not cut the wait short
    assert drawn == [1, 10]


def history(first: int, last: int) -> list[dict[str, Any]]:
    return [{"iteration": i, "nash_conv": 1.0 / i, "wall_time_s": 0.1 * i, "meta_strategy/p": [1 / i] * i}
            for i in range(first, last + 1)]


def test_drawing_process_draws_the_history_its_updates_add_up_to(tmp_path: Path) -> None:
    drawing = DrawingProcess(max_share=1.0, start=time.monotonic(), estimate=0.0)
    drawing.send(Update(run_dir=str(tmp_path), lines=history(1, 3), meta=[], draw=False))
    drawing.send(Update(run_dir=str(tmp_path), lines=history(4, 5), meta=[], draw=True))
    drawing.close()  # draws what is pending, then the process exits
    assert drawing.error is None and drawing.drawn[-1] == 5, (drawing.error, drawing.drawn)
    check_png(tmp_path / "nash_conv.png")
    check_png(tmp_path / "meta_strategies.png")
    assert not (tmp_path / "payoffs.png").exists()  # no payoffs.npz: no heat map


def test_a_drawing_process_that_dies_is_reported_not_raised(tmp_path: Path) -> None:
    drawing = DrawingProcess(max_share=1.0, start=time.monotonic(), estimate=0.0)
    assert drawing.pid is not None
    os.kill(drawing.pid, signal.SIGKILL)
    for last in (2, 4):
        drawing.send(Update(run_dir=str(tmp_path), lines=history(last - 1, last), meta=[], draw=True))
    drawing.close()
    assert drawing.error == "the drawing process exited with code -9" and drawing.drawn == []


def test_a_stuck_drawing_process_is_stopped_at_the_runs_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drawing_module, "CLOSE_TIMEOUT_S", 1.0)
    drawing = DrawingProcess(max_share=1.0, start=time.monotonic(), estimate=0.0)
    os.kill(drawing.pid, signal.SIGSTOP)  # alive, never answering: a drawing that never ends
    drawing.send(Update(run_dir=str(tmp_path), lines=history(1, 2), meta=[], draw=True))
    started = time.monotonic()
    drawing.close()
    assert time.monotonic() - started < 10
    assert drawing.error == "the drawing process was still drawing after 1 s; stopped it"
    assert gone(drawing.pid)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie nobody reaps
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("death", ["killed", "exits"])
def test_the_drawing_process_does_not_outlive_the_run(death: str) -> None:
    # A run's process killed (no run_end, no atexit) or exiting without run_end.
    end = "os.kill(os.getpid(), signal.SIGKILL)" if death == "killed" else "sys.exit(3)"
    code = ("import os, signal, sys, time\n"
            "from popmarl_mlflow.drawing import DrawingProcess\n"
            "if __name__ == '__main__':\n"
            "    drawing = DrawingProcess(max_share=1.0, start=time.monotonic(), estimate=0.0)\n"
            "    print(drawing.pid, flush=True)\n"
            f"    {end}\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == (-signal.SIGKILL if death == "killed" else 3), done.stderr
    pid = int(done.stdout)
    deadline = time.monotonic() + 600
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(pid)


def test_a_large_heat_map_labels_at_most_10_policies_per_axis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from popmarl.gametheory.payoffs import PayoffTable

    n = 61
    rng = np.random.default_rng(0)
    table = PayoffTable(agents=("a", "b"), values=rng.normal(size=(2, n, n)), filled=np.ones((n, n), bool))
    table.save(tmp_path / "payoffs.npz", [[f"a/{i}" for i in range(n)], [f"b/{i}" for i in range(n)]])
    saved = []
    real = plots.save
    monkeypatch.setattr(plots, "save", lambda figure, path: saved.append(figure) or real(figure, path))
    check_png(plots.payoffs(tmp_path / "payoffs.npz", tmp_path / "payoffs.png"))
    heat_map = saved[0].axes[0]
    rows = [t.get_text() for t in heat_map.get_yticklabels()]
    cols = [t.get_text() for t in heat_map.get_xticklabels()]
    assert rows == [f"a/{i}" for i in range(0, n, 7)] and cols == [f"b/{i}" for i in range(0, n, 7)]


def test_a_script_without_a_main_guard_runs_once_and_gets_its_plots(tmp_path: Path) -> None:
    # multiprocessing's spawn would re-run this script in the drawing process.
    script = tmp_path / "script.py"
    script.write_text("import popmarl\n"
                      "from mlflow_helpers import config\n"
                      f"popmarl.run(config(['plots'], stopping={{'max_iterations': 2}}), out={str(tmp_path / 'run')!r})\n"
                      "print('ran')\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0 and done.stdout.count("ran") == 1, done.stderr
    assert "plots stopped" not in done.stderr, done.stderr
    for name in PLOTS:
        check_png(tmp_path / "run" / name)


def test_ctrl_c_stops_the_run_which_still_gets_its_last_plots(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    script = tmp_path / "script.py"
    script.write_text("import popmarl\n"
                      "from mlflow_helpers import config\n"
                      "if __name__ == '__main__':\n"
                      "    popmarl.run(config(['plots'], env={'name': 'matrix', 'params': {'game': 'random_zero_sum', "
                      "'size': 40}}, stopping={'max_iterations': 100000}), "
                      f"out={str(run_dir)!r})\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    # Its own process group, as a terminal's foreground job: Ctrl-C signals the whole group.
    with subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, start_new_session=True) as run:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not (
                (run_dir / "metrics.jsonl").is_file() and (run_dir / "metrics.jsonl").read_text().count("\n") >= 3):
            time.sleep(0.05)
        os.killpg(run.pid, signal.SIGINT)
        _, stderr = run.communicate(timeout=600)
    assert run.returncode != 0 and "KeyboardInterrupt" in stderr
    assert "plots stopped" not in stderr, stderr
    for name in PLOTS:
        check_png(run_dir / name)


def test_the_drawing_process_yields_to_the_run(tmp_path: Path) -> None:
    drawing = DrawingProcess(max_share=1.0, start=time.monotonic(), estimate=0.0)
    drawing.send(Update(run_dir=str(tmp_path), lines=history(1, 2), meta=[], draw=True))
    deadline = time.monotonic() + 600
    while not drawing.drawn and time.monotonic() < deadline:  # alive until close()
        time.sleep(0.02)
        drawing.poll()
    assert drawing.drawn == [2]
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, drawing.pid) == min(19, ours + NICENESS) > ours
    drawing.close()
    assert drawing.error is None


def test_a_run_with_ratings_gets_their_plot(tmp_path: Path) -> None:
    """``evaluation.ratings: true`` puts ``elo/<population>`` in the metrics: drawn in
    ``ratings.png`` (a run without them has none)."""
    run_dir = tmp_path / "run"
    summary = popmarl.run(config(["plots"], env={"name": "matrix", "params": {"game": "rps"}},
                                 stopping={"max_iterations": 3}, evaluation={"ratings": True}), out=str(run_dir))
    assert summary["status"] == "completed"
    check_png(run_dir / "ratings.png")
    plain = tmp_path / "plain"
    popmarl.run(config(["plots"], stopping={"max_iterations": 1}), out=str(plain))
    assert not (plain / "ratings.png").exists()
