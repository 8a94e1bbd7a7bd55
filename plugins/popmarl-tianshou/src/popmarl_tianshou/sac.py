"""Algorithm ``sac``: soft actor-critic over Box actions, off-policy from a replay buffer.

The update is Tianshou 2.0's :class:`tianshou.algorithm.SAC`: twin (observation, action)
critics with Polyak-averaged target copies, the smaller target value bootstrapped, an
entropy bonus whose weight ``alpha`` is tuned towards a target entropy (or fixed), and a
tanh-squashed Gaussian actor whose mean and log standard deviation both depend on the
observation.

Action bounds are kept by squashing, not clipping: the actor's sample ``u`` is squashed
to ``tanh(u)`` in (-1, 1) and mapped linearly onto the Box's ``[low, high]``, so every
action the policy returns already lies in the Box and the rollout engine's clip (which
clips Box actions before the env sees them) leaves it unchanged: the env receives, and
the learner's episodes record, the same action. The trainer maps recorded actions back
onto [-1, 1] (the inverse of the linear map) before they enter the replay buffer, so the
critics and Tianshou's tanh log-probability correction see the squashed action they were
built for. The Box's bounds must therefore be finite. Evaluation (acting without
exploring) plays ``tanh(mean)`` mapped the same way: a deterministic policy.

Every SAC network (actor and critics) is made by :func:`build_network`, the one place a
network model is chosen. The bounds, the critics, the replay trainer and its state are
what ``sac`` shares with ``td3`` (:mod:`popmarl_tianshou.box_actor_critic`).
"""

from __future__ import annotations

from typing import Literal, cast

import attrs
import numpy as np
import torch
from tianshou.algorithm import SAC as TianshouSAC
from tianshou.algorithm.modelfree.sac import AutoAlpha, SACPolicy, SACTrainingStats
from torch import nn

from popmarl.api import Policy, PolicySpace, Space, TrainerContext, non_negative, optional, positive
from popmarl_torch.models import Model, network
from popmarl_torch.policies import uniform_initial
from popmarl_torch.seeding import seeded
from popmarl_torch.squashed import (LOG_STD_MAX, LOG_STD_MIN, SquashedGaussianActor, SquashedGaussianPolicy,
                                      bounded_box, from_box, to_box)
from popmarl_torch.threads import set_torch_threads

from popmarl_tianshou.batching import gym_space
from popmarl_tianshou.box_actor_critic import (BUFFER, CRITICS, OPTIM, RANDOM, ActionCritic, BoxActorCritic,
                                               BoxActorCriticConfig, BoxActorCriticTrainer, action_critic)
from popmarl_tianshou.optim import FusedAdamFactory


@attrs.frozen(kw_only=True)
class SACConfig(BoxActorCriticConfig):
    """Soft actor-critic. Steps are the learner's decisions (transitions), not env steps.

    ``updates_per_step`` gradient steps of ``batch_size`` transitions are taken per new
    transition once the buffer holds ``learning_starts``; each step updates both critics
    (lr ``critic_lr``), the actor (lr ``lr``), then ``alpha`` and the target critics
    (Polyak weight ``tau``). ``alpha`` null tunes the entropy weight automatically (from
    ``alpha_init``, lr ``alpha_lr``) towards ``target_entropy`` (null: minus the number of
    action entries, the SAC authors' choice); a number fixes it. ``gamma`` and
    ``n_step`` make the bootstrapped target. Updates run on the CPU, on
    ``torch_threads`` threads. ``model`` is the actor's network model
    (:mod:`popmarl_torch.models`: a name or ``{name, params}``; null: ``cnn`` for image
    observations, else ``mlp`` of ``hidden`` widths), ``critic_model`` the critics' (null:
    the same as ``model``; a critic's encoder also reads the action, as extra columns).
    """

    alpha: float | None = attrs.field(default=None, validator=optional(non_negative))
    alpha_init: float = attrs.field(default=0.2, validator=positive)
    alpha_lr: float = attrs.field(default=3e-4, validator=positive)
    target_entropy: float | None = None


# -- networks ---------------------------------------------------------------------------------
def build_network(role: Literal["actor", "critic"], *, observation_space: Space, action_dim: int,
                  model: Model) -> SquashedGaussianActor | ActionCritic:
    """The SAC network of ``role``: the squashed Gaussian actor or an (observation,
    action) critic, ``model``'s encoder with a linear head (:func:`popmarl_torch.models.network`;
    the critic's encoder reads the action as extra columns; weights drawn from torch's
    generator: call it seeded)."""
    if role == "actor":
        return SquashedGaussianActor(network(model, observation_space, 2 * action_dim, out_gain=0.01), action_dim)
    return action_critic(observation_space, action_dim, model)


# -- the trainer -------------------------------------------------------------------------------
class SACTrainer(BoxActorCriticTrainer):
    """Feeds episodes into a replay buffer and takes Tianshou SAC gradient steps on the
    learner's actor and on critics of its own. Its draws (the buffer's samples, the
    actor's reparameterised samples) come from generators of its own, kept in its state,
    so a trainer restored from :meth:`state` continues bit-identically."""

    kind = "sac"
    algorithm: TianshouSAC[SACTrainingStats]

    def __init__(self, *, policy: SquashedGaussianPolicy, config: SACConfig, seed: int, critic_model: Model) -> None:
        c = config
        box = policy.box
        obs, action_dim = policy.space.observation_space, box.size
        with seeded(seed + 1):
            critic1 = build_network("critic", observation_space=obs, action_dim=action_dim, model=critic_model)
            critic2 = build_network("critic", observation_space=obs, action_dim=action_dim, model=critic_model)
        target_entropy = -float(action_dim) if c.target_entropy is None else c.target_entropy
        alpha: float | AutoAlpha = (float(c.alpha) if c.alpha is not None else
                                    AutoAlpha(target_entropy, float(np.log(c.alpha_init)), FusedAdamFactory(lr=c.alpha_lr)))
        learner = SACPolicy(actor=policy.actor, action_space=gym_space(box), action_scaling=False)
        algorithm: TianshouSAC[SACTrainingStats] = TianshouSAC(
            policy=learner, policy_optim=FusedAdamFactory(lr=c.lr), critic=critic1,
            critic_optim=FusedAdamFactory(lr=c.critic_lr), critic2=critic2, tau=c.tau, gamma=c.gamma, alpha=alpha,
            n_step_return_horizon=c.n_step)
        super().__init__(policy=policy, box=box, config=c, seed=seed, algorithm=algorithm)

    def _metrics(self) -> dict[str, float]:
        return {"alpha": float(self.algorithm.alpha.value)}

    def _modules(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        """The trainer's own networks (critics, their targets) and, when tuned, ``alpha``
        with its optimiser: what :data:`CRITICS` holds."""
        a = self.algorithm
        modules: dict[str, nn.Module | torch.optim.Optimizer] = {
            "critic1": a.critic, "critic2": a.critic2, "critic1_target": a.critic_old, "critic2_target": a.critic2_old}
        if isinstance(a.alpha, AutoAlpha):
            modules["alpha"] = a.alpha
            modules["alpha_optim"] = cast(torch.optim.Optimizer, a.alpha._optim)
        return modules


class SAC(BoxActorCritic):
    """Soft actor-critic oracle over bounded Box actions (see the module's docstring).
    Off-policy (it learns from a replay buffer), so on the ray backend it also learns
    from episodes played with weights up to ``max_staleness`` versions old."""

    Config = SACConfig
    config: SACConfig
    kind = "sac"

    def make_policy(self, *, space: PolicySpace, seed: int) -> SquashedGaussianPolicy:
        box = bounded_box(space)
        set_torch_threads(self.config.torch_threads)
        with seeded(seed):
            actor = build_network("actor", observation_space=space.observation_space, action_dim=box.size,
                                  model=self.models(space)["actor"])
        return SquashedGaussianPolicy(space=space, actor=cast(SquashedGaussianActor, actor))

    def initial_policy(self, *, space: PolicySpace, seed: int) -> SquashedGaussianPolicy:
        return uniform_initial(self.make_policy(space=space, seed=seed))

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int, context: TrainerContext) -> SACTrainer:
        if not isinstance(policy, SquashedGaussianPolicy):
            raise TypeError(f"sac trains a SquashedGaussianPolicy, got {type(policy).__name__}")
        return SACTrainer(policy=policy, config=self.config, seed=seed, critic_model=self.models(space)["critic"])


__all__ = ["BUFFER", "CRITICS", "LOG_STD_MAX", "LOG_STD_MIN", "OPTIM", "RANDOM", "SAC", "ActionCritic", "SACConfig", "SACTrainer",
           "SquashedGaussianActor", "SquashedGaussianPolicy", "bounded_box", "build_network", "from_box", "to_box"]
