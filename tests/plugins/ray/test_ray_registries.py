"""``popmarl.run(config, out, registries=...)`` on the ray backend: components registered in
the driver only (``with_component``) are validated and built from the given registries,
and the actors get the env and algorithm by value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import popmarl
from popmarl.builtin.solvers import Latest

from ray_helpers import MATRIX_EXACT, Bandit, ray_backend


class NewestTwice(Latest):
    """``newest``: self-play, counting its calls (test only; runs on the driver)."""

    calls = 0

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        NewestTwice.calls += 1
        return super().solve(payoffs)


def test_extra_algorithm_and_solver_reach_the_run_and_the_actors(tmp_path: Path) -> None:
    found = (popmarl.Registries.current()
             .with_component("algorithms", "bandit", Bandit)
             .with_component("solvers", "newest", NewestTwice))
    raw = {**MATRIX_EXACT, "algorithm": "bandit", "solver": "newest", "stopping": {"max_iterations": 2},
           "training": {"max_env_steps": 400, "episodes_per_update": 50, "window": 100},
           "backend": ray_backend(num_rollout_workers=1)}
    config = popmarl.validate(raw, registries=found)
    NewestTwice.calls = 0
    summary = popmarl.run(config, out=str(tmp_path / "run"), registries=found)
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert NewestTwice.calls == 3
    assert summary["env_steps"] >= 2 * 2 * 400  # each population's learner trained twice on the workers
    for population in summary["populations"].values():
        assert len(population["policies"]) == 3 and population["meta_strategy"] == [0.0, 0.0, 1.0]
    assert "bandit" not in popmarl.algorithms and "newest" not in popmarl.solvers


def test_each_population_gets_its_own_algorithm_on_the_actors(tmp_path: Path) -> None:
    """An exact oracle for player_0 (answered in its learner actor) against the driver-only
    ``bandit`` for player_1 (shipped by value, trained on the workers), with
    ``training.init: previous``: the bandit learner carries on in the same actor."""
    found = popmarl.Registries.current().with_component("algorithms", "bandit", Bandit)
    raw = {**MATRIX_EXACT, "algorithm": {"player_0": "exact_matrix_br", "player_1": "bandit"},
           "stopping": {"max_iterations": 2}, "backend": ray_backend(num_rollout_workers=1),
           "training": {"max_env_steps": 400, "episodes_per_update": 50, "window": 100, "init": "previous"}}
    summary = popmarl.run(popmarl.validate(raw, registries=found), out=str(tmp_path / "run"), registries=found)
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert [len(p["policies"]) for p in summary["populations"].values()] == [3, 3]
    assert 2 * 400 <= summary["env_steps"]  # only player_1's learner played training episodes
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(m["train/player_1/updates"] >= 1 for m in metrics)
    assert all("train/player_0/updates" not in m for m in metrics)  # the exact oracle trained nothing
