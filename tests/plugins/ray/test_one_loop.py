"""One learner loop (``popmarl.engine.learner_loop.run_task``) on every backend: the same episodes,
fed to it in-process (``LocalFeed``) or through the ray backend's episode and parameter
servers (``RayFeed``, its rounds queued as rollout workers queue them), give identical
updates, metrics and snapshots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import ray

import popmarl
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.interfaces.algorithm import PolicySpace, TrainerContext
from popmarl.engine.learners import Learners
from popmarl.data.episodes import Episode, EpisodeBatch
from popmarl.data.learners import LearnerSpec
from popmarl.data.policies import PolicySpec
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.engine.rollout import RolloutWorker
from popmarl.interfaces.trainer import Trainer
from popmarl.engine.learner_loop import run_task
from popmarl_ray.feed import RayFeed, stream_of
from popmarl_ray.servers import EpisodeServerActor, ParameterServerActor
from ray_helpers import Bandit, BanditPolicy, BanditTrainer


class Recorded(BanditTrainer):
    """A bandit trainer that notes what each update got (its games' first actions and
    returns) and the weights it left; with ``then``, it queues the next recorded round
    on the episode server after each update, as the workers would while it learns."""

    def __init__(self, policy: BanditPolicy, rounds: list[EpisodeBatch], then: Any = None) -> None:
        super().__init__(policy)
        self.rounds, self.then = rounds, then
        self.seen: list[tuple[list[int], list[float], list[float]]] = []

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        batch = EpisodeBatch.of(episodes)
        if self.then is None:
            self.rounds.append(batch)
        metrics = super().update(batch)
        self.seen.append((batch.actions[batch.starts[:-1]].tolist(), batch.returns.tolist(),
                          self.policy.q.tolist()))
        if self.then is not None and len(self.seen) < len(self.rounds):
            self.then(len(self.seen) + 1, self.rounds[len(self.seen)])
        return metrics


class RecordingBandit(Bandit):
    trainers: list[Recorded] = []
    rounds: list[EpisodeBatch] = []
    then: list[Any] = []  # the queueing function, if any (in a list: not a method)

    def make_trainer(self, *, policy: Any, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        trainer = Recorded(policy, self.rounds, self.then[0] if self.then else None)
        self.trainers.append(trainer)
        return trainer


def _task_and_learners() -> tuple[TrainTask, Learners, dict[str, Any]]:
    env = popmarl.envs.load("matrix")(game="rps")
    spaces = {a: PolicySpace(population=a, agents=(a,), observation_space=env.observation_space(a),
                             action_space=env.action_space(a)) for a in env.agents}
    learners = Learners({a: PopulationAlgorithm(space=s, algorithm=RecordingBandit(), env=env) for a, s in spaces.items()})
    frozen = BanditPolicy(3)
    frozen.q[:] = [0.0, 1.0, 0.0]  # always paper
    spec = LearnerSpec(key="player_0", population="player_0", seats=("player_0",), seed=0,
                       snapshot=PolicySpec(policy_id="player_0/1", population="player_0", algorithm="bandit",
                                           iteration=1))
    task = TrainTask(learners=(spec,), seed=5, budget=TrainBudget(max_episodes=5 * 16, episodes_per_update=16),
                     opponents=MetaStrategy.pure({"player_1": "player_1/0"}), return_state=True)
    return task, learners, {"env": env, "policies": {"player_1/0": frozen}}


def test_the_same_episodes_through_the_local_and_the_ray_feed_give_identical_updates() -> None:
    RecordingBandit.rounds, RecordingBandit.then = [], []
    task, learners, parts = _task_and_learners()
    local = run_task(task, learners=learners, rollout=RolloutWorker(env=parts["env"], num_envs=8),
                     policy_of=parts["policies"].__getitem__)
    local_trainer = RecordingBandit.trainers[-1]
    rounds = list(RecordingBandit.rounds)
    assert len(rounds) == 5 and all(len(r) == 16 for r in rounds)

    params, data = ray.remote(ParameterServerActor).remote(), ray.remote(EpisodeServerActor).remote()
    attempt = "player_0@0#0"
    stream = stream_of(attempt, "player_0")

    def play(version: int, batch: EpisodeBatch) -> None:  # what a worker does with a round it played
        ray.get(data.put.remote(stream, version, batch, len(batch), 16))

    RecordingBandit.rounds, RecordingBandit.then = rounds, [play]
    task, learners, parts = _task_and_learners()
    ray.get(data.open.remote(stream))
    play(1, rounds[0])

    def feed(task: TrainTask, group: Any, policy_of: Any, population_of: Any) -> RayFeed:
        return RayFeed(params=params, data=data, attempt=attempt, task=task, group=group, max_staleness=0)

    remote = run_task(task, learners=learners, policy_of=parts["policies"].__getitem__, feed=feed)
    ray_trainer = RecordingBandit.trainers[-1]
    assert ray_trainer is not local_trainer
    assert ray_trainer.seen == local_trainer.seen  # the same inputs, the same updates, in the same order
    assert remote.episodes == local.episodes == 80
    assert remote.learner_metrics["player_0"] == local.learner_metrics["player_0"]
    for got, want in zip(remote.policies, local.policies):
        assert got.spec == want.spec
        np.testing.assert_array_equal(got.weights["q"], want.weights["q"])
        np.testing.assert_array_equal(got.weights["n"], want.weights["n"])
    assert remote.metrics["dropped_episodes"] == 0.0
