"""Algorithm ``ppo``: clipped PPO with GAE, a value loss and an entropy bonus.

The update is Tianshou 2.0's :class:`tianshou.algorithm.PPO`; illegal actions have
logit -inf, so ratios, entropy and sampling involve legal actions only. Discrete or Box
(Gaussian) actions.

On-policy: it learns only from episodes its current weights played (on the ray backend,
older ones are dropped whatever ``max_staleness`` says; see
:class:`~popmarl_tianshou.actor_critic.ActorCriticAlgorithm`).
"""

from __future__ import annotations

import attrs
from tianshou.algorithm import PPO as TianshouPPO
from tianshou.algorithm.modelfree.reinforce import ProbabilisticActorPolicy
from tianshou.algorithm.optim import OptimizerFactory

from popmarl.interfaces.validators import at_least_one, layer_widths, non_negative, optional, positive, unit_interval
from popmarl_tianshou.actor_critic import ActorCriticAlgorithm
from popmarl_tianshou.device import device_validator
from popmarl_tianshou.nets import ValueCritic


@attrs.frozen(kw_only=True)
class PPOConfig:
    """Clipped PPO. Each update runs ``epochs`` passes of minibatches of ``batch_size``
    transitions (``None``: the whole batch) over the episodes just collected.

    ``clip`` bounds the probability ratio; ``value_clip`` clips the value update the
    same way; ``advantage_normalization`` standardises advantages per minibatch.
    ``log_std_init`` and ``deterministic_eval`` (play the mean when not exploring)
    apply to Box actions only. ``device`` is where the updates run (``auto``, ``cpu``,
    ``cuda``, ``cuda:N``), ``acting_device`` where the policies act (``cpu`` unless
    configured). ``auto`` is the CPU where torch sees no GPU; where it sees one, the
    faster of the CPU and the GPU for this learner's actor and critic, timed once by its
    trainer on a few gradient steps at ``batch_size`` (for ``acting_device``: forward
    passes at the rollout's batch size), then logged, reported in the metrics and kept
    in the trainer's state (see :mod:`popmarl_tianshou.device`). ``lr`` 3e-3: as a
    best response (Leduc against a uniform opponent, Nim as the second player) 1e-3
    learned too slowly within a PSRO budget. ``epochs`` 10 (Stable-Baselines3's default
    too): a best response's default budget, 20,000 env steps, is only ~20 updates of 128
    episodes, and with 4 epochs PSRO on tic-tac-toe left its second seat weak (its
    meta-strategy lost 24-27% of its games against random over 3 seeds; with 10, 7-13%).
    It costs speed: the training loop's env steps per CPU-s roughly halve (Leduc 21k ->
    12k), a tic-tac-toe PSRO run takes ~30% longer.
    """

    lr: float = attrs.field(default=3e-3, validator=positive)
    hidden: list[int] = attrs.field(factory=lambda: [128, 128], validator=layer_widths)
    gamma: float = attrs.field(default=1.0, validator=unit_interval)
    gae_lambda: float = attrs.field(default=0.95, validator=unit_interval)
    clip: float = attrs.field(default=0.2, validator=positive)
    value_clip: bool = False
    advantage_normalization: bool = True
    vf_coef: float = attrs.field(default=0.5, validator=non_negative)
    ent_coef: float = attrs.field(default=0.01, validator=non_negative)
    max_grad_norm: float | None = attrs.field(default=0.5, validator=optional(positive))
    batch_size: int | None = attrs.field(default=256, validator=optional(at_least_one))
    epochs: int = attrs.field(default=10, validator=at_least_one)
    log_std_init: float = -0.5
    deterministic_eval: bool = False
    torch_threads: int = attrs.field(default=1, validator=at_least_one)
    device: str = attrs.field(default="auto", validator=device_validator)
    acting_device: str = attrs.field(default="cpu", validator=device_validator)


class PPO(ActorCriticAlgorithm):
    """PPO oracle: masked categorical or Gaussian actor, value critic."""

    #: As a PSRO best response, opponents move at random 30% of the time unless
    #: training.opponent_epsilon says otherwise: a policy trained only against strong
    #: opponents misplays the positions they never reach (tic-tac-toe, seed 0: the
    #: meta-strategy lost 5.2% / 38% of its games against random in the first / second
    #: seat without, 1.6% / 6.9% with). None in games with chance
    #: (popmarl.interfaces.algorithm.opponent_exploration): with it, PSRO on Leduc took 372 s to
    #: NashConv 1.0 instead of 117 s, and Kuhn ended at 0.08 instead of 0.0004.
    opponent_epsilon = 0.3
    trainer_kind = "ppo"
    Config = PPOConfig
    config: PPOConfig

    def tianshou_algorithm(self, *, policy: ProbabilisticActorPolicy, critic: ValueCritic,
                           optim: OptimizerFactory) -> TianshouPPO:
        c = self.config
        return TianshouPPO(
            policy=policy, critic=critic, optim=optim, eps_clip=c.clip, value_clip=c.value_clip,
            advantage_normalization=c.advantage_normalization, vf_coef=c.vf_coef, ent_coef=c.ent_coef,
            max_grad_norm=c.max_grad_norm, gae_lambda=c.gae_lambda, gamma=c.gamma, max_batchsize=4096,
        )
