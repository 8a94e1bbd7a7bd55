"""``algorithm: {population: component}``: each population with its own algorithm, in
``psro`` and ``marl``, through resume and ``popmarl eval``; and a mapping that does not
fit the populations is a one-line ConfigError naming its path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import popmarl
from popmarl.builtin.matrix_env import MixedStrategyPolicy
from popmarl.builtin.random_policy import UniformRandomPolicy
from popmarl.cli import main
from popmarl.tools.evaluate import load_run

from testkit.run_files import read_npz, read_summary, without_times
from learning_schedule import ScheduleAlgorithm

#: Exact best responses for player_0 against uniformly random player_1.
MIXED = {"name": None, "player_0": "exact_matrix_br", "player_1": "random"}


def _policy(run: Path, pid: str) -> dict[str, np.ndarray]:
    return read_npz(run / "checkpoints" / "policies" / f"{pid}.npz")


def test_psro_builds_each_population_with_its_own_algorithm(run_inprocess: Any, tmp_path: Path) -> None:
    summary = run_inprocess(algorithm=MIXED, stopping={"max_iterations": 3})
    assert summary["status"] == "completed" and summary["iterations"] == 3
    run = tmp_path / "run"
    for k in range(4):
        assert set(_policy(run, f"player_0/{k}")) == {"probs"}  # exact_matrix_br's mixed strategies
        assert set(_policy(run, f"player_1/{k}")) == {"n_actions"}  # random's uniform policies
    # Against uniform play every action is a best response; an exact one is pure.
    assert sorted(_policy(run, "player_0/1")["probs"].tolist()) == [0.0, 0.0, 1.0]
    saved = yaml.safe_load((run / "config.yaml").read_text())["algorithm"]
    assert saved == {"player_0": {"name": "exact_matrix_br", "params": {"initial": "first"}},
                     "player_1": {"name": "random", "params": {}}}


def test_a_resumed_heterogeneous_run_ends_as_an_uninterrupted_one(run_inprocess: Any, tmp_path: Path) -> None:
    config = {"algorithm": MIXED, "env": {"params": {"game": "random_zero_sum", "size": 5, "seed": 3}}}
    straight = run_inprocess(out="straight", stopping={"max_iterations": 4}, **config)
    run_inprocess(out="cut", stopping={"max_iterations": 2}, **config)
    resumed = run_inprocess(resume="cut", stopping={"max_iterations": 4}, **config)
    assert without_times(resumed) == without_times(straight)
    for pid in ("player_0/4", "player_1/4"):
        for name, array in _policy(tmp_path / "straight", pid).items():
            np.testing.assert_array_equal(_policy(tmp_path / "cut", pid)[name], array)


@pytest.mark.parametrize(("algorithm", "message"), [
    ({**MIXED, "player_2": "random"},
     "algorithm.player_2: no such population; the populations are player_0, player_1"),
    ({"name": None, "player_0": "exact_matrix_br"},
     "algorithm: no algorithm for population(s) player_1; the populations are player_0, player_1 "
     "(or give one algorithm for all)"),
    ({**MIXED, "player_1": {"name": "exact_matrix_br", "params": {"initial": "best"}}},
     "algorithm.player_1.params.initial: 'best' is not allowed; allowed: first, uniform"),
    ({**MIXED, "player_1": {"name": "dqnn"}}, "algorithm.player_1.name: unknown algorithm 'dqnn'"),
])
def test_a_mapping_that_does_not_fit_the_populations_names_its_path(run_inprocess: Any, tmp_path: Path,
                                                                    algorithm: dict[str, Any], message: str) -> None:
    with pytest.raises(popmarl.ConfigError) as raised:
        run_inprocess(algorithm=algorithm)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    assert not (tmp_path / "run").exists()  # through the CLI: test_cli_errors' per-population cases


# -- marl ----------------------------------------------------------------------------------------
@pytest.fixture
def with_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("schedule", ScheduleAlgorithm))


def _marl(**config: Any) -> dict[str, Any]:
    return {"scenario": {"name": "marl", **config}, "solver": None,
            "training": {"max_env_steps": None, "max_episodes": 8, "episodes_per_update": 4},
            "evaluation": {"episodes_per_entry": 4}, "stopping": {"max_iterations": 2}}


def test_marl_trains_a_learner_against_a_frozen_population_of_another_algorithm(
        run_inprocess: Any, tmp_path: Path, with_schedule: None) -> None:
    summary = run_inprocess(algorithm={"name": None, "player_0": "schedule", "player_1": "random"},
                            **_marl(params={"frozen": {"player_1": "initial"}}))
    assert summary["status"] == "completed" and summary["iterations"] == 2
    run = tmp_path / "run"
    np.testing.assert_array_equal(_policy(run, "player_0/2")["probs"], np.eye(3)[1])  # four updates: paper
    assert set(_policy(run, "player_1/0")) == {"n_actions"}


def test_marl_refuses_a_population_whose_algorithm_does_not_learn(run_inprocess: Any, with_schedule: None) -> None:
    with pytest.raises(popmarl.ConfigError) as raised:
        run_inprocess(algorithm={"name": None, "player_0": "schedule", "player_1": "random"}, **_marl())
    assert str(raised.value) == ("algorithm.player_1: random does not learn; the marl scenario trains every "
                                 "population not in scenario.params.frozen with a learning algorithm "
                                 "(e.g. dqn, ppo, a2c)")


# -- popmarl eval ---------------------------------------------------------------------------------
def test_eval_rebuilds_each_population_with_its_own_algorithm(run_inprocess: Any, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Each seat is paid for its own action only (player_0: 0/1/2, player_1: 0/10/20): the
    exact best response plays action 2 (return 2), the random population averages 10."""
    seats = np.array([[[0, 0, 0], [1, 1, 1], [2, 2, 2]], [[0, 10, 20]] * 3], dtype=float)
    np.save(tmp_path / "seats.npy", seats)
    run_inprocess(algorithm=MIXED, env={"params": {"game": "file", "path": str(tmp_path / "seats.npy")}},
                  solver="latest", stopping={"max_iterations": 2})
    loaded = load_run(tmp_path / "run")
    assert [type(p) for p in loaded.pools["player_0"].policies] == [MixedStrategyPolicy]
    assert [type(p) for p in loaded.pools["player_1"].policies] == [UniformRandomPolicy]
    assert main(["eval", str(tmp_path / "run"), "--episodes", "2000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])["populations"]
    assert report["player_0"]["mean_return"] == 2.0
    assert report["player_1"]["mean_return"] == pytest.approx(10.0, abs=1.0)  # sd of the mean 0.18
    assert read_summary(tmp_path / "run")["status"] == "completed"
