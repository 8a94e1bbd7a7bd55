"""Pipeline PSRO (``training.pipeline``): several best responses per population learn at
once, each against the restricted game below it; ``pipeline: 1`` is PSRO itself, and a
pipeline run killed and resumed ends as an uninterrupted one."""

from __future__ import annotations

import json
import os
import random
from typing import Any

import pytest

from testkit.run_files import assert_same_run, kill_at_random, read_metrics, read_summary, without_times

SMALL_DQN = {"name": "dqn", "params": {"hidden": [32], "learning_starts": 64, "batch_size": 32,
                                       "eps_decay_steps": 1_000, "target_update_freq": 20}}


def _psro(*, iterations: int = 3, **training: Any) -> dict[str, Any]:
    return {"scenario": "psro", "seed": 3, "env": {"name": "openspiel", "params": {"game": "kuhn_poker"}},
            "agents": {"mapping": "per_player"}, "algorithm": SMALL_DQN, "solver": {"name": "nash"},
            "stopping": {"max_iterations": iterations},
            "training": {"max_env_steps": 800, "episodes_per_update": 32, "num_envs": 16, **training},
            "trackers": ["jsonl"]}


def test_a_pipeline_of_one_is_psro(write_config, run_cli, tmp_path) -> None:
    for name, training in (("plain", {}), ("one", {"pipeline": 1})):
        done = run_cli("run", write_config(f"{name}.yaml", **_psro(**training)), "--out", name, timeout=900)
        assert done.returncode == 0, done
    plain, one = read_metrics(tmp_path / "plain"), read_metrics(tmp_path / "one")
    assert [without_times(m) for m in plain] == [without_times(m) for m in one]
    assert not any(key.startswith("train/player_0/level") for key in plain[-1])


def test_a_pipeline_trains_its_levels_and_freezes_the_lowest(write_config, run_cli, tmp_path) -> None:
    done = run_cli("run", write_config(**_psro(iterations=4, pipeline=3)), "--out", "run", timeout=900)
    assert done.returncode == 0, done
    run = tmp_path / "run"
    metrics, summary = read_metrics(run), read_summary(run)
    # One policy per population and iteration, as PSRO; three learners each learn meanwhile.
    assert [m["population_size/player_0"] for m in metrics] == [2, 3, 4, 5]
    assert all(m["iteration_env_steps"] >= 2 * 3 * 800 for m in metrics)
    for level in ("player_0", "player_0/level1", "player_0/level2"):
        assert f"train/{level}/gradient_steps" in metrics[-1]
    # A learner carries on as it moves down: the one frozen at iteration 3 started at 1 (top
    # level) and trained three budgets, more gradient steps than the new top one has.
    last = metrics[-1]
    assert last["train/player_0/gradient_steps"] > last["train/player_0/level2/gradient_steps"]
    # The active learners (not the frozen ones) are checkpointed, named after the policy each becomes.
    state = json.loads((run / "checkpoints" / "state.json").read_text())
    held = sorted(p.name for p in (run / "checkpoints" / state["learners"]).iterdir())
    assert held == ["player_0.br5", "player_0.br6", "player_1.br5", "player_1.br6"]
    assert summary["populations"]["player_0"]["policies"][-1] == "player_0/4"


@pytest.mark.parametrize(("training", "message"), [
    ({"pipeline": 2, "init": "previous"}, "training.init: previous carries one learner on per population"),
    ({"pipeline": 0}, "training.pipeline"),
])
def test_a_pipeline_refuses_what_it_cannot_run(training, message, write_config, run_cli, tmp_path) -> None:
    done = run_cli("run", write_config(**_psro(**training)), "--out", "run")
    assert done.returncode == 2 and message in done.stderr, done
    assert not (tmp_path / "run").exists()


def test_a_pipeline_of_exact_oracles_is_refused(write_config, run_cli) -> None:
    done = run_cli("run", write_config(**{**_psro(pipeline=2), "algorithm": {"name": "exact_br"}}), "--out", "run")
    assert done.returncode == 2, done
    assert "training.pipeline: exact_br answers exactly, at once" in done.stderr, done


ITERATIONS = 6
SEED = int(os.environ.get("POPMARL_TEST_KILL_SEED", random.SystemRandom().randrange(1 << 30)))


@pytest.mark.slow
def test_a_pipeline_killed_and_resumed_equals_an_uninterrupted_run(write_config, run_cli, popen_cli,
                                                                  tmp_path) -> None:
    config = write_config(**_psro(iterations=ITERATIONS, pipeline=3))
    straight = run_cli("run", config, "--out", "straight", timeout=600)
    assert straight.returncode == 0, straight
    reference = tmp_path / "straight"
    rng = random.Random(SEED)
    run = tmp_path / "killed"
    kill_at_random(popen_cli("run", config, "--out", run), run, reference, rng, iterations=ITERATIONS)
    context = f"POPMARL_TEST_KILL_SEED={SEED}"
    assert len(read_metrics(run)) < ITERATIONS, context
    resumed = run_cli("run", "--resume", run, timeout=600)
    assert resumed.returncode == 0, f"{context}\n{resumed}"
    assert_same_run(run, reference, context)
