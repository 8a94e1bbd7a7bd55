"""Tracker ``plots``: valid PNGs in the run directory, written atomically, never fatal,
drawn every few iterations off the loop's thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import popmarl
from mlflow_helpers import PNG_SIGNATURE, config
from popmarl.cli import main
from popmarl_mlflow import plots
from popmarl_mlflow.plots_tracker import Drawer, Snapshot

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


def test_a_failing_plot_does_not_stop_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              run_popmarl: Callable[..., dict[str, Any]],
                                              caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("no canvas")

    monkeypatch.setattr(plots, "payoffs", broken)
    assert run_popmarl(tmp_path / "run", ["plots"], iterations=3)["status"] == "completed"
    [warning] = [r.getMessage() for r in caplog.records if r.name == "popmarl_mlflow"]
    assert "plots stopped (RuntimeError: no canvas)" in warning


def test_plot_functions_on_thin_data(tmp_path: Path) -> None:
    check_png(plots.nash_conv([{"iteration": 1, "nash_conv": None, "wall_time_s": 0.1}], tmp_path / "a.png"))
    check_png(plots.meta_strategies({}, tmp_path / "b.png"))
    lines = [{"iteration": i, "meta_strategy/p": [1 / (i + 1)] * (i + 1)} for i in range(1, 14)]
    history = plots.meta_history(lines)
    assert sorted(history["p"]) == list(range(1, 14)) and history["p"][2] == [1 / 3] * 3
    check_png(plots.meta_strategies(history, tmp_path / "c.png"))
    lines = [{"iteration": i, "nash_conv": 10.0 ** -i, "wall_time_s": float(i)} for i in range(1, 6)]
    check_png(plots.nash_conv(lines, tmp_path / "d.png"))  # spans 4 decades: log scale


def test_plots_are_redrawn_every_10_iterations_off_the_loop_and_last_at_the_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_popmarl: Callable[..., dict[str, Any]]) -> None:
    drawn: list[tuple[int, str]] = []  # (last iteration in the drawing, drawing thread)
    real = plots.nash_conv

    def counted(lines: Sequence[Mapping[str, Any]], path: Path) -> Path:
        drawn.append((lines[-1]["iteration"], threading.current_thread().name))
        return real(lines, path)

    monkeypatch.setattr(plots, "nash_conv", counted)
    assert run_popmarl(tmp_path / "run", ["plots"], iterations=25)["iterations"] == 25
    iterations = [i for i, _ in drawn]
    # Requested at 10, 20 and the end; a request waiting for the time budget is replaced
    # by the next (this run is too short for any but the end's). The run returned after
    # the end's drawing.
    assert 1 <= len(drawn) <= 3 and set(iterations) <= {10, 20, 25} and iterations[-1] == 25, drawn
    assert {thread for _, thread in drawn} == {"popmarl-plots"}
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


def test_drawer_keeps_to_its_share_of_time_and_draws_the_newest_request_at_close(tmp_path: Path) -> None:
    drawn: list[int] = []
    started = threading.Event()

    def draw(snapshot: Snapshot) -> None:
        started.set()
        time.sleep(0.05)
        drawn.append(len(snapshot.lines))

    def snapshot(n: int) -> Snapshot:
        return Snapshot(run_dir=tmp_path, lines=[{}] * n, meta={})

    # 1% of the 5 s since start: the first (estimated 0.04 s) may start at once, the
    # second (0.05 s drawn, 0.05 s estimated) only 10 s after start.
    drawer = Drawer(draw, max_share=0.01, start=time.monotonic() - 5, estimate=0.04)
    drawer.request(snapshot(1))
    assert started.wait(10)
    for n in range(2, 11):  # during the drawing and the wait: each replaces the one before
        drawer.request(snapshot(n))
    time.sleep(0.2)
    assert drawn == [1]  # waiting, not drawing 10
    begun = time.monotonic()
    drawer.close()
    assert drawn == [1, 10] and time.monotonic() - begun < 2  # close cuts the wait short
