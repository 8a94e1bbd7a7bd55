"""Trainer state: a team learner rebuilt from its checkpointed state (the members'
weights, the critic or mixer, target networks, value normaliser, replay buffer, Adam,
counters and generators) continues bit-identically; the state is made of safe files,
and a mismatched one is a one-line CheckpointError."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

import popmarl
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.interfaces.algorithm import PolicySpace
from popmarl.interfaces.env import Env
from popmarl.errors import CheckpointError
from popmarl.engine.learners import Learners
from popmarl.data.learners import LearnerInit, LearnerSpec
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.learner_loop import run_task
from popmarl_pettingzoo.env import PettingZooEnv
from testkit.team_configs import PARAMS


def _team(env: Env, name: str, **params: Any) -> Learners:
    """Every seat its own population (``per_player``), all of algorithm ``name``."""
    algorithm = popmarl.algorithms.load(name)(**{**PARAMS[name], **params})
    return Learners({seat: PopulationAlgorithm(space=PolicySpace(population=seat, agents=(seat,),
                                                            observation_space=env.observation_space(seat),
                                                            action_space=env.action_space(seat)),
                                          algorithm=algorithm, env=env, algorithm_name=name)
                     for seat in env.agents})


def _task(env: Env, init: LearnerInit, seed: int) -> TrainTask:
    spec = LearnerSpec(key="team", population=env.agents[0], seats=env.agents, seed=11, init=init)
    return TrainTask(learners=(spec,), seed=seed, budget=TrainBudget(max_episodes=12, episodes_per_update=4),
                     return_state=True)


def _weights(learners: Learners) -> dict[str, np.ndarray]:
    return {f"{p}:{k}": v for p, w in learners.held["team"].weights().items() for k, v in w.items()}


@pytest.mark.parametrize("name", ["mappo", "vdn", "qmix"])
def test_a_rebuilt_team_learner_continues_bit_identically(name: str) -> None:
    env = PettingZooEnv(config=PettingZooEnv.Config(module="mpe2.simple_speaker_listener_v4"))
    worker = RolloutWorker(env=env, num_envs=4)
    original = _team(env, name)
    first = run_task(_task(env, LearnerInit(), 1), learners=original, rollout=worker, policy_of={}.__getitem__)
    state = first.states["team"]
    assert set(state.trainer) >= {"trainer.json", "trainer.pt"}
    assert not any(k.startswith(("critic", "mixer", "loss")) for w in (state.weights, *state.members.values())
                   for k in w), "exported weights are the actors alone"
    # Both go on from the same point: the original carries on, the copy is rebuilt from the state.
    copy = _team(env, name)
    run_task(_task(env, LearnerInit.restore(state), 2), learners=copy, rollout=worker, policy_of={}.__getitem__)
    run_task(_task(env, LearnerInit(kind="continue"), 2), learners=original, rollout=worker, policy_of={}.__getitem__)
    mine, theirs = _weights(copy), _weights(original)
    assert sorted(mine) == sorted(theirs)
    assert all(np.array_equal(mine[k], theirs[k]) for k in mine)
    after, before = copy.held["team"].state().trainer, original.held["team"].state().trainer
    assert after == before
    if name != "mappo":
        assert len(np.load(io.BytesIO(after["buffer.npz"]))["reward"]) == 2 * 12 * 25  # two tasks of 12 games


def test_a_state_of_another_algorithm_or_config_is_refused() -> None:
    env = PettingZooEnv(config=PettingZooEnv.Config(module="mpe2.simple_speaker_listener_v4"))
    worker = RolloutWorker(env=env, num_envs=4)
    vdn = _team(env, "vdn")
    state = run_task(_task(env, LearnerInit(), 1), learners=vdn, rollout=worker,
                     policy_of={}.__getitem__).states["team"]
    with pytest.raises(CheckpointError, match=r"^trainer state trainer.json: holds a 'vdn' trainer state of format 1, "
                                              r"expected 'qmix'"):
        _team(env, "qmix").rebuild(state, seats=env.agents)
    with pytest.raises(CheckpointError, match=r"^trainer state buffer.npz: .* does not fit this config's buffer"):
        _team(env, "vdn", buffer_size=100).rebuild(state, seats=env.agents)
