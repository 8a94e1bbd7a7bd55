"""What the console and ``popmarl show`` say about a run's progress: NashConv where the
env computes it, else each population's mean return and win rate (a marl run on a game
without NashConv), each figure labelled with the iteration it was measured at; env steps
per second, or what an exact run computed instead (best responses, exact payoff
entries). Policy counts agree between the two."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import popmarl
from popmarl.builtin.console_tracker import ConsoleTracker
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.data.run import RunInfo

from testkit.run_files import read_metrics, read_summary
from test_marl_scenario import ReinforceAlgorithm


class SampledMatrix(MatrixEnv):
    """A matrix game played as if its env could not compute it exactly: no NashConv."""

    def supports_exact(self) -> bool:
        return False


@pytest.fixture
def marl_without_nash_conv(monkeypatch: pytest.MonkeyPatch, runner_in: Callable[..., dict[str, Any]],
                           tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """Run marl with REINFORCE learners on prisoner's dilemma without NashConv, in process."""
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("reinforce", ReinforceAlgorithm))
    monkeypatch.setattr(popmarl, "envs", popmarl.envs.with_component("sampled_matrix", SampledMatrix))

    def run(**config: Any) -> dict[str, Any]:
        env = {"name": "sampled_matrix", "params": {"game": "prisoners_dilemma"}}
        return runner_in(tmp_path, scenario="marl", env=env, algorithm="reinforce", solver=None,
                         training={"max_episodes": 64, "max_env_steps": None}, evaluation={"episodes_per_entry": 50},
                         **config)

    return run


def returns_cell(m: dict[str, Any]) -> str:
    """The console's cell: each population's mean return (win rate)."""
    return ", ".join(f"{p} {m[f'mean_return/{p}']:.3f} (win {m[f'win_rate/{p}']:.0%})"
                     for p in ("player_0", "player_1"))


def replay(run_dir: Path, *, live: bool) -> str:
    """Everything a console tracker prints for the run's metrics and summary, on a
    terminal (``live``: the redrawn table) or not (one line per iteration)."""
    out = io.StringIO()
    tracker = ConsoleTracker()
    tracker.console = Console(file=out, force_terminal=live, width=200, highlight=False)
    summary = read_summary(run_dir)
    info = RunInfo(run_dir=str(run_dir), scenario=summary["scenario"], seed=0,
                   config={"stopping": {"max_iterations": summary["iterations"]}})
    tracker.popmarl_run_start(info)
    for m in read_metrics(run_dir):
        tracker.popmarl_iteration_end(info, m["iteration"], m)
    tracker.popmarl_run_end(info, summary)
    return out.getvalue()


def summary_line(lines: list[str]) -> str:
    """The console's summary line: the one before the run directory's (which may wrap
    over several lines when the directory's path is long)."""
    return lines[max(i for i, line in enumerate(lines) if line.startswith("popmarl: run directory ")) - 1]


def test_marl_without_nash_conv_shows_mean_returns_and_win_rates(marl_without_nash_conv, capsys, run_cli,
                                                                  tmp_path: Path) -> None:
    summary = marl_without_nash_conv(stopping={"max_iterations": 3}, trackers=["console"])
    assert summary["nash_conv"] is None
    metrics = read_metrics(tmp_path / "run")
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iteration ")]
    assert len(lines) == 3
    for i, (line, m) in enumerate(zip(lines, metrics), start=1):
        assert 0.0 <= m["win_rate/player_0"] <= 1.0 and m["population_size/player_0"] == i + 1
        assert f"policies player_0 {i + 1}, player_1 {i + 1}  return {returns_cell(m)} (it {i})  env steps/s " in line, line
        assert "nash_conv" not in line
    show = run_cli("show", tmp_path / "run")
    assert show.returncode == 0, show
    assert "population player_0: 4 policies;" in show.stdout  # as the console's last line counted
    shown = dict(line.split(None, 1) for line in show.stdout.splitlines() if len(line.split(None, 1)) == 2)
    for key in ("mean_returns", "win_rates", "initial_returns"):
        assert shown[key] == ", ".join(f"{p} {summary[key][p]:.4f}" for p in ("player_0", "player_1")), key
    assert summary["win_rates"] == {p: metrics[-1][f"win_rate/{p}"] for p in ("player_0", "player_1")}


def test_the_live_table_of_a_run_without_nash_conv_shows_returns(marl_without_nash_conv, tmp_path: Path) -> None:
    summary = marl_without_nash_conv(stopping={"max_iterations": 2}, trackers=[])
    shown = replay(tmp_path / "run", live=True)
    assert "progress" in shown and "nash_conv" not in shown
    assert f"return {returns_cell(read_metrics(tmp_path / 'run')[-1])} (it 2)" in shown
    mean = ", ".join(f"{p} {summary['mean_returns'][p]:.3f} (win {summary['win_rates'][p]:.0%})"
                     for p in ("player_0", "player_1"))
    assert f"popmarl: completed after 2 iterations; return {mean} (it 2); env steps {summary['env_steps']};" in shown


def test_a_population_playing_every_seat_shows_its_team_return_not_a_win_rate(marl_without_nash_conv,
                                                                               tmp_path: Path) -> None:
    """Parameter sharing in a game that is not zero-sum: the one population is a team
    playing every seat, so it has no one to win against; the line shows the team's return
    (every seat's, summed)."""
    summary = marl_without_nash_conv(stopping={"max_iterations": 1}, agents={"mapping": "shared"}, trackers=[])
    assert "win_rates" not in summary and not any(k.startswith("win_rate/") for k in read_metrics(tmp_path / "run")[0])
    line = next(x for x in replay(tmp_path / "run", live=False).splitlines() if x.startswith("iteration "))
    team_return = read_metrics(tmp_path / "run")[0]["team_return"]
    assert team_return == pytest.approx(2 * summary["mean_returns"]["shared"])
    assert f"  team return {team_return:.3f} (it 1)  env steps/s " in line and "win" not in line, line


def test_an_exact_run_says_what_it_computed_instead_of_env_steps(run_inprocess, capsys, run_cli,
                                                                  tmp_path: Path) -> None:
    """Exact best responses and exact evaluation take no env steps: each iteration computes
    one best response per population and the table's new entries (2k + 1 at iteration k)."""
    summary = run_inprocess(stopping={"max_iterations": 3}, trackers=["console"])
    metrics = read_metrics(tmp_path / "run")
    assert [(m["exact_best_responses"], m["exact_entries"], m["env_steps"]) for m in metrics] == [
        (2, 3, 0), (2, 5, 0), (2, 7, 0)]
    assert (summary["exact_best_responses"], summary["exact_entries"], summary["env_steps"]) == (6, 15, 0)
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if line.startswith("iteration ")]
    for k, line in enumerate(lines, start=1):
        assert f"  exact: 2 best responses, {2 * k + 1} entries  elapsed " in line, line
        assert "env steps/s" not in line
    assert "; exact: 6 best responses, 15 entries; " in summary_line(out) and "env steps" not in summary_line(out)
    live = replay(tmp_path / "run", live=True)
    assert "exact work" in live and "env steps/s" not in live and "2 BR, 7 entries" in live
    show = run_cli("show", tmp_path / "run")
    shown = dict(line.split(None, 1) for line in show.stdout.splitlines() if len(line.split(None, 1)) == 2)
    assert shown["exact"] == "6 best responses, 15 payoff entries"


def test_a_sampled_run_still_shows_nash_conv_and_env_steps(run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(stopping={"max_iterations": 2}, evaluation={"exact": "never", "episodes_per_entry": 10})
    metrics = read_metrics(tmp_path / "run")
    assert [m["exact_entries"] for m in metrics] == [0, 0] and summary["env_steps"] > 0
    plain = replay(tmp_path / "run", live=False).splitlines()
    assert all("  nash_conv " in line and "  env steps/s " in line for line in plain if line.startswith("iteration "))
    assert f"; env steps {summary['env_steps']}; " in summary_line(plain)
    assert "exact" not in json.dumps(summary_line(plain))
