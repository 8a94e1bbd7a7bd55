"""Algorithm ``td3``: twin delayed deep deterministic policy gradient (Fujimoto et al.
2018) over Box actions, off-policy from a replay buffer.

The update is Tianshou 2.0's :class:`tianshou.algorithm.TD3`: twin (observation, action)
critics bootstrapped from the smaller of their Polyak-averaged targets, the target
action smoothed by clipped Gaussian noise (``policy_noise``, clipped to ``noise_clip``;
the smoothed action is then clipped to the squashed Box, as in the TD3 authors' code),
and the actor (and every target network) updated once per ``update_actor_freq`` critic
updates, along the first critic's gradient.

The actor is deterministic: ``tanh`` of its network's output, in [-1, 1], mapped
linearly onto the Box's ``[low, high]`` (as ``sac`` squashes its actions: see
:mod:`popmarl_tianshou.box_actor_critic`, which ``td3`` shares with it). Exploring, the
policy adds Gaussian noise of standard deviation ``exploration_noise`` to the squashed
action and clips it to [-1, 1] before mapping it: noise relative to the Box's half
width, and every action inside the Box. Evaluation (acting without exploring) plays the
actor's action itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import attrs
import numpy as np
import torch
from tianshou.algorithm import TD3 as TianshouTD3
from tianshou.algorithm.modelfree.ddpg import ContinuousDeterministicPolicy
from tianshou.data import Batch
from tianshou.data.types import ActStateBatchProtocol
from tianshou.utils.net.continuous import AbstractContinuousActorDeterministic
from torch import nn

from popmarl.api import (CheckpointError, Observations, Policy, PolicySpace, Space, TrainerContext, at_least_one,
                         non_negative)
from popmarl_torch.models import Model, network
from popmarl_torch.nets import Net, split_obs
from popmarl_torch.policies import TorchPolicy, uniform_initial
from popmarl_torch.seeding import seeded
from popmarl_torch.squashed import bounded_box, to_box
from popmarl_torch.threads import set_torch_threads

from popmarl_tianshou.batching import gym_space
from popmarl_tianshou.box_actor_critic import BoxActorCritic, BoxActorCriticConfig, BoxActorCriticTrainer, action_critic
from popmarl_tianshou.optim import FusedAdamFactory


@attrs.frozen(kw_only=True)
class TD3Config(BoxActorCriticConfig):
    """Twin delayed DDPG. Steps are the learner's decisions (transitions), not env steps.

    ``updates_per_step`` gradient steps of ``batch_size`` transitions are taken per new
    transition once the buffer holds ``learning_starts``; each step updates both critics
    (lr ``critic_lr``), and every ``update_actor_freq``-th also the actor (lr ``lr``)
    and the target networks (Polyak weight ``tau``). ``policy_noise``: the standard
    deviation of the target action's smoothing noise, clipped to ``noise_clip`` (0: no
    clipping); ``exploration_noise``: the standard deviation of the noise added to the
    actions played when exploring. All three are in units of the Box's half width (the
    squashed action's scale); the defaults are the TD3 authors'. ``gamma`` and
    ``n_step`` make the bootstrapped target. Updates run on the CPU, on
    ``torch_threads`` threads. ``model`` is the actor's network model
    (:mod:`popmarl_torch.models`: a name or ``{name, params}``; null: ``cnn`` for image
    observations, else ``mlp`` of ``hidden`` widths), ``critic_model`` the critics' (null:
    the same as ``model``; a critic's encoder also reads the action, as extra columns).
    """

    policy_noise: float = attrs.field(default=0.2, validator=non_negative)
    noise_clip: float = attrs.field(default=0.5, validator=non_negative)
    update_actor_freq: int = attrs.field(default=2, validator=at_least_one)
    exploration_noise: float = attrs.field(default=0.1, validator=non_negative)


# -- the actor and policy ----------------------------------------------------------------------
class DeterministicActor(Net):
    """The squashed action ``[B, A]`` in [-1, 1]: ``tanh`` of a network's output
    (Tianshou's actor convention: ``forward(obs, state, info) -> (action, state)``)."""

    #: The largest squashed action (Tianshou's deterministic actors declare it).
    max_action = 1.0

    def __init__(self, net: nn.Sequential) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[torch.Tensor, Any]:
        x, _ = split_obs(obs, self.input_device)
        return torch.tanh(self.net(x)), state


def build_actor(observation_space: Space, action_dim: int, model: Model) -> DeterministicActor:
    """``model``'s encoder with a linear head of ``action_dim``, initialised near zero
    (the first actions near the Box's centre); weights drawn from torch's generator:
    call it seeded."""
    return DeterministicActor(network(model, observation_space, action_dim, out_gain=0.01))


class DeterministicBoxPolicy(TorchPolicy):
    """Plays the actor's squashed action mapped onto the Box; when exploring, with
    Gaussian noise of standard deviation ``noise`` added first (clipped to [-1, 1]):
    always inside the Box (see the module's docstring)."""

    def __init__(self, *, space: PolicySpace, actor: DeterministicActor, noise: float) -> None:
        super().__init__(space=space, modules={"actor": actor}, net=actor.net, grouped=False)
        self.box = bounded_box(space, "td3")
        self.actor = actor
        self.noise = noise

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if self.uniform:
            return self.box.sample(rng, n=len(batch))
        with torch.no_grad():
            squashed = self.actor(self.inputs(batch))[0].cpu().numpy().astype(np.float64)
        if explore and self.noise > 0:
            squashed = np.clip(squashed + self.noise * rng.standard_normal(squashed.shape), -1.0, 1.0)
        return to_box(squashed.reshape(len(batch), *self.box.shape), self.box).astype(self.box.dtype)


# -- the trainer -------------------------------------------------------------------------------
class BoundedTD3(TianshouTD3):
    """Tianshou's TD3 whose smoothed target action is clipped to the squashed Box
    [-1, 1], as the TD3 authors clip it to the action bounds (the critics never see an
    action outside it)."""

    def _target_q_compute_action(self, obs_batch: Batch) -> ActStateBatchProtocol:
        act_batch = super()._target_q_compute_action(obs_batch)
        act_batch.act = torch.as_tensor(act_batch.act).clamp(-1.0, 1.0)
        return act_batch


class TD3Trainer(BoxActorCriticTrainer):
    """Feeds episodes into a replay buffer and takes Tianshou TD3 gradient steps on the
    learner's actor and on critics of its own. Its draws (the buffer's samples, the
    target smoothing noise) come from generators of its own, kept in its state with the
    target actor and TD3's delay counter, so a trainer restored from :meth:`state`
    continues bit-identically."""

    kind = "td3"
    algorithm: BoundedTD3

    def __init__(self, *, policy: DeterministicBoxPolicy, config: TD3Config, seed: int, critic_model: Model) -> None:
        c = config
        box = policy.box
        obs, action_dim = policy.space.observation_space, box.size
        with seeded(seed + 1):
            critic1 = action_critic(obs, action_dim, critic_model)
            critic2 = action_critic(obs, action_dim, critic_model)
        learner = ContinuousDeterministicPolicy(actor=cast(AbstractContinuousActorDeterministic, policy.actor), action_space=gym_space(box), action_scaling=False,
                                                action_bound_method=None)
        algorithm = BoundedTD3(policy=learner, policy_optim=FusedAdamFactory(lr=c.lr), critic=critic1,
                               critic_optim=FusedAdamFactory(lr=c.critic_lr), critic2=critic2, tau=c.tau,
                               gamma=c.gamma, policy_noise=c.policy_noise, update_actor_freq=c.update_actor_freq,
                               noise_clip=c.noise_clip, n_step_return_horizon=c.n_step)
        super().__init__(policy=policy, box=box, config=c, seed=seed, algorithm=algorithm)

    def _modules(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        """Both critics, their targets and the target actor: what ``critics.pt`` holds."""
        a = self.algorithm
        return {"critic1": a.critic, "critic2": a.critic2, "critic1_target": a.critic_old,
                "critic2_target": a.critic2_old, "actor_target": a.actor_old}

    def _counters(self) -> dict[str, Any]:
        """TD3's critic updates so far (the actor's delay counts them) and the actor's
        last loss (reported until its next update)."""
        return {"critic_updates": self.algorithm._cnt, "last_actor_loss": float(self.algorithm._last)}

    def _load_counters(self, data: Mapping[str, Any]) -> None:
        try:
            self.algorithm._cnt = int(data["critic_updates"])
            self.algorithm._last = float(data["last_actor_loss"])  # type: ignore[assignment]  # a loss: a float
        except (TypeError, ValueError):
            raise CheckpointError("trainer state trainer.json: critic_updates and last_actor_loss must be "
                                  "numbers") from None


class TD3(BoxActorCritic):
    """TD3 oracle over bounded Box actions (see the module's docstring). Off-policy (it
    learns from a replay buffer), so on the ray backend it also learns from episodes
    played with weights up to ``max_staleness`` versions old."""

    Config = TD3Config
    config: TD3Config
    kind = "td3"

    def make_policy(self, *, space: PolicySpace, seed: int) -> DeterministicBoxPolicy:
        box = bounded_box(space, "td3")
        set_torch_threads(self.config.torch_threads)
        with seeded(seed):
            actor = build_actor(space.observation_space, box.size, self.models(space)["actor"])
        return DeterministicBoxPolicy(space=space, actor=actor, noise=self.config.exploration_noise)

    def initial_policy(self, *, space: PolicySpace, seed: int) -> DeterministicBoxPolicy:
        return uniform_initial(self.make_policy(space=space, seed=seed))

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int, context: TrainerContext) -> TD3Trainer:
        if not isinstance(policy, DeterministicBoxPolicy):
            raise TypeError(f"td3 trains a DeterministicBoxPolicy, got {type(policy).__name__}")
        return TD3Trainer(policy=policy, config=self.config, seed=seed, critic_model=self.models(space)["critic"])


__all__ = ["TD3", "BoundedTD3", "DeterministicActor", "DeterministicBoxPolicy", "TD3Config", "TD3Trainer",
           "build_actor"]
