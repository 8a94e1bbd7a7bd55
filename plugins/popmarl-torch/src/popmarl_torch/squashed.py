"""Tanh-squashed Gaussian actors over a bounded Box, for soft actor-critic learners.

The actor's sample ``u`` is squashed to ``tanh(u)`` in (-1, 1) and mapped linearly onto
the Box's ``[low, high]`` (:func:`to_box`), so every action the policy returns already lies
in the Box and the rollout engine's clip (which clips Box actions before the env sees
them) leaves it unchanged: the env receives, and the learner's episodes record, the same
action. A trainer maps recorded actions back onto [-1, 1] (:func:`from_box`) before it
learns from them, so its critics and the tanh log-probability correction see the squashed
action. The Box's bounds must therefore be finite (:func:`bounded_box`). Acting without
exploring plays ``tanh(mean)`` mapped the same way: a deterministic policy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from popmarl.api import Box, ConfigError, Observations, PolicySpace
from popmarl_torch.nets import Net, split_obs
from popmarl_torch.policies import TorchPolicy

#: The log standard deviation the actor may output, as in Tianshou's and the SAC
#: authors' actors: wider would let the entropy bonus blow a standard deviation up (or
#: collapse it to a point mass the tanh correction divides by).
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


class SquashedGaussianActor(Net):
    """Mean and standard deviation ``([B, A], [B, A])`` of the Gaussian whose samples are
    tanh-squashed: one network ``net`` outputs both (``[B, 2A]``), the log standard
    deviation clamped to [:data:`LOG_STD_MIN`, :data:`LOG_STD_MAX`]. Made with an output
    layer near zero it starts at mean 0 and standard deviation 1, whose squashed samples
    spread over the whole Box."""

    def __init__(self, net: nn.Sequential, action_dim: int) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.net = net

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[tuple[torch.Tensor, torch.Tensor], Any]:
        x, _ = split_obs(obs, self.input_device)
        return loc_scale(self.net(x), self.action_dim), state


def loc_scale(out: torch.Tensor, action_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A ``[..., 2A]`` network output as the Gaussian's mean and standard deviation."""
    loc, log_std = out.split(action_dim, dim=-1)
    return loc, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()


def bounded_box(space: PolicySpace, algorithm: str = "sac", instead: str = "") -> Box:
    """The population's Box of actions; a ConfigError for discrete actions or an
    unbounded Box (squashing needs both bounds), naming ``instead`` where given."""
    box = space.action_space
    tail = f"; use {instead}" if instead else ""
    if not isinstance(box, Box):
        raise ConfigError(f"algorithm {algorithm}: population {space.population} needs Box actions, got {box}{tail}")
    if not (np.isfinite(box.low).all() and np.isfinite(box.high).all()):
        raise ConfigError(f"algorithm {algorithm}: population {space.population}'s actions {box} need finite bounds "
                          f"({algorithm} squashes its actions into them){tail}")
    return box


def to_box(squashed: np.ndarray, box: Box) -> np.ndarray:
    """Actions in [-1, 1] mapped linearly onto the Box (clipped against rounding)."""
    low, high = box.low, box.high
    return np.clip(low + (squashed + 1.0) * 0.5 * (high - low), low, high)


def from_box(actions: np.ndarray, box: Box) -> np.ndarray:
    """The inverse of :func:`to_box`: Box actions as the squashed actions in [-1, 1]
    (an entry whose bounds are equal maps to 0)."""
    width = box.high - box.low
    safe = np.where(width > 0, width, 1.0)
    return np.clip(np.where(width > 0, 2.0 * (actions - box.low) / safe - 1.0, 0.0), -1.0, 1.0)


class SquashedGaussianPolicy(TorchPolicy):
    """Plays ``tanh`` of a Gaussian sample mapped onto the Box when exploring, ``tanh`` of
    the mean mapped the same way when not: always inside the Box (see the module's
    docstring). ``agent_id``, ``uniform_mark`` and ``grouped`` as for
    :class:`~popmarl_torch.policies.TorchPolicy`; ``algorithm`` names the learner in the
    error for an action space it cannot squash into."""

    def __init__(self, *, space: PolicySpace, actor: SquashedGaussianActor, agent_id: bool = False,
                 uniform_mark: bool = True, algorithm: str = "sac") -> None:
        super().__init__(space=space, modules={"actor": actor}, net=actor.net, agent_id=agent_id,
                         uniform_mark=uniform_mark, grouped=False)
        self.box = bounded_box(space, algorithm)
        self.actor = actor

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if self.uniform:
            return self.box.sample(rng, n=len(batch))
        with torch.no_grad():
            loc_t, scale_t = self.actor(self.inputs(batch))[0]
        loc = loc_t.cpu().numpy().astype(np.float64)
        u = loc + scale_t.cpu().numpy() * rng.standard_normal(loc.shape) if explore else loc
        actions = to_box(np.tanh(u).reshape(len(batch), *self.box.shape), self.box)
        return actions.astype(self.box.dtype)


__all__ = ["LOG_STD_MAX", "LOG_STD_MIN", "SquashedGaussianActor", "SquashedGaussianPolicy", "bounded_box", "from_box",
           "loc_scale", "to_box"]
