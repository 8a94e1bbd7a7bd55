"""Tracker ``plots``: valid PNGs in the run directory, written atomically, never fatal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import popmarl
from mlflow_helpers import PNG_SIGNATURE, config
from popmarl.cli import main
from popmarl_mlflow import plots

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
