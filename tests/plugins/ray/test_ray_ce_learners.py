"""``ce`` with ``training.init: previous`` on Ray: a population's further recommendations
train learners under keys of their own, so the state its carried-on learner returned is
kept, and that learner is rebuilt from it when its learner actor dies."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ray_helpers import KillingBackend, kill_pid, pid_alive, run_within, with_bandit, with_killing_backend

POPULATIONS = ("player_0", "player_1")


def test_carried_on_learners_are_rebuilt_after_an_iteration_with_several_recommendations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Both learner actors are killed before iteration 4; in iteration 3 (on this game,
    whatever the bandits learn) ``ce`` recommends two policies to a population, so the
    actors trained its carried-on learner and a new one for the second recommendation."""
    with_bandit(monkeypatch)
    killed: list[int] = []
    held: dict[str, list[str]] = {}

    def kill_learner_actors(backend: KillingBackend) -> None:
        held.update(backend.held_learners())
        killed.extend(backend.learner_pids().values())
        for pid in killed:
            kill_pid(pid)

    with_killing_backend(monkeypatch, {("train", 4): kill_learner_actors})
    caplog.set_level(logging.WARNING, logger="popmarl_ray")
    config = {"env": {"name": "matrix", "params": {"game": "random_general_sum", "size": 4, "seed": 3}},
              "algorithm": "bandit", "solver": "ce", "stopping": {"max_iterations": 4}, "trackers": [],
              "training": {"max_env_steps": 400, "episodes_per_update": 50, "init": "previous"},
              "backend": {"name": "ray_killing", "params": {"num_rollout_workers": 1}}}
    summary = run_within(config, tmp_path / "run", 600)
    assert summary["status"] == "completed" and summary["iterations"] == 4
    backend = KillingBackend.last
    assert backend is not None and backend.replacements == 2 and not any(pid_alive(pid) for pid in killed)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    several = [p for p in POPULATIONS if f"train/{p}/recommendation1/updates" in metrics[2]]
    assert several, "no population had two recommendations in iteration 3"
    everywhere = {key for keys in held.values() for key in keys}
    for population in several:  # placed per key: the second one on the least busy actor
        assert {population, f"{population}/recommendation1"} <= everywhere
    for population in POPULATIONS:
        assert (f"ray backend: learner actor for {population} died and was replaced; learner {population} rebuilt "
                "from its last checkpointed state") in caplog.text
    assert caplog.text.count("rebuilt from its last checkpointed state") == 2  # new learners need no state
