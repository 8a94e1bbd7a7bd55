"""What the asynchronous learner learns from: ``keep: best`` keeps the version that
played best (as on the local backend), and on-policy learners update only on episodes
of their current weights."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

import learning_schedule
import popmarl
from learning_schedule import ScheduleAlgorithm
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.interfaces.algorithm import PolicySpace, TrainerContext
from popmarl.engine.learners import Learners
from popmarl.gametheory.payoffs import PayoffTable
from popmarl.data.episodes import Episode, EpisodeBatch
from popmarl.data.learners import LearnerSpec
from popmarl.data.policies import PolicySpec
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.interfaces.trainer import Trainer
from popmarl.engine.learner_loop import run_task
from popmarl_ray.feed import RayFeed, stream_of
from popmarl_ray.servers import EpisodeServerActor, ParameterServerActor
from ray_helpers import installed, ray_backend, run

ray.cloudpickle.register_pickle_by_value(sys.modules[learning_schedule.__name__])  # the actors cannot import it

needs_tianshou = pytest.mark.skipif(not installed("algorithms", "ppo"), reason="popmarl-tianshou not installed")
RPS = {"env": {"name": "matrix", "params": {"game": "rps"}}, "solver": {"name": "uniform"}, "trackers": []}


@pytest.fixture
def with_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("schedule", ScheduleAlgorithm))


def _policy(run_dir: Path, policy: str) -> dict[str, np.ndarray]:
    with np.load(run_dir / "checkpoints" / "policies" / f"{policy}.npz") as data:
        return {k: data[k] for k in data.files}


def test_keep_best_keeps_the_version_that_played_best(tmp_path: Path, with_schedule: None) -> None:
    """Versions play rock, paper, scissors in turn against rock: every paper version wins
    all its episodes; the weights kept must be paper's, as on the local backend (the
    sliding window of the past kept the weights after the best window's update)."""
    config: dict[str, Any] = {
        **RPS, "algorithm": {"name": "schedule", "params": {"schedule": [0, 1, 2]}},
        "training": {"max_env_steps": None, "max_episodes": 160, "episodes_per_update": 4, "window": 4,
                     "keep": "best"},
        "stopping": {"max_iterations": 1}, "backend": ray_backend(num_rollout_workers=2),
    }
    summary = run(config, tmp_path / "ray")
    assert summary["status"] == "completed"
    for population in ("player_0", "player_1"):
        np.testing.assert_array_equal(_policy(tmp_path / "ray", f"{population}/1")["probs"], np.eye(3)[1])


# -- on-policy learners take only episodes of their current version ------------------------
def _episodes(version: int, n: int) -> list[Episode]:
    """``n`` one-step episodes whose return records the weights ``version`` that played them."""
    return [Episode(agent="player_0", obs=np.ones((1, 1), np.float32), actions=np.zeros(1, int),
                    rewards=np.array([float(version)], np.float32), masks=None, terminated=True, truncated=False,
                    episode_return=float(version)) for _ in range(n)]


class _RecordingTrainer(Trainer):
    """Notes, at each update, the learner's version and the versions of the episodes it
    got; then acts as the workers do while a learner updates: they queue 3 episodes
    played with the weights being updated (stale once the update is published) and 4
    with the weights about to be published."""

    def __init__(self, params: Any, data: Any, key: str) -> None:
        self.params, self.data, self.key = params, data, key
        self.seen: list[tuple[int, set[int]]] = []

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        version = int(ray.get(self.params.version.remote(self.key)))
        self.seen.append((version, {int(e.episode_return) for e in episodes}))
        ray.get(self.data.put.remote(self.key, version, EpisodeBatch.of(_episodes(version, 3)), 3, 3))
        ray.get(self.data.put.remote(self.key, version + 1, EpisodeBatch.of(_episodes(version + 1, 4)), 4, 4))
        return {}

    def state(self) -> Mapping[str, bytes]:
        return {"seen.json": json.dumps([[v, sorted(s)] for v, s in self.seen]).encode()}

    def load_state(self, state: Mapping[str, bytes]) -> None:
        self.seen = [(v, set(s)) for v, s in json.loads(state["seen.json"])]


class _Recording(ScheduleAlgorithm):
    """A learner with a recording trainer; ``on_policy`` set per test."""

    trainer: _RecordingTrainer

    def make_trainer(self, *, policy: object, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        return self.trainer


@pytest.mark.parametrize("on_policy", [True, False])
def test_on_policy_learner_updates_only_on_episodes_of_its_current_version(on_policy: bool) -> None:
    env = popmarl.envs.load("matrix")(game="rps")
    space = PolicySpace(population="player_0", agents=("player_0",), observation_space=env.observation_space("player_0"),
                        action_space=env.action_space("player_0"))
    params, data = ray.remote(ParameterServerActor).remote(), ray.remote(EpisodeServerActor).remote()
    attempt = f"player_0/1#{on_policy}"
    key = stream_of(attempt, "player_0")
    algorithm = type("Recording", (_Recording,), {"on_policy": on_policy})()
    algorithm.trainer = _RecordingTrainer(params, data, key)
    learners = Learners({"player_0": PopulationAlgorithm(space=space, algorithm=algorithm, env=env)})
    spec = LearnerSpec(key="player_0", population="player_0", seats=("player_0",), seed=0,
                       snapshot=PolicySpec(policy_id="player_0/1", population="player_0", algorithm="recording",
                                           iteration=1))
    ray.get(data.open.remote(key))  # the workers' first batch, played with version 1
    ray.get(data.put.remote(key, 1, EpisodeBatch.of(_episodes(1, 4)), 4, 4))
    task = TrainTask(learners=(spec,), seed=0, budget=TrainBudget(max_episodes=4 + 2 * 7, episodes_per_update=4),
                     return_state=True)

    def feed(task: TrainTask, group: Any, policy_of: Any, population_of: Any) -> RayFeed:
        return RayFeed(params=params, data=data, attempt=attempt, task=task, group=group, max_staleness=2)

    result = run_task(task, learners=learners, policy_of={}.__getitem__, feed=feed)
    metrics = result.learner_metrics["player_0"]
    assert metrics["updates"] == 3 and result.episodes == 18  # the totals at the third take
    assert [p.spec.policy_id for p in result.policies] == ["player_0/1"]
    assert json.loads(result.states["player_0"].trainer["seen.json"])[0] == [1, [1]]  # the learner's whole state
    if on_policy:  # max_staleness does not apply: the 3 stale episodes of each update are dropped
        assert algorithm.trainer.seen == [(1, {1}), (2, {2}), (3, {3})]
        assert result.metrics["dropped_episodes"] == 6
    else:  # off-policy: episodes up to max_staleness versions old are learned from
        assert algorithm.trainer.seen == [(1, {1}), (2, {1, 2}), (3, {2, 3})]
        assert result.metrics["dropped_episodes"] == 0


@needs_tianshou
def test_ppo_learns_on_ray(tmp_path: Path) -> None:
    """PPO on the ray backend, two workers playing while it updates, learns the best
    response to the uniform initial policy in the prisoner's dilemma: defect (-1, where
    uniform play earns -1.5 and cooperation -2)."""
    config: dict[str, Any] = {
        "env": {"name": "matrix", "params": {"game": "prisoners_dilemma"}}, "solver": {"name": "uniform"},
        "trackers": [], "algorithm": {"name": "ppo", "params": {"hidden": [16], "lr": 1e-2, "batch_size": 64}},
        "training": {"max_env_steps": None, "max_episodes": 3000, "episodes_per_update": 32},
        "stopping": {"max_iterations": 1}, "backend": ray_backend(num_rollout_workers=2),
    }
    summary = run(config, tmp_path / "ray")
    assert summary["status"] == "completed"
    table = PayoffTable.load(tmp_path / "ray" / "payoffs.npz")[0]
    # Exact payoffs of each new policy against the other population's uniform initial one.
    assert table.values[0][1, 0] > -1.1 and table.values[1][0, 1] > -1.1, table.values
    line = json.loads((tmp_path / "ray" / "metrics.jsonl").read_text().splitlines()[-1])
    assert line["train/player_0/updates"] >= 5
