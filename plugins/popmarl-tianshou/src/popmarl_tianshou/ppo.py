"""Algorithm ``ppo``: clipped PPO with GAE, a value loss and an entropy bonus.

The update is Tianshou 2.0's :class:`tianshou.algorithm.PPO` (Tianshou's A2C with the
clipped objective); illegal actions have logit -inf, so ratios, entropy and sampling
involve legal actions only. Discrete or Box (Gaussian) actions. On-policy (see
:class:`~popmarl_tianshou.actor_critic.ActorCriticAlgorithm`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from tianshou.algorithm import PPO as TianshouPPO

from popmarl.api import at_least_one, optional, positive
from popmarl_tianshou.a2c import A2CConfig
from popmarl_tianshou.actor_critic import ActorCriticAlgorithm


def _in_order_of(base: type, *, new_after: str) -> Callable[[type, list[attrs.Attribute[Any]]],
                                                            list[attrs.Attribute[Any]]]:
    """An attrs ``field_transformer`` that lists a config subclass's fields in the order
    of ``base``'s (a redefined field keeps its place), its new fields after field
    ``new_after``: the order the config's settings are listed and written out in."""

    def transform(cls: type, fields: list[attrs.Attribute[Any]]) -> list[attrs.Attribute[Any]]:
        by_name = {field.name: field for field in fields}
        names = [field.name for field in attrs.fields(base)]
        new = [field for field in fields if field.name not in names]
        at = names.index(new_after) + 1
        return [by_name[name] for name in names[:at]] + new + [by_name[name] for name in names[at:]]

    return transform


@attrs.frozen(kw_only=True, field_transformer=_in_order_of(A2CConfig, new_after="gae_lambda"))
class PPOConfig(A2CConfig):
    """Clipped PPO: A2C's settings (:class:`~popmarl_tianshou.a2c.A2CConfig`) with the
    clipping, and other defaults for ``lr``, ``batch_size`` and ``epochs``.

    ``clip`` bounds the probability ratio; ``value_clip`` clips the value update the
    same way; ``advantage_normalization`` standardises advantages per minibatch.
    ``lr`` 3e-3: as a best response (Leduc against a uniform opponent, Nim as the second
    player) 1e-3 learned too slowly within a PSRO budget. ``epochs`` 10
    (Stable-Baselines3's default too): a best response's default budget, 20,000 env
    steps, is only ~20 updates of 128 episodes, and with 4 epochs PSRO on tic-tac-toe
    leaves its second seat weak (its meta-strategy loses several times as many games
    against random). It costs speed: the training loop's env steps per CPU second
    roughly halve, and a tic-tac-toe PSRO run takes longer.
    """

    lr: float = attrs.field(default=3e-3, validator=positive)
    clip: float = attrs.field(default=0.2, validator=positive)
    value_clip: bool = False
    advantage_normalization: bool = True
    batch_size: int | None = attrs.field(default=256, validator=optional(at_least_one))
    epochs: int = attrs.field(default=10, validator=at_least_one)


class PPO(ActorCriticAlgorithm):
    """PPO oracle: masked categorical or Gaussian actor, value critic."""

    #: As a PSRO best response, opponents move at random 30% of the time unless
    #: training.opponent_epsilon says otherwise: a policy trained only against strong
    #: opponents misplays the positions they never reach (in tic-tac-toe, without it the
    #: meta-strategy loses many more games against random, most in the second seat). None
    #: in games with chance (the core's ``opponent_exploration``): there it slows PSRO on
    #: Leduc down and leaves Kuhn further from equilibrium.
    opponent_epsilon = 0.3
    trainer_kind = "ppo"
    tianshou_class = TianshouPPO
    Config = PPOConfig
    config: PPOConfig

    def tianshou_params(self) -> dict[str, Any]:
        c = self.config
        return {"eps_clip": c.clip, "value_clip": c.value_clip, "advantage_normalization": c.advantage_normalization}
