"""``marl`` with a frozen population loaded from another run (``scenario.params.frozen:
{population: RUN_DIR}``): its policies are copied at the start, each episode draws one
from the source run's meta-strategy, the evaluation plays that mixture, a bad source is
one config error (exit status 2, nothing written), and ``--resume`` after ``kill -9`` is
identical without the source run.

The source runs are tiny: ``psro`` with the exact matrix oracle on rock-paper-scissors
(its policies are pure strategies, so the mixture is visible in the returns), and
``psro`` with the ``random`` oracle on mpe2 ``simple_adversary_v3``; the learners are
popmarl-tianshou's ``ppo``."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import popmarl
from popmarl.data.episodes import Observations

pytest.importorskip("popmarl_tianshou")
from testkit.run_files import (
    assert_same_run, kill_at_random, read_metrics, read_npz, tree_digest)

PPO = {"name": "ppo", "params": {"hidden": [16], "batch_size": 64, "epochs": 2}}
#: The source run's mixture over player_1's three policies (edited in: psro's uniform
#: solver gives 1/3 each); the zero-weight policy is not copied.
MIXTURE = [0.6, 0.0, 0.4]
KILL_SEED = int(os.environ.get("POPMARL_TEST_KILL_SEED", random.SystemRandom().randrange(1 << 30)))


#: The source run: psro with the exact oracle on rock-paper-scissors.
SOURCE = {"env": {"name": "matrix", "params": {"game": "rps"}}, "algorithm": "exact_matrix_br", "solver": "uniform",
          "stopping": {"max_iterations": 2}, "trackers": []}


def _write(directory: Path, name: str, config: dict[str, Any]) -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _marl(source: Any, **overrides: Any) -> dict[str, Any]:
    """A marl run of ppo (player_0) against player_1 frozen from ``source``."""
    config: dict[str, Any] = {
        "scenario": {"name": "marl", "params": {"frozen": {"player_1": source}}},
        "env": {"name": "matrix", "params": {"game": "rps"}}, "trackers": [],
        "algorithm": {"player_0": PPO, "player_1": "exact_matrix_br"}, "seed": 5,
        "stopping": {"max_iterations": 2},
        "training": {"max_env_steps": 1000, "episodes_per_update": 100, "num_envs": 16},
        "evaluation": {"episodes_per_entry": 100},
    }
    config.update(overrides)
    return config


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A finished psro run (two iterations: three pure policies per player) whose
    player_1 meta-strategy is :data:`MIXTURE`."""
    popmarl.run(popmarl.load_config(_write(tmp_path, "source.yaml", SOURCE)), out=str(tmp_path / "source"))
    summary_file = tmp_path / "source" / "summary.json"
    summary = json.loads(summary_file.read_text())
    summary["populations"]["player_1"]["meta_strategy"] = MIXTURE
    summary_file.write_text(json.dumps(summary))
    return tmp_path / "source"


def _run(tmp_path: Path, config: dict[str, Any], name: str = "run") -> dict[str, Any]:
    path = _write(tmp_path, f"{name}.yaml", config)
    return popmarl.run(popmarl.load_config(path), out=str(tmp_path / name))


def test_the_frozen_seat_draws_from_the_source_meta_strategy(tmp_path: Path, source: Path) -> None:
    summary = _run(tmp_path, _marl(str(source)))
    run = tmp_path / "run"
    # The support is copied (renumbered), with its probabilities; nothing else is.
    assert summary["populations"]["player_1"] == {"policies": ["player_1/0", "player_1/1"], "meta_strategy": [0.6, 0.4]}
    assert summary["frozen_sources"]["player_1"] == {
        "run": str(source.resolve()), "population": "player_1", "iteration": 2, "main": False,
        "policies": ["player_1/0", "player_1/2"], "meta_strategy": [0.6, 0.4]}
    for mine, theirs in (("0", "0"), ("1", "2")):
        copied = read_npz(run / "checkpoints" / "policies" / "player_1" / f"{mine}.npz")
        original = read_npz(source / "checkpoints" / "policies" / "player_1" / f"{theirs}.npz")
        assert sorted(copied) == sorted(original) and all(np.array_equal(copied[k], original[k]) for k in copied)
    assert sorted(p.name for p in (run / "checkpoints" / "policies" / "player_1").iterdir()) == ["0.npz", "1.npz"]

    # Each training episode drew player_1's policy from the mixture (500 episodes a round).
    lines = read_metrics(run)
    draws = np.array([[line["frozen_plays/player_1/0"], line["frozen_plays/player_1/1"]] for line in lines])
    assert all(d.sum() == line["episodes"] == 500 for d, line in zip(draws, lines))
    assert abs(draws[:, 0].sum() - 0.6 * draws.sum()) < 5 * np.sqrt(draws.sum() * 0.6 * 0.4), draws
    assert all(line["meta_strategy/player_1"] == [0.6, 0.4] for line in lines)

    # The evaluation (exact on a matrix game) is the newest ppo policy's return against the mixture.
    loaded = popmarl.load_run(run)
    obs = Observations(obs=np.ones((1, 1), dtype=np.float32))
    learner = loaded.populations["player_0"].policy(summary["populations"]["player_0"]["policies"][-1])
    mine = learner.probabilities(obs)[0]
    frozen = loaded.populations["player_1"]
    theirs = sum(w * frozen.policy(pid).probabilities(obs)[0] for pid, w in zip(frozen.policy_ids, frozen.mixture))
    payoffs = popmarl.envs.load("matrix")().payoffs
    expected = float(mine @ payoffs[0] @ theirs)
    assert lines[-1]["mean_return/player_0"] == pytest.approx(expected, abs=1e-9)
    assert summary["mean_returns"] == {"player_0": pytest.approx(expected, abs=1e-9),
                                       "player_1": pytest.approx(-expected, abs=1e-9)}
    # popmarl eval / load_run of the new run play the same mixture, from its own copies.
    np.testing.assert_allclose(frozen.mixture, [0.6, 0.4])
    # ... at every iteration, the first included (before any training: the initial ppo policy).
    for iteration in (0, 1):
        past = popmarl.load_run(run, iteration=iteration)
        assert past.populations["player_1"].policy_ids == ("player_1/0", "player_1/1"), iteration
        np.testing.assert_allclose(past.populations["player_1"].mixture, [0.6, 0.4])
    assert popmarl.load_run(run, iteration=0).populations["player_0"].policy_ids == ("player_0/0",)


def test_the_explicit_form_names_a_population_and_an_iteration(tmp_path: Path, source: Path) -> None:
    """``{run, population, iteration}``: player_0's policies after iteration 1 (psro's
    uniform mixture over two) play this run's player_1 (rps: the same spaces)."""
    summary = _run(tmp_path, _marl({"run": str(source), "population": "player_0", "iteration": 1},
                                                 stopping={"max_iterations": 1}))
    assert summary["populations"]["player_1"] == {"policies": ["player_1/0", "player_1/1"],
                                                  "meta_strategy": [0.5, 0.5]}
    assert summary["frozen_sources"]["player_1"]["policies"] == ["player_0/0", "player_0/1"]
    assert summary["frozen_sources"]["player_1"]["iteration"] == 1


@pytest.mark.parametrize(("frozen", "overrides", "expected"), [
    ("{source}/nothing", {}, "no such policy file or run directory"),
    ("{source}/checkpoints", {}, "is not a popmarl run directory (no config.yaml)"),
    ({"run": "{source}", "population": "player_7"}, {}, "has no population 'player_7' (did you mean"),
    ({"run": "{source}", "iteration": 9}, {}, "the run at"),
    ({"run": "{source}", "main": True}, {}, "main: "),
    ({"run": "{source}", "populaton": "player_0"}, {}, "frozen.player_1.populaton: unknown key"),
    ("{source}", {"algorithm": {"player_0": PPO, "player_1": "random"}},
     "was trained with algorithm {name: exact_matrix_br"),
    ("{source}", {"env": {"name": "matrix", "params": {"game": "prisoners_dilemma"}}}, "the spaces must match"),
])
def test_a_bad_source_is_one_config_error_before_anything_is_written(tmp_path: Path, source: Path,
                                                                     frozen, overrides, expected) -> None:
    filled = json.loads(json.dumps(frozen).replace("{source}", str(source)))
    with pytest.raises(popmarl.ConfigError) as error:
        _run(tmp_path, _marl(filled, **overrides))
    message = str(error.value)
    assert message.startswith("scenario.params.frozen.player_1") and expected in message, message
    assert "\n" not in message
    assert not (tmp_path / "run").exists()


def test_a_directory_that_is_not_a_run_exits_2_from_the_cli(tmp_path: Path, run_cli) -> None:
    (tmp_path / "not-a-run").mkdir()
    config = _write(tmp_path, "config.yaml", _marl("not-a-run"))
    before = tree_digest(tmp_path)
    result = run_cli("run", config, "--out", "run")
    assert result.returncode == 2, result
    assert result.stdout == "" and result.stderr.count("\n") == 1, result
    line = result.stderr.strip()
    assert "scenario.params.frozen.player_1: not-a-run is not a popmarl run directory" in line
    assert "an earlier popmarl run's directory" in line  # what is allowed
    assert tree_digest(tmp_path) == before


def test_mpe_good_agents_learn_against_adversaries_of_another_run(tmp_path: Path) -> None:
    """The example's shape on simple_adversary: the adversaries of a psro run play a
    marl team of ppo good agents (spaces checked by population, not by seat)."""
    mpe = {"env": {"name": "pettingzoo", "params": {"module": "mpe2.simple_adversary_v3",
                                                     "kwargs": {"N": 2, "max_cycles": 5, "continuous_actions": False}}},
           "agents": {"mapping": {"adversary_.*": "adversary", "agent_.*": "agent"}},
           "evaluation": {"episodes_per_entry": 8, "num_envs": 4}, "trackers": []}
    _run(tmp_path, {**mpe, "algorithm": "random", "solver": "uniform", "stopping": {"max_iterations": 1}}, name="psro")
    summary = _run(tmp_path, {
        **mpe, "scenario": {"name": "marl", "params": {"frozen": {"adversary": str(tmp_path / "psro")}}},
        "algorithm": {"adversary": "random", "agent": PPO}, "stopping": {"max_iterations": 1},
        "training": {"max_env_steps": 600, "episodes_per_update": 8, "num_envs": 4}})
    assert summary["status"] == "completed"
    assert summary["populations"]["adversary"] == {"policies": ["adversary/0", "adversary/1"],
                                                   "meta_strategy": [0.5, 0.5]}
    (line,) = read_metrics(tmp_path / "run")
    assert line["frozen_plays/adversary/0"] + line["frozen_plays/adversary/1"] == line["episodes"] > 0
    assert np.isfinite(line["mean_return/agent"])
    # The good agents' spaces are not the adversary's: freezing them from it is refused.
    with pytest.raises(popmarl.ConfigError, match="the spaces must match"):
        _run(tmp_path, {
            **mpe, "scenario": {"name": "marl", "params": {"frozen": {
                "agent": {"run": str(tmp_path / "psro"), "population": "adversary"}}}},
            "algorithm": {"adversary": PPO, "agent": "random"}}, name="bad")


ITERATIONS = 8


@pytest.mark.slow
def test_killed_and_resumed_without_the_source_equals_an_uninterrupted_run(tmp_path: Path, source: Path,
                                                                          run_cli, popen_cli) -> None:
    config = _write(tmp_path, "config.yaml", _marl(str(source), stopping={"max_iterations": ITERATIONS},
                                  training={"max_env_steps": 400, "episodes_per_update": 50, "num_envs": 16}))
    straight = run_cli("run", config, "--out", "straight", timeout=600)
    assert straight.returncode == 0, straight
    reference = tmp_path / "straight"

    rng = random.Random(KILL_SEED)
    run = tmp_path / "killed"
    kill_at_random(popen_cli("run", config, "--out", run), run, reference, rng, iterations=ITERATIONS)
    context = f"POPMARL_TEST_KILL_SEED={KILL_SEED}"
    assert len(read_metrics(run)) < ITERATIONS, context

    # The source run is gone (its policies were copied at the start): resume and eval need none of it.
    shutil.move(source, tmp_path / "moved")
    resumed = run_cli("run", config, "--resume", run, timeout=600)
    assert resumed.returncode == 0, f"{context}\n{resumed}"
    assert_same_run(run, reference, context)
    last = f"checkpoints/policies/player_0/{ITERATIONS}.npz"
    mine, theirs = read_npz(run / last), read_npz(reference / last)
    assert sorted(mine) == sorted(theirs) and all(np.array_equal(mine[k], theirs[k]) for k in mine), context
    evaluated = run_cli("eval", run, "--opponent", "random", "--episodes", "20")
    assert evaluated.returncode == 0, evaluated
    assert yaml.safe_load((run / "config.yaml").read_text())["scenario"]["params"]["frozen"] == {"player_1": str(source)}
