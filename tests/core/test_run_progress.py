"""Progress where NashConv cannot be computed: every console line of a league and of a
tic-tac-toe PSRO run shows a labelled figure that moves (the main agents' Elo, the newest
policies' oracle gains) with its iteration, never a bare ``nash_conv –``; ``popmarl show``
prints ``exploit.json``'s result and the same figures; the newest policies' play against
uniformly random play (:mod:`popmarl.scenario.progress`) gives win / draw / loss shares,
or a team's return."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import popmarl
from learning_schedule import ScheduleAlgorithm
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.config.schema import EvaluationConfig
from popmarl.data.headline import headline
from popmarl.interfaces.scenario import RunContext, Scenario
from popmarl.interfaces.uniform_play import uniform_play_weights
from popmarl.scenario.progress import due, measure_progress, needs_versus_random, versus_random
from popmarl.tools.exploit_report import Clamped, Estimate, ExploitReport, SeatGain

from testkit.run_files import read_metrics

pytest.importorskip("pyspiel")

#: An iteration's console line and the figure it shows: ``<label> <value...> (it N)``.
LINE = re.compile(r"^iteration (\d+)/\d+  policies .+?  (.+ \(it \d+\))  (env steps/s|exact:) ")


class SampledMatrix(MatrixEnv):
    """A matrix game played as if its env could not compute it exactly: no NashConv."""

    def supports_exact(self) -> bool:
        return False


class VersusRandomProbe(Scenario):
    """Puts the mixed strategies it is given on the backend as policies (``weights``:
    policy id -> action probabilities, or None: uniform play) and returns
    :func:`versus_random` of them."""

    @attrs.frozen(kw_only=True)
    class Config:
        weights: dict[str, list[float] | None] = attrs.field(factory=dict)
        team: bool = False

    def run(self, context: RunContext) -> dict[str, Any]:
        for pid, probs in self.config.weights.items():
            weights = uniform_play_weights() if probs is None else {"probs": np.asarray(probs, dtype=float)}
            context.backend.add_policy(pid, weights)
        newest = {pid.rsplit("/", 1)[0]: pid for pid in self.config.weights}
        return versus_random(context, newest, 5, team=self.config.team)


FOUND = (popmarl.Registries.current().with_component("algorithms", "schedule", ScheduleAlgorithm)
         .with_component("envs", "sampled_matrix", SampledMatrix)
         .with_component("scenarios", "versus_random_probe", VersusRandomProbe))


def run(tmp_path: Path, name: str, **config: Any) -> Path:
    validated = popmarl.validate({"trackers": ["console"], **config}, registries=FOUND)
    popmarl.run(validated, out=str(tmp_path / name), registries=FOUND)
    return tmp_path / name


def figures_of(out: str) -> list[tuple[int, str]]:
    """Each iteration line's (iteration, figures) as the console printed them."""
    lines = [line for line in out.splitlines() if line.startswith("iteration ")]
    found = [LINE.match(line) for line in lines]
    assert all(found), lines
    return [(int(m.group(1)), m.group(2)) for m in found if m]


def test_a_league_without_nash_conv_shows_its_main_agents_elo_on_every_line(tmp_path: Path, capsys) -> None:
    path = run(tmp_path, "league", scenario={"name": "league", "params": {"steps_per_round": 20}},
               env={"name": "sampled_matrix", "params": {"game": "rps"}}, algorithm="schedule", solver="latest",
               training={"episodes_per_update": 2}, evaluation={"episodes_per_entry": 4},
               stopping={"max_iterations": 3})
    out = capsys.readouterr().out
    metrics = read_metrics(path)
    shown = figures_of(out)
    assert [it for it, _ in shown] == [1, 2, 3]
    for (it, figures), line in zip(shown, metrics):
        assert line["nash_conv"] is None and "nash_conv" not in figures
        mains = {k: v for k, v in line.items() if k.startswith("elo/") and ".main_agent" in k}
        assert mains, line
        assert "elo " + ", ".join(f"{k[4:]} {v:.0f}" for k, v in mains.items()) + f" (it {it})" in figures
    last = next(x for x in out.splitlines() if x.startswith("popmarl: completed after 3 iterations; "))
    assert shown[-1][1] in last and "nash_conv" not in last


def test_a_tictactoe_psro_shows_the_newest_policies_gains_on_every_line(tmp_path: Path, capsys, run_cli) -> None:
    path = run(tmp_path, "ttt", env={"name": "openspiel", "params": {"game": "tic_tac_toe", "exact_limit": 0,
                                                                     "observation": "observation"}},
               algorithm="random", solver="uniform", stopping={"max_iterations": 3},
               evaluation={"episodes_per_entry": 10, "num_envs": 10})
    out = capsys.readouterr().out
    metrics = read_metrics(path)
    shown = figures_of(out)
    assert [it for it, _ in shown] == [1, 2, 3]
    for (it, figures), line in zip(shown, metrics):
        assert line["nash_conv"] is None and "nash_conv" not in figures
        assert f"gain {line['oracle_gain']:.4f} (it {it})" in figures
    assert f"; gain {metrics[-1]['oracle_gain']:.4f} (it 3); " in out
    show = run_cli("show", path)
    assert show.returncode == 0, show
    assert "nash_conv" not in show.stdout.split("population")[0]
    assert f"progress        gain {metrics[-1]['oracle_gain']:.4f} (it 3)" in show.stdout.splitlines()


def exploit_json(iteration: int) -> dict[str, Any]:
    """What ``popmarl exploit`` writes to ``exploit.json`` for a report of gain 0.25."""
    gain = Estimate(value=0.25, half_width=0.05)
    seat = SeatGain(seat="player_0", seed=0, response=Estimate(value=0.5, half_width=0.05),
                    meta=Estimate(value=0.25, half_width=0.0), gain=gain, env_steps=1000, train_s=1.0)
    report = ExploitReport(kind="nash_conv", algorithms={"player_0": "random"}, env_steps=1000,
                           totals=(Clamped(raw=gain),), seats=(seat,), exact=False, seconds=1.0)
    return {"run": "x", "iteration": iteration, "status": "completed", "backend": "local", **report.to_json()}


def test_show_prints_exploit_json_and_the_progress_figures(tmp_path: Path, run_cli) -> None:
    path = run(tmp_path, "league", scenario={"name": "league", "params": {"steps_per_round": 20}},
               env={"name": "sampled_matrix", "params": {"game": "rps"}}, algorithm="schedule", solver="latest",
               training={"episodes_per_update": 2}, evaluation={"episodes_per_entry": 4},
               stopping={"max_iterations": 2}, trackers=[])
    before = run_cli("show", path)
    assert before.returncode == 0, before
    assert "nash_conv" not in before.stdout.split("population")[0] and "exploit " not in before.stdout
    (path / "exploit.json").write_text(json.dumps(exploit_json(2)))
    shown = run_cli("show", path)
    assert shown.returncode == 0, shown
    lines = shown.stdout.splitlines()
    assert "exploit         approx nash_conv 0.2500 (lower bound 0.2000, ci95 0.0500, iteration 2, exploit.json)" \
        in lines
    figures = "; ".join(map(str, headline(read_metrics(path))))
    assert f"progress        {figures}" in lines and "elo " in figures
    as_json = json.loads(run_cli("show", path, "--json").stdout)
    assert as_json["exploit"] == {"kind": "nash_conv", "value": 0.25, "lower_bound": pytest.approx(0.2),
                                  "ci95": 0.05, "iteration": 2, "status": "completed",
                                  "env_steps_per_response": 1000, "file": "exploit.json"}
    assert [f["figure"] for f in as_json["progress"]] == [f.label for f in headline(read_metrics(path))]
    assert as_json["nash_conv"] is None


def probe(tmp_path: Path, name: str, env: dict[str, Any], weights: dict[str, list[float] | None], *, team: bool = False,
          algorithm: Any = None, episodes: int = 50, mapping: str = "per_player") -> dict[str, float]:
    validated = popmarl.validate({
        "scenario": {"name": "versus_random_probe", "params": {"weights": weights, "team": team}}, "env": env,
        "agents": {"mapping": mapping},
        "algorithm": algorithm or {"name": "exact_matrix_br", "params": {"initial": "uniform"}},
        "evaluation": {"versus_random_episodes": episodes}, "trackers": []}, registries=FOUND)
    return popmarl.run(validated, out=str(tmp_path / name), registries=FOUND)


def test_a_strong_policy_beats_random_play_more_often_than_random_play_does(tmp_path: Path) -> None:
    """Prisoner's dilemma, exactly: defecting against uniform play wins half the games and
    draws the rest (return (0 - 2) / 2); uniform against uniform wins, loses a quarter."""
    env = {"name": "matrix", "params": {"game": "prisoners_dilemma"}}
    found = probe(tmp_path, "pd", env, {"player_0/1": [0.0, 1.0], "player_1/1": [0.5, 0.5]})
    assert found == pytest.approx({
        "versus_random/player_0/win": 0.5, "versus_random/player_0/draw": 0.5, "versus_random/player_0/loss": 0.0,
        "versus_random/player_0/return": -1.0,
        "versus_random/player_1/win": 0.25, "versus_random/player_1/draw": 0.5, "versus_random/player_1/loss": 0.25,
        "versus_random/player_1/return": -1.5})


def test_sampled_shares_sum_to_one_over_every_seat_a_population_plays(tmp_path: Path) -> None:
    """A shared population plays each seat in turn against random play in the other; rock
    against uniform play wins, draws and loses a third of the games, sampled."""
    env = {"name": "sampled_matrix", "params": {"game": "rps"}}
    found = probe(tmp_path, "rps", env, {"shared/1": [1.0, 0.0, 0.0]}, algorithm="schedule", episodes=300,
                  mapping="shared")
    shares = [found[f"versus_random/shared/{o}"] for o in ("win", "draw", "loss")]
    assert sum(shares) == pytest.approx(1.0) and all(0.25 < s < 0.42 for s in shares), shares
    assert set(found) == {f"versus_random/shared/{k}" for k in ("win", "draw", "loss", "return")}


def test_random_tictactoe_wins_more_often_in_the_first_seat(tmp_path: Path) -> None:
    """Uniform play against uniform play (legal moves only): the first seat wins 58.5% of
    the games, the second 28.8%, draws the rest."""
    env = {"name": "openspiel", "params": {"game": "tic_tac_toe", "exact_limit": 0, "observation": "observation"}}
    found = probe(tmp_path, "ttt", env, {"player_0/1": None, "player_1/1": None}, algorithm="random", episodes=400)
    for seat, win in (("player_0", 0.585), ("player_1", 0.288)):
        shares = [found[f"versus_random/{seat}/{o}"] for o in ("win", "draw", "loss")]
        assert sum(shares) == pytest.approx(1.0) and abs(shares[0] - win) < 0.08, (seat, shares)
        assert found[f"versus_random/{seat}/return"] == pytest.approx(shares[0] - shares[2])


def test_a_team_reports_its_return_beside_random_plays(tmp_path: Path) -> None:
    """A common-payoff game (2 where both play 0, 1 where both play 1, else 0): the team
    playing 0 gets 2 + 2; uniform play gets 0.75 a seat."""
    payoffs = np.array([[[2.0, 0.0], [0.0, 1.0]]] * 2)
    np.save(tmp_path / "coordination.npy", payoffs)
    env = {"name": "matrix", "params": {"game": "file", "path": str(tmp_path / "coordination.npy")}}
    found = probe(tmp_path, "team", env, {"player_0/1": [1.0, 0.0], "player_1/1": [1.0, 0.0]}, team=True)
    assert found == pytest.approx({f"versus_random/{p}/{k}": v for p in ("player_0", "player_1")
                                   for k, v in (("team_return", 4.0), ("random_team_return", 1.5), ("return", 2.0))})
    assert str(headline([{"iteration": 5, "nash_conv": None, **found}])[0]) == "team return 4.000 vs random 1.500 (it 5)"


def test_versus_random_is_due_every_few_iterations_where_nash_conv_is_unknown() -> None:
    every = EvaluationConfig().versus_random_every
    assert every > 0 and [i for i in range(1, 3 * every + 1) if due(i, every)] == [every, 2 * every, 3 * every]
    assert not any(due(i, 0) for i in range(10))
    assert needs_versus_random({"iteration": 3, "nash_conv": None}) and not needs_versus_random({"nash_conv": 0.1})
    with pytest.raises(ValueError):
        EvaluationConfig(versus_random_every=-1)
    context: Any = type("Context", (), {"config": type("Config", (), {"evaluation": EvaluationConfig()})()})()
    assert measure_progress(context, {"p": "p/1"}, {"iteration": 1, "nash_conv": None}) == {}
    assert measure_progress(context, {"p": "p/1"}, {"iteration": every, "nash_conv": 0.5}) == {}


LINES = [
    {"iteration": 1, "nash_conv": None, "oracle_gain": 0.5, "approx_nash_conv": 0.75},
    {"iteration": 2, "nash_conv": None, "oracle_gain": 0.25, "versus_random/a/win": 0.8,
     "versus_random/a/draw": 0.05, "versus_random/a/loss": 0.15, "versus_random/a/return": 0.65},
    {"iteration": 3, "nash_conv": None, "oracle_gain": 0.125, "elo/a": 12.4},
]


def test_the_headline_carries_figures_measured_every_few_iterations_with_their_iteration() -> None:
    assert list(map(str, headline(LINES))) == [
        "approx nash_conv 0.7500 (it 1)", "gain 0.1250 (it 3)", "elo a 12 (it 3)",
        "vs random W 80% D 5% L 15% (it 2)"]
    assert list(map(str, headline(LINES[:1]))) == ["approx nash_conv 0.7500 (it 1)", "gain 0.5000 (it 1)"]


def test_exact_nash_conv_is_the_headline_and_a_line_without_figures_says_so() -> None:
    assert list(map(str, headline([*LINES, {"iteration": 4, "nash_conv": 2e-12}]))) == ["nash_conv 2.00e-12"]
    assert list(map(str, headline([{"iteration": 1, "nash_conv": None}]))) == ["progress – (it 1)"]


def test_a_cooperative_line_shows_the_team_return_and_no_win_rate() -> None:
    line = {"iteration": 2, "nash_conv": None, "mean_return/a": 1.0, "mean_return/b": 1.0, "win_rate/a": 0.0,
            "win_rate/b": 0.0, "team_return": 2.0}
    assert list(map(str, headline([line]))) == ["team return 2.000 (it 2)"]
    del line["team_return"]
    assert list(map(str, headline([line]))) == ["return a 1.000 (win 0%), b 1.000 (win 0%) (it 2)"]
