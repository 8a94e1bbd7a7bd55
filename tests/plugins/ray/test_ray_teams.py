"""Team learners (popmarl-torchrl's ``mappo`` and ``qmix``) in ``marl`` on the ray backend:
they train on what the rollout workers play, drop nothing, and keep each iteration's
budget to within one call's games (the off-policy team too: its workers used to overshoot
by the calls they had in flight); with one worker an on-policy team learns as on local."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from popmarl.runs.rundir import RunDirectory
from ray_helpers import run

from testkit.team_configs import SPEAKER_LISTENER, SPREAD, marl_config

pytest.importorskip("popmarl_torchrl")

#: Env steps (every agent's decision) of one game: 25 moves of each agent.
GAME_STEPS = {"spread": 3 * 25, "speaker_listener": 2 * 25}
BUDGET, GAMES_PER_UPDATE = 1_200, 4


@pytest.mark.parametrize(("algorithm", "mapping", "task", "learner"),
                         [("mappo", "shared", "spread", "shared"),
                          ("qmix", "per_player", "speaker_listener", "speaker_0")])  # a team's key: its first population
def test_a_team_learner_on_ray_learns_from_what_it_plays_within_its_budget(
        algorithm: str, mapping: str, task: str, learner: str, tmp_path: Path) -> None:
    env = SPREAD if task == "spread" else SPEAKER_LISTENER
    config = marl_config(algorithm, env, mapping, iterations=2, env_steps=BUDGET, seed=3)
    config["training"]["episodes_per_update"] = GAMES_PER_UPDATE
    config["backend"] = {"name": "ray", "params": {"num_rollout_workers": 2}}
    config["trackers"] = ["jsonl"]
    summary = run(config, tmp_path / "run")
    assert summary["status"] == "completed", summary
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["iteration"] for line in lines] == [1, 2]
    one_call = GAMES_PER_UPDATE * GAME_STEPS[task]
    for line in lines:
        assert BUDGET <= line["iteration_env_steps"] < BUDGET + one_call, line["iteration_env_steps"]
        assert line["train/dropped_episodes"] == 0
        assert line[f"train/{learner}/updates"] >= 1


def test_an_on_policy_team_on_one_worker_learns_exactly_as_on_local(tmp_path: Path) -> None:
    """Lock step with one worker plays each version's games with the local backend's seeds:
    a ``mappo`` team (joint view, centralized critic) ends with the same policies."""
    runs = {}
    for name, backend in (("local", {"name": "local"}), ("ray", {"name": "ray", "params": {"num_rollout_workers": 1}})):
        config = marl_config("mappo", SPREAD, "shared", iterations=2, env_steps=BUDGET, seed=3)
        config["training"]["episodes_per_update"] = GAMES_PER_UPDATE
        config["backend"] = backend
        summary = run(config, tmp_path / name)
        assert summary["status"] == "completed", summary
        runs[name] = RunDirectory(tmp_path / name)
    ids = summary["populations"]["shared"]["policies"]
    assert ids == ["shared/0", "shared/1", "shared/2"]
    for pid in ids[1:]:
        want, got = runs["local"].load_policy(pid), runs["ray"].load_policy(pid)
        assert want.keys() == got.keys() and all(np.array_equal(want[k], got[k]) for k in want), pid
