"""Models for a team's centralized networks: ``mappo``'s critic (``critic_model``) and
the state input of ``qmix``'s mixer (``state_model``). A model given is built over the
env's state (here an image: ``cnn``) and trained; none keeps TorchRL's networks, weight
for weight; the run's log names them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch
from image_game import ImageGame, images
from torch import nn
from torchrl.modules import MultiAgentMLP, QMixer

import popmarl
from popmarl.api import Box, ConfigError, Discrete, Env, Observations, PolicySpace, Step, TrainerContext, VectorEnv
from popmarl.data.learners import LearnerInit, LearnerSpec
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.engine.learner_loop import run_task
from popmarl.engine.learners import Learners
from popmarl.engine.rollout import RolloutWorker
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl_torch.mlp import ACTIVATIONS
from popmarl_torch.models import ConvEncoder
from popmarl_torch.seeding import seeded
from popmarl_torchrl.centralized import EncodedQMixer, ModelCritic, NormalisedQMixer

SIZE = 8
CNN = {"name": "cnn", "params": {"channels": [4], "hidden": [16], "channels_last": True}}


class _StateVector(VectorEnv):
    """The image game's vector that records its state: both players' images, their
    channels side by side."""

    def __init__(self, env: ImageStateGame, num_envs: int, seed: int) -> None:
        self.env, self.num_envs = env, num_envs
        self._ids = np.arange(num_envs)
        self._rng = np.random.default_rng(seed)
        self._answers: dict[str, np.ndarray] = {}
        self._state = np.zeros((num_envs, SIZE, SIZE, 6), np.uint8)

    def record_state(self) -> bool:
        return True

    def _deal(self) -> dict[str, tuple[np.ndarray, Observations]]:
        decisions, pictures = {}, []
        for agent in self.env.agents:
            self._answers[agent] = self._rng.integers(0, 4, size=self.num_envs)
            pictures.append(images(self._answers[agent], SIZE, self._rng))
            decisions[agent] = (self._ids, Observations(obs=pictures[-1], agent=agent))
        self._state = np.concatenate(pictures, axis=-1)
        return decisions

    def reset(self) -> Step:
        return Step(decisions=self._deal(), rewards=np.zeros((self.num_envs, 2)), finished=np.zeros(0, int),
                    returns=np.zeros((0, 2)), truncated=np.zeros(0, bool), state=self._state,
                    final_state=self._state[:0])

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        rewards = np.stack([(np.asarray(actions[a]).reshape(self.num_envs) == self._answers[a]).astype(float)
                            for a in self.env.agents], axis=1)
        final = self._state
        return Step(decisions=self._deal(), rewards=rewards, finished=self._ids, returns=rewards,
                    truncated=np.zeros(self.num_envs, bool), state=self._state, final_state=final)


class ImageStateGame(ImageGame):
    """The image game with a global state: an image of 6 channels."""

    state_space = Box(shape=(SIZE, SIZE, 6), low=0, high=255, dtype="uint8")

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        return _StateVector(self, num_envs, seed)


def trained(name: str, **params: Any) -> tuple[Any, Any]:
    """A team learner of ``name`` over both seats (one population each) after a few
    games of the image game, and a fresh trainer of the same seed."""
    env: Env = ImageStateGame()
    algorithm = popmarl.algorithms.load(name)(**params)
    learners = Learners({seat: PopulationAlgorithm(space=PolicySpace(population=seat, agents=(seat,),
                                                                     observation_space=env.observation_space(seat),
                                                                     action_space=env.action_space(seat)),
                                                   algorithm=algorithm, env=env, algorithm_name=name)
                         for seat in env.agents})
    spec = LearnerSpec(key="team", population=env.agents[0], seats=env.agents, seed=11, init=LearnerInit())
    task = TrainTask(learners=(spec,), seed=1, budget=TrainBudget(max_episodes=64, episodes_per_update=32))
    run_task(task, learners=learners, rollout=RolloutWorker(env=env, num_envs=16), policy_of={}.__getitem__)
    trainer = learners.held["team"].trainer
    fresh = algorithm.make_trainer(policy=trainer.team.policies[env.agents[0]], space=learners.populations[
        env.agents[0]].space, seed=11, context=_context(env, trainer.team.policies))
    return trainer, fresh


def _context(env: Env, policies: Mapping[str, Any]) -> TrainerContext:
    spaces = {seat: PolicySpace(population=seat, agents=(seat,), observation_space=env.observation_space(seat),
                                action_space=env.action_space(seat)) for seat in env.agents}
    return TrainerContext(seats={s: (env.observation_space(s), env.action_space(s)) for s in env.agents},
                          own_seats=env.agents, state_space=env.state_space, policies=dict(policies), spaces=spaces)


def changed(a: nn.Module, b: nn.Module) -> set[str]:
    """The parameters of ``a`` that differ from ``b``'s."""
    theirs = dict(b.named_parameters())
    return {k for k, v in a.named_parameters() if not torch.equal(v, theirs[k])}


@pytest.mark.parametrize("critic", ["shared", "per_agent"])
def test_a_cnn_critic_reads_the_image_state_and_trains(critic: str) -> None:
    trainer, fresh = trained("mappo", critic=critic, critic_model=CNN, epochs=1, minibatches=1)
    assert isinstance(trainer.critic, ModelCritic) and len(trainer.critic.nets) == (1 if critic == "shared" else 2)
    assert all(isinstance(net[0], ConvEncoder) for net in trainer.critic.nets)
    assert trainer.critic.nets[0][0].convs[0].in_channels == 6  # the state's channels, not a seat's 3
    params = {k for k, _ in trainer.critic.named_parameters()}
    assert changed(trainer.critic, fresh.critic) == params  # every weight trained, convolutions included


def test_a_cnn_state_model_feeds_the_qmix_hypernetworks_and_trains() -> None:
    trainer, fresh = trained("qmix", hidden=[16], state_model=CNN, learning_starts=32, batch_size=16,
                             mixing_embed_dim=4)
    mixer = trainer.mixer.module
    assert isinstance(mixer, EncodedQMixer) and isinstance(mixer.encoder, ConvEncoder)
    assert mixer.hyper_w_1.in_features == 16  # the encoder's features, not the state's 384 entries
    assert {k.split(".")[0] for k in changed(mixer, fresh.mixer.module)} >= {"encoder", "hyper_w_1", "V"}


def test_a_user_module_critic_is_built_by_path() -> None:
    trainer, fresh = trained("mappo", critic_model={"name": "module", "params": {"path": "user_nets:Pooled"}},
                             epochs=1, minibatches=1)
    assert type(trainer.critic.nets[0][0]).__name__ == "Pooled"
    assert changed(trainer.critic, fresh.critic)


@pytest.mark.parametrize("critic", ["shared", "per_agent"])
def test_no_critic_model_keeps_torchrl_multi_agent_mlp_weight_for_weight(critic: str) -> None:
    mappo = popmarl.algorithms.load("mappo")(critic=critic, critic_hidden=[32, 16])
    space = PolicySpace(population="p", agents=("a0", "a1", "a2"),
                        observation_space=Box(shape=(5,), low=-1.0, high=1.0), action_space=Discrete(n=4))
    policy = mappo.make_policy(space=space, seed=3)
    trainer = mappo.make_trainer(policy=policy, space=space, seed=3,
                                 context=TrainerContext.alone(policy=policy, space=space))
    with seeded(4):  # as the trainer made its critic before critic_model: seed + 1
        old = MultiAgentMLP(n_agent_inputs=15 + 3, n_agent_outputs=1, n_agents=3, centralized=False,
                            share_params=critic == "shared", depth=2, num_cells=[32, 16],
                            activation_class=ACTIVATIONS["tanh"])
    assert isinstance(trainer.critic, MultiAgentMLP)
    mine, theirs = trainer.critic.state_dict(), old.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


@pytest.mark.parametrize("state_norm", [True, False])
def test_no_state_model_keeps_torchrl_qmixer_weight_for_weight(state_norm: bool) -> None:
    qmix = popmarl.algorithms.load("qmix")(state_norm=state_norm, mixing_embed_dim=8)
    space = PolicySpace(population="p", agents=("a0", "a1"),
                        observation_space=Box(shape=(5,), low=-1.0, high=1.0), action_space=Discrete(n=4))
    policy = qmix.make_policy(space=space, seed=3)
    trainer = qmix.make_trainer(policy=policy, space=space, seed=3,
                                context=TrainerContext.alone(policy=policy, space=space))
    with seeded(4):
        old = (NormalisedQMixer if state_norm else QMixer)(state_shape=(10,), mixing_embed_dim=8, n_agents=2,
                                                          device="cpu")
    assert type(trainer.mixer.module) is type(old)
    mine, theirs = trainer.mixer.module.state_dict(), old.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_the_run_log_names_the_critic_and_the_mixer_state_models() -> None:
    space = PolicySpace(population="p", agents=("a0", "a1"), observation_space=Box(shape=(5,), low=-1.0, high=1.0),
                        action_space=Discrete(n=4))
    load = popmarl.algorithms.load
    assert load("mappo")().describe(space) == \
        "actor mlp [64, 64] tanh, critic mlp [64, 64] tanh (the default for these observations)"
    assert load("mappo")(critic_model=CNN).describe(space) == \
        "actor mlp [64, 64] tanh, critic cnn channels [4] kernels [3] strides [1] hidden [16]"
    assert load("qmix")().describe(space) == \
        "q-network mlp [64, 64], mixer state mlp [] (the default for these observations)"
    assert load("qmix")(state_model="mlp").describe(space).startswith("q-network mlp [64, 64], mixer state mlp [64, 64]")
    assert load("vdn")().describe(space) == "q-network mlp [64, 64] (the default for these observations)"


def test_a_wrong_state_model_is_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"model cnn: params.channel: unknown key \(did you mean 'channels'\?\)"):
        popmarl.algorithms.load("qmix")(state_model={"name": "cnn", "params": {"channel": [3]}})
    with pytest.raises(ValueError, match="critic_model"):
        popmarl.algorithms.load("mappo")(critic_model=3)
    flat = ImageGame()  # no state space: the state is both images flattened and concatenated
    space = PolicySpace(population="p", agents=flat.agents, observation_space=flat.observation_space("player_0"),
                        action_space=Discrete(n=4))
    for name, key in (("qmix", "state_model"), ("mappo", "critic_model")):
        with pytest.raises(ConfigError, match=rf"^algorithm {name}: {key}: model cnn: needs image observations .*"
                                              r"\(it reads the state, Box\(shape=\(384,\)"):
            popmarl.algorithms.load(name)(**{key: CNN}).check(env=flat, space=space)
    popmarl.algorithms.load("qmix")(state_model=CNN).check(env=ImageStateGame(), space=space)  # an image state
