"""The test learners' trainers keep their counters across a rebuild (as a resumed run
rebuilds them), and refuse a state without them."""

from __future__ import annotations

import numpy as np
import pytest
from learning_schedule import ScheduleAlgorithm
from test_marl_scenario import ReinforceAlgorithm

from popmarl.interfaces.algorithm import PolicySpace, TrainerContext
from popmarl.errors import CheckpointError
from popmarl.data.episodes import Episode
from popmarl.interfaces.spaces import Box, Discrete

SPACE = PolicySpace(population="p", agents=("a",), observation_space=Box(shape=(1,), low=1.0, high=1.0),
                    action_space=Discrete(n=3))


def episodes(action: int, reward: float) -> list[Episode]:
    return [Episode(agent="a", obs=np.ones((1, 1), np.float32), actions=np.array([action]),
                    rewards=np.array([reward], np.float32), masks=None, terminated=True, truncated=False,
                    episode_return=reward)]


def test_a_rebuilt_schedule_trainer_continues_the_schedule() -> None:
    algorithm = ScheduleAlgorithm(schedule=[0, 1, 2])
    policy = algorithm.make_policy(space=SPACE, seed=0)
    trainer = algorithm.make_trainer(policy=policy, space=SPACE, seed=0,
                                     context=TrainerContext.alone(policy=policy, space=SPACE))
    trainer.update(episodes(0, 0.0))
    state = trainer.state()
    rebuilt = algorithm.make_policy(space=SPACE, seed=0)
    rebuilt.set_weights(policy.get_weights())
    resumed = algorithm.make_trainer(policy=rebuilt, space=SPACE, seed=0,
                                     context=TrainerContext.alone(policy=rebuilt, space=SPACE))
    resumed.load_state(state)
    trainer.update(episodes(0, 0.0))
    resumed.update(episodes(0, 0.0))
    np.testing.assert_array_equal(rebuilt.probs, np.eye(3)[2])  # a fresh trainer would be at action 1
    np.testing.assert_array_equal(rebuilt.probs, policy.probs)
    with pytest.raises(CheckpointError, match=r"^trainer state: file 'trainer.json' is missing$"):
        resumed.load_state({})


def test_a_rebuilt_reinforce_trainer_keeps_its_update_count() -> None:
    algorithm = ReinforceAlgorithm(lr=0.5)
    policy = algorithm.make_policy(space=SPACE, seed=0)
    trainer = algorithm.make_trainer(policy=policy, space=SPACE, seed=0,
                                     context=TrainerContext.alone(policy=policy, space=SPACE))
    for _ in range(3):
        trainer.update(episodes(1, 1.0) + episodes(0, 0.0))
    rebuilt = algorithm.make_policy(space=SPACE, seed=0)
    resumed = algorithm.make_trainer(policy=rebuilt, space=SPACE, seed=0,
                                     context=TrainerContext.alone(policy=rebuilt, space=SPACE))
    resumed.load_state(trainer.state())
    assert resumed.updates == 3
    with pytest.raises(CheckpointError, match=r"^trainer state trainer.json: missing updates$"):
        resumed.load_state({"trainer.json": b"{}"})
