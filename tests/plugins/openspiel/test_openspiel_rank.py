"""``popmarl rank`` on exact-oracle Kuhn poker runs, and PSRO's ``elo/`` metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import popmarl
from popmarl.cli import main
from popmarl.gametheory.ratings import elo

CONFIG = {
    "scenario": "psro", "seed": 0,
    "env": {"name": "openspiel", "params": {"game": "kuhn_poker"}},
    "algorithm": {"name": "exact_br"}, "solver": {"name": "nash"},
    "stopping": {"max_iterations": 3}, "trackers": [],
}


def _run(tmp_path: Path, out: str, **changes: Any) -> Path:
    config = {**CONFIG, **changes}
    path = tmp_path / f"{out}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    popmarl.run(popmarl.load_config(str(path)), out=str(tmp_path / out))
    return tmp_path / out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("rank")
    return _run(tmp, "nash"), _run(tmp, "uniform", solver={"name": "uniform"}, stopping={"max_iterations": 2})


def _rank(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["rank", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])


def test_rank_rates_the_policies_of_two_runs_per_seat_and_caches(runs: tuple[Path, Path],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    nash, uniform = runs
    for run in runs:
        (run / "rank.json").unlink(missing_ok=True)
    report = _rank(capsys, str(nash), str(uniform), "--all")
    assert report["mode"] == "per_seat" and report["exact"] is True
    players = report["players"]
    seat0 = [p for p in players if p["seat"] == "player_0"]
    seat1 = [p for p in players if p["seat"] == "player_1"]
    assert len(seat0) == len(seat1) == 4 + 3  # --all: both runs' every policy (3 + 2 iterations, plus the start)
    assert report["pairs"] == report["played"] == 7 * 7
    assert all({"elo", "alpharank", "nash_averaging", "nash_weight"} <= set(p) for p in players)
    assert sum(p["alpharank"] for p in seat0) == pytest.approx(1.0)
    assert sum(p["nash_weight"] for p in seat1) == pytest.approx(1.0)
    assert min(p["elo"] for p in players) == 0.0
    # Nash averaging: the maximum-entropy Nash of the zero-sum cross-play game; no seat-0
    # policy earns more against it than its value, nor a seat-1 policy.
    value = sum(p["nash_weight"] * p["nash_averaging"] for p in seat0)
    assert max(p["nash_averaging"] for p in seat0) <= value + 1e-6
    assert max(p["nash_averaging"] for p in seat1) <= -value + 1e-6
    # The uniform random start (policy 0 of each seat) is the weakest seat-0 policy's
    # equal or worse in Nash averaging: exact best responses exploit it.
    start = next(p for p in seat0 if p["player"] == "nash:player_0/0")
    assert start["nash_averaging"] == pytest.approx(min(p["nash_averaging"] for p in seat0))
    assert json.loads((nash / "rank.json").read_text())["pairings"]

    again = _rank(capsys, str(nash), str(uniform), "--all")
    assert again["played"] == 0 and again["players"] == players  # all from the caches: no game played
    # Default: only positive meta-strategy weight; a subset of the cached pairings.
    support = _rank(capsys, str(nash), str(uniform))
    assert support["played"] == 0 and len(support["players"]) < len(players)


def test_rank_elo_is_the_bipartite_fit_of_the_exact_outcomes(runs: tuple[Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """One run alone: the Elo equals :func:`elo` of its exact win/draw/loss probabilities
    (times ``--episodes``) as a seat-0-against-seat-1 table, read back from the cache."""
    nash, _ = runs
    report = _rank(capsys, str(nash), "--all", "--episodes", "50")
    pairings = json.loads((nash / "rank.json").read_text())["pairings"]
    ids = [p["policy"] for p in report["players"]]
    n0 = sum(p["seat"] == "player_0" for p in report["players"])
    won, drawn = np.zeros((len(ids), len(ids))), np.zeros((len(ids), len(ids)))
    for key, entry in pairings.items():
        _, row, _, column, episodes, _ = json.loads(key)
        if episodes != 50:
            continue
        i, j = ids.index(row), n0 + ids[n0:].index(column)
        win, draw, loss = np.asarray(entry["outcomes"]) * 50
        won[i, j], won[j, i], drawn[i, j], drawn[j, i] = win, loss, draw, draw
    np.testing.assert_allclose([p["elo"] for p in report["players"]], elo(won, drawn), atol=1e-9)


def test_rank_of_a_shared_run_plays_both_seat_orders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path, "shared", env={"name": "matrix", "params": {"game": "rps"}}, agents={"mapping": "shared"},
               algorithm={"name": "exact_matrix_br"}, solver={"name": "uniform"})
    report = _rank(capsys, str(run), "--all")
    assert report["mode"] == "shared" and {p["seat"] for p in report["players"]} == {"both"}
    n = len(report["players"])
    assert report["pairs"] == n * (n - 1) // 2
    pairings = json.loads((run / "rank.json").read_text())["pairings"]
    assert len(pairings) == n * (n - 1)  # every pair in both seat orders
    # Agent-vs-agent Nash averaging: ratings at most 0, exactly 0 on the support.
    assert all(p["nash_averaging"] <= 1e-6 for p in report["players"])
    assert all(abs(p["nash_averaging"]) < 1e-6 for p in report["players"] if p["nash_weight"] > 1e-3)


def test_rank_refuses_bad_input_in_one_line(runs: tuple[Path, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    nash, uniform = runs
    other = _run(tmp_path, "leduc", env={"name": "openspiel", "params": {"game": "leduc_poker"}},
                 stopping={"max_iterations": 1})
    three = _run(tmp_path, "kuhn3", env={"name": "openspiel", "params": {"game": "kuhn_poker",
                                                                         "game_params": {"players": 3}}},
                 stopping={"max_iterations": 1})
    cases = {
        (str(nash), str(other)): "different env",
        (str(three),): "two-player games",
        (str(nash), str(nash)): "given twice",
        (str(tmp_path / "missing"),): "no such run directory",
        (str(nash), str(uniform), "--all", "--max-pairs", "3"): "exceed --max-pairs 3",
    }
    for args, message in cases.items():
        before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("rank.json")}
        assert main(["rank", *args]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and message in captured.err
        assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("rank.json")} == before  # nothing written


def test_psro_elo_metrics_leave_the_run_as_it_was(tmp_path: Path) -> None:
    """``evaluation.ratings``: each iteration's ``elo/<population>`` is the newest policy's
    Elo in the bipartite fit of the whole table's exact outcomes, anchored at player_0's
    start; the run's own figures are those of a run without it, also after a resume."""
    plain = _run(tmp_path, "plain")
    rated = _run(tmp_path, "rated", evaluation={"ratings": True}, stopping={"max_iterations": 2})
    popmarl.run(popmarl.load_config(str(tmp_path / "rated.yaml"), ["stopping.max_iterations=3"]),
                resume=str(rated))
    lines = [json.loads(line) for line in (rated / "metrics.jsonl").read_text().splitlines()]
    plain_lines = [json.loads(line) for line in (plain / "metrics.jsonl").read_text().splitlines()]
    assert [m["nash_conv"] for m in lines] == [m["nash_conv"] for m in plain_lines]
    assert [m["meta_strategy/player_0"] for m in lines] == [m["meta_strategy/player_0"] for m in plain_lines]
    assert all("elo/player_0" in m and "elo/player_1" in m for m in lines)
    assert not any(k.startswith("elo/") for k in plain_lines[0])
    fresh = _run(tmp_path, "fresh", evaluation={"ratings": True})
    fresh_lines = [json.loads(line) for line in (fresh / "metrics.jsonl").read_text().splitlines()]
    assert [m["elo/player_1"] for m in lines] == [m["elo/player_1"] for m in fresh_lines]  # resumed: identical
    assert len({m["elo/player_0"] for m in lines}) > 1
