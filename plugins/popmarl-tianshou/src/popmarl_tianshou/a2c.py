"""Algorithm ``a2c``: synchronous advantage actor-critic with GAE and an entropy bonus.

The update is Tianshou 2.0's :class:`tianshou.algorithm.A2C`; illegal actions have logit
-inf, so the policy gradient and entropy involve legal actions only. Discrete or Box
(Gaussian) actions. On-policy (see
:class:`~popmarl_tianshou.actor_critic.ActorCriticAlgorithm`).
"""

from __future__ import annotations

import attrs
from tianshou.algorithm import A2C as TianshouA2C

from popmarl.api import at_least_one, layer_widths, non_negative, optional, positive, unit_interval
from popmarl_torch.devices import device_validator
from popmarl_torch.models import ModelSpec, model_field

from popmarl_tianshou.actor_critic import ActorCriticAlgorithm


@attrs.frozen(kw_only=True)
class A2CConfig:
    """A2C. Each update takes ``epochs`` passes over the episodes just collected, in
    minibatches of ``batch_size`` transitions (``None``: one step on the whole batch).
    ``log_std_init`` and ``deterministic_eval`` (play the mean when not exploring) apply
    to Box actions only. ``device`` is where the updates run (``auto``, ``cpu``,
    ``cuda``, ``cuda:N``), ``acting_device`` where the policies act (``cpu`` unless
    configured). ``auto`` is the CPU where torch sees no GPU; where it sees one, the
    faster of the CPU and the GPU for this learner's actor and critic, timed once by its
    trainer on a few gradient steps at its batch (``batch_size``, or the first round's
    transitions; for ``acting_device``: forward passes at the rollout's batch size), then
    logged, reported in the metrics and kept in the trainer's state (see
    :mod:`popmarl_torch.placement`). ``model`` is the actor's network model
    (:mod:`popmarl_torch.models`: a name or ``{name, params}``; null: ``cnn`` for image
    observations, else ``mlp`` of ``hidden`` widths), ``critic_model`` the critic's (null:
    the same as ``model``)."""

    lr: float = attrs.field(default=1e-3, validator=positive)
    hidden: list[int] = attrs.field(factory=lambda: [128, 128], validator=layer_widths)
    model: ModelSpec = model_field()
    critic_model: ModelSpec = model_field()
    gamma: float = attrs.field(default=1.0, validator=unit_interval)
    gae_lambda: float = attrs.field(default=0.95, validator=unit_interval)
    vf_coef: float = attrs.field(default=0.5, validator=non_negative)
    ent_coef: float = attrs.field(default=0.01, validator=non_negative)
    max_grad_norm: float | None = attrs.field(default=0.5, validator=optional(positive))
    batch_size: int | None = attrs.field(default=None, validator=optional(at_least_one))
    epochs: int = attrs.field(default=1, validator=at_least_one)
    log_std_init: float = -0.5
    deterministic_eval: bool = False
    torch_threads: int = attrs.field(default=1, validator=at_least_one)
    device: str = attrs.field(default="auto", validator=device_validator)
    acting_device: str = attrs.field(default="cpu", validator=device_validator)


class A2C(ActorCriticAlgorithm):
    """A2C oracle: masked categorical or Gaussian actor, value critic."""

    trainer_kind = "a2c"
    tianshou_class = TianshouA2C
    Config = A2CConfig
    config: A2CConfig
