"""A run that fails: the error that stopped it is the one raised, even when finishing the
run (exporting the final policy) fails too, and ``summary.json`` says ``failed`` with
that error as the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.builtin.solvers import Uniform

from testkit.run_files import read_summary


class ExplodingSolver(Uniform):
    """``uniform`` until its ``fail_at``-th call, which raises (test only)."""

    calls = 0
    fail_at = 2

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        ExplodingSolver.calls += 1
        if ExplodingSolver.calls == ExplodingSolver.fail_at:
            raise RuntimeError("solver exploded\nsecond line")
        return super().solve(payoffs)


class UnexportableMatrix(MatrixEnv):
    """``matrix`` whose final-policy export fails (test only)."""

    def export_policy(self, profile: Any, directory: Path) -> list[str]:
        raise OSError("export failed: disk full")


@pytest.fixture
def failing_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "solvers", popmarl.solvers.with_component("exploding", ExplodingSolver))
    monkeypatch.setattr(popmarl, "envs", popmarl.envs.with_component("unexportable", UnexportableMatrix))
    monkeypatch.setattr(ExplodingSolver, "calls", 0)
    monkeypatch.setattr(ExplodingSolver, "fail_at", 2)


def test_the_loop_error_is_raised_and_reported_when_finish_fails_too(
        failing_parts: None, run_inprocess, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(RuntimeError, match="solver exploded") as raised:
        run_inprocess(env={"name": "unexportable"}, solver="exploding")
    assert any("then finishing the run failed too: OSError: export failed: disk full" in note
               for note in getattr(raised.value, "__notes__", []))
    assert "finishing the run failed too" in caplog.text
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "failed"
    assert summary["stop_reason"] == "error: RuntimeError: solver exploded"


def test_a_failing_finish_after_a_clean_loop_fails_the_run(failing_parts: None, run_inprocess,
                                                           tmp_path: Path) -> None:
    ExplodingSolver.fail_at = 0  # never
    with pytest.raises(OSError, match="export failed: disk full"):
        run_inprocess(env={"name": "unexportable"}, solver="exploding")
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "failed" and summary["iterations"] == 3
    assert summary["stop_reason"] == "error: finishing the run: OSError: export failed: disk full"


def test_a_loop_error_alone_names_itself_in_the_summary(failing_parts: None, run_inprocess, tmp_path: Path) -> None:
    ExplodingSolver.fail_at = 3
    with pytest.raises(RuntimeError, match="solver exploded") as raised:
        run_inprocess(solver="exploding")
    assert not getattr(raised.value, "__notes__", [])
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "failed" and summary["stop_reason"] == "error: RuntimeError: solver exploded"
    assert summary["iterations"] == 1  # the checkpointed iterations
    # It describes the last checkpoint, not the iteration the error cut short (whose new
    # policies had joined before its meta-game was solved).
    for population in summary["populations"].values():
        assert len(population["policies"]) == len(population["meta_strategy"]) == 2, population
