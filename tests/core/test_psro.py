"""The PSRO scenario (popmarl.scenario.psro.scenario) end to end, in process: special cases as
configurations, stopping conditions, determinism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from popmarl.builtin.matrix_env import MatrixEnv

from testkit.run_files import (
    assert_same_arrays,
    brute_force_nash_conv,
    collapsed_strategies,
    read_metrics,
    read_npz,
    read_summary,
    without_times,
)

#: Sampled evaluation of random policies: the only run whose numbers depend on the run seed.
SAMPLED = {"algorithm": "random", "evaluation": {"exact": "never", "episodes_per_entry": 20},
           "env": {"params": {"game": "random_zero_sum", "size": 4, "seed": 1}}, "stopping": {"max_iterations": 3}}


def test_same_seed_same_run(run_inprocess, tmp_path: Path) -> None:
    a = run_inprocess(out="a", seed=3, **SAMPLED)
    b = run_inprocess(out="b", seed=3, **SAMPLED)
    assert without_times(a) == without_times(b)
    assert (tmp_path / "a" / "payoffs.npz").read_bytes() == (tmp_path / "b" / "payoffs.npz").read_bytes()
    assert [without_times(m) for m in read_metrics(tmp_path / "a")] == [
        without_times(m) for m in read_metrics(tmp_path / "b")]


def test_different_run_seeds_sample_differently(run_inprocess, tmp_path: Path) -> None:
    run_inprocess(out="a", seed=3, **SAMPLED)
    run_inprocess(out="b", seed=4, **SAMPLED)
    a, b = read_npz(tmp_path / "a" / "payoffs.npz"), read_npz(tmp_path / "b" / "payoffs.npz")
    assert not np.allclose(a["payoffs"], b["payoffs"])


def test_different_game_seeds_make_different_games(run_inprocess, tmp_path: Path) -> None:
    game = {"game": "random_general_sum", "size": 5}
    a = run_inprocess(out="a", env={"params": {**game, "seed": 1}})
    b = run_inprocess(out="b", env={"params": {**game, "seed": 2}})
    again = run_inprocess(out="c", env={"params": {**game, "seed": 1}})
    assert without_times(a) == without_times(again) != without_times(b)
    assert not np.allclose(read_npz(tmp_path / "a" / "payoffs.npz")["payoffs"],
                           read_npz(tmp_path / "b" / "payoffs.npz")["payoffs"])


def test_double_oracle_with_uniform_meta_strategy_is_fictitious_play(run_inprocess, tmp_path: Path) -> None:
    """Each new policy is the exact best response to the uniform mixture of the opponent's pool."""
    summary = run_inprocess(env={"params": {"game": "random_zero_sum", "size": 5, "seed": 8}},
                            stopping={"max_iterations": 6})
    game = MatrixEnv(game="random_zero_sum", size=5, seed=8).payoffs
    run = tmp_path / "run"

    def probs(policy_id: str) -> np.ndarray:
        population, index = policy_id.rsplit("/", 1)
        return read_npz(run / "checkpoints" / "policies" / population / f"{index}.npz")["probs"]

    pools = [summary["populations"][p]["policies"] for p in ("player_0", "player_1")]
    for i in range(1, 7):
        mixes = [np.mean([probs(pid) for pid in pool[:i]], axis=0) for pool in pools]
        best_0 = int(np.argmax(game[0] @ mixes[1]))
        best_1 = int(np.argmax(mixes[0] @ game[1]))
        assert probs(pools[0][i]).tolist() == np.eye(5)[best_0].tolist(), i
        assert probs(pools[1][i]).tolist() == np.eye(5)[best_1].tolist(), i


def test_latest_solver_is_self_play_and_cycles_in_rps(run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(solver="latest", stopping={"max_iterations": 6})
    meta = summary["populations"]["player_0"]["meta_strategy"]
    assert meta == [0.0] * 6 + [1.0]
    # Best response to the latest pure strategy: rock -> paper -> scissors -> rock ...
    strategies = collapsed_strategies(tmp_path / "run", summary, ("player_0", "player_1"))
    assert summary["nash_conv"] == pytest.approx(2.0)  # a pure profile of rps is never an equilibrium
    assert summary["nash_conv"] == pytest.approx(brute_force_nash_conv(MatrixEnv().payoffs, strategies))


def test_target_nash_conv_stops_early(run_inprocess) -> None:
    summary = run_inprocess(stopping={"max_iterations": 500, "target_nash_conv": 0.5})
    assert summary["status"] == "completed" and summary["stop_reason"] == "target_nash_conv"
    assert summary["nash_conv"] <= 0.5 and summary["iterations"] < 500


def test_self_play_in_the_prisoners_dilemma_finds_mutual_defection(run_inprocess) -> None:
    summary = run_inprocess(env={"params": {"game": "prisoners_dilemma"}}, solver="latest",
                            stopping={"max_iterations": 1})
    assert summary["nash_conv"] == 0.0 and summary["exploitability"] is None
    assert summary["meta_game_values"] == {"player_0": -2.0, "player_1": -2.0}


def test_max_wall_time_stops_the_run(run_inprocess) -> None:
    summary = run_inprocess(stopping={"max_iterations": 10**6, "max_wall_time_s": 0.5})
    assert summary["status"] == "stopped" and summary["stop_reason"] == "max_wall_time_s"
    assert summary["iterations"] < 10**6 and summary["wall_time_s"] >= 0.5


def test_zero_iterations_is_the_initial_population_only(run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(stopping={"max_iterations": 0})
    assert summary["status"] == "completed" and summary["iterations"] == 0
    assert summary["populations"]["player_0"]["policies"] == ["player_0/0"]
    assert summary["nash_conv"] == pytest.approx(2.0)  # rock vs rock
    metrics = tmp_path / "run" / "metrics.jsonl"
    assert not metrics.exists() or metrics.read_text() == ""


def test_the_initial_population_is_the_algorithms_initial_policy(run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(algorithm={"name": "exact_matrix_br", "params": {"initial": "uniform"}},
                            stopping={"max_iterations": 0})
    assert summary["nash_conv"] == pytest.approx(0.0)  # uniform play is rps's equilibrium
    policies = read_npz(tmp_path / "run" / "checkpoints" / "policies" / "player_0" / "0.npz")
    np.testing.assert_allclose(policies["probs"], [1 / 3] * 3)


def test_summary_records_meta_game_values(run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(env={"params": {"game": "matching_pennies"}}, stopping={"max_iterations": 2})
    values = read_npz(tmp_path / "run" / "payoffs.npz")["payoffs"]
    mix = [np.asarray(summary["meta_strategies"][a]) for a in ("player_0", "player_1")]
    expected = [mix[0] @ values[k] @ mix[1] for k in range(2)]
    assert [summary["meta_game_values"][a] for a in ("player_0", "player_1")] == pytest.approx(expected)
    assert summary == read_summary(tmp_path / "run")


def test_metrics_lines_carry_the_documented_fields(run_inprocess, tmp_path: Path) -> None:
    run_inprocess(stopping={"max_iterations": 2})
    for line in read_metrics(tmp_path / "run"):
        for key in ("iteration", "nash_conv", "exploitability", "population_size/player_0", "meta_entropy/player_0",
                    "env_steps", "steps_per_s", "wall_time_s", "solver/meta_nash_conv"):
            assert key in line, key
        assert line["meta_entropy/player_0"] == pytest.approx(np.log(line["population_size/player_0"]))


def test_identical_runs_via_resume_and_straight_have_identical_payoff_files(run_inprocess, tmp_path: Path) -> None:
    run_inprocess(out="a", **SAMPLED)
    run_inprocess(out="b", **{**SAMPLED, "stopping": {"max_iterations": 1}})
    run_inprocess(resume="b", **SAMPLED)
    assert_same_arrays(read_npz(tmp_path / "a" / "payoffs.npz"), read_npz(tmp_path / "b" / "payoffs.npz"))
