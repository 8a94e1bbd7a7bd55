"""MAPPO's value normalisation: the critic outputs normalised values and GAE reads them
denormalised, so after a few rounds the critic's real-scale values sit on its targets'
scale. (A critic trained on normalised targets but read on the raw scale, as MAPPOLoss's
own hook has it, stayed near zero, -0.5 against targets around -23 on spread.)"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from popmarl.data.learners import LearnerInit
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.learner_loop import run_task
from popmarl.data.trajectories import JointEpisodes
from popmarl_pettingzoo.env import PettingZooEnv
from popmarl_torchrl.mappo import MAPPOTrainer
from test_torchrl_trainer_state import _task, _team


def test_the_critic_reads_on_the_returns_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    env = PettingZooEnv(config=PettingZooEnv.Config(module="mpe2.simple_spread_v3", kwargs={"N": 3, "max_cycles": 25}))
    learners = _team(env, "mappo")
    rounds: list[JointEpisodes] = []
    batch = MAPPOTrainer._batch

    def recorded(self: MAPPOTrainer, games: JointEpisodes) -> Any:
        rounds.append(games)
        return batch(self, games)

    monkeypatch.setattr(MAPPOTrainer, "_batch", recorded)
    run_task(_task(env, LearnerInit(), 1), learners=learners, rollout=RolloutWorker(env=env, num_envs=4),
             policy_of={}.__getitem__)
    trainer = learners.held["team"].trainer
    assert isinstance(trainer, MAPPOTrainer) and trainer.norm is not None
    mean, _ = trainer.norm._running_stats()
    assert float(mean) < -10.0  # spread's discounted returns are well below zero
    with torch.no_grad():
        values = trainer._values(trainer._critic_input(trainer.team.state(rounds[-1])))
    assert float(values.mean()) < 0.5 * float(mean)
