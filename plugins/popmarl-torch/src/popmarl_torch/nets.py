"""The torch networks of the policies and trainers: Q-net, categorical and Gaussian
actors, value critic.

They follow Tianshou's module conventions (``forward(obs, state=None, info=None) ->
(output, state)`` for actors and Q-nets, ``forward(obs) -> [B, 1]`` for critics) so that
Tianshou's algorithms can train them, and accept a feature array, a tensor, or a batch
with ``obs`` and ``mask`` fields (how Tianshou stores masked observations). Each computes
its output with an :func:`~popmarl_torch.mlp.mlp` of ``hidden``, or with ``net`` where
given: a network of a model (:func:`popmarl_torch.models.network`, its last layer the
output ``Linear``). Only torch and numpy are needed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import nn

from popmarl_torch.mlp import mlp


def split_obs(obs: Any, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Features and legal-action mask (``None`` if absent) of a module input, on
    ``device`` (the module's: a trainer on a GPU feeds it numpy batches)."""
    mask = None
    if hasattr(obs, "obs"):
        mask = getattr(obs, "mask", None)
        obs = obs.obs
    x = torch.as_tensor(obs, dtype=torch.float32, device=device)
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if mask is not None:
        mask = torch.as_tensor(mask, dtype=torch.bool, device=device)
    return x, mask


class Net(nn.Module):
    """A module that puts its numpy inputs where its parameters are: ``input_device``
    is None on the CPU (acting pays nothing for it) and the device after ``to(device)``
    (kept up to date by ``_apply``, which ``to``, ``cuda`` and ``cpu`` call)."""

    input_device: torch.device | None = None

    def _apply(self, fn: Any, recurse: bool = True) -> Net:
        module = super()._apply(fn, recurse)
        device = next(self.parameters()).device
        self.input_device = None if device.type == "cpu" else device
        return module


def mask_logits(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``logits`` with illegal actions set to -inf."""
    if mask is None:
        return logits
    return logits.masked_fill(~mask, float("-inf"))


class QNet(Net):
    """State-action values ``[B, n_actions]`` (raw; Tianshou's DQN policy masks them)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int] = (), *,
                 net: nn.Sequential | None = None) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, n_actions) if net is None else net

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[torch.Tensor, Any]:
        x, _ = split_obs(obs, self.input_device)
        return self.net(x), state


class CategoricalActor(Net):
    """Action logits ``[B, n_actions]``, -inf on illegal actions when a mask is given."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int] = (), *,
                 net: nn.Sequential | None = None) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, n_actions, out_gain=0.01) if net is None else net

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[torch.Tensor, Any]:
        x, mask = split_obs(obs, self.input_device)
        return mask_logits(self.net(x), mask), state


class GaussianActor(Net):
    """Mean and standard deviation ``([B, A], [B, A])`` of a diagonal Gaussian: the mean
    an :func:`~popmarl_torch.mlp.mlp` of ``activation`` whose output layer starts near
    zero, the log standard deviation a learned, state-independent parameter starting at
    ``log_std_init``.

    ``mean_key`` names the mean network in the state dict (``<mean_key>.0.weight``...):
    ``net`` for popmarl-tianshou's actors, ``mean`` for popmarl-torchrl's, so that the
    weights each plugin writes keep their names."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], log_std_init: float, *,
                 activation: type[nn.Module] = nn.ReLU, mean_key: str = "net", net: nn.Sequential | None = None) -> None:
        super().__init__()
        self.mean_key = mean_key
        self.add_module(mean_key, mlp(obs_dim, hidden, action_dim, activation=activation, out_gain=0.01)
                        if net is None else net)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    @property
    def mean_net(self) -> nn.Sequential:
        """The network of the mean."""
        return cast(nn.Sequential, self._modules[self.mean_key])

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[tuple[torch.Tensor, torch.Tensor], Any]:
        x, _ = split_obs(obs, self.input_device)
        loc = self.mean_net(x)
        return (loc, self.log_std.exp().expand_as(loc)), state


class ValueCritic(Net):
    """State values ``[B, 1]``."""

    def __init__(self, obs_dim: int, hidden: Sequence[int] = (), *, net: nn.Sequential | None = None) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, 1) if net is None else net

    def forward(self, obs: Any, **kwargs: Any) -> torch.Tensor:
        x, _ = split_obs(obs, self.input_device)
        return self.net(x)


__all__ = ["CategoricalActor", "GaussianActor", "Net", "QNet", "ValueCritic", "mask_logits", "split_obs"]
