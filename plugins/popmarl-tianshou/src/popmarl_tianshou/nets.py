"""The torch networks: MLP Q-net, categorical and Gaussian actors, value critic.

They follow Tianshou's module conventions (``forward(obs, state=None, info=None) ->
(output, state)`` for actors and Q-nets, ``forward(obs) -> [B, 1]`` for critics) so
Tianshou's algorithms can train them, and accept either a feature array or a Tianshou
``Batch`` with ``obs`` and ``mask`` fields (how masked observations are stored). This
module needs only torch and numpy, so acting never imports Tianshou.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from popmarl.interfaces.spaces import Discrete, Space


def feature_dim(space: Space) -> int:
    """The width of the flat feature vector of one observation of ``space``."""
    return space.n if isinstance(space, Discrete) else max(space.size, 1)


def features(space: Space, obs: np.ndarray) -> np.ndarray:
    """``[B, feature_dim]`` float32 features of a batch of observations: a Box is
    flattened, a Discrete observation is one-hot encoded."""
    obs = np.asarray(obs)
    if isinstance(space, Discrete):
        return np.eye(space.n, dtype=np.float32)[obs.reshape(len(obs)).astype(np.int64)]
    x = obs.reshape(len(obs), -1).astype(np.float32, copy=False)
    return x if x.flags.writeable else x.copy()  # torch takes no read-only array (Ray's object store)


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int, *, out_gain: float | None = None) -> nn.Sequential:
    """A ReLU multilayer perceptron; ``out_gain`` rescales the last layer's initial
    weights (small values start a policy head near uniform)."""
    layers: list[nn.Module] = []
    width = in_dim
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    last = nn.Linear(width, out_dim)
    if out_gain is not None:
        with torch.no_grad():
            last.weight.mul_(out_gain)
            last.bias.zero_()
    layers.append(last)
    return nn.Sequential(*layers)


def inference(net: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``net(x)`` for an :func:`mlp`, to call under ``torch.no_grad()``: the same numbers
    (each ``Linear`` as ``F.linear`` of its weights, each ``ReLU`` in place on the
    previous layer's fresh output) without a module call per layer."""
    fresh = False
    for layer in net:
        if isinstance(layer, nn.Linear):
            x, fresh = nn.functional.linear(x, layer.weight, layer.bias), True
        elif isinstance(layer, nn.ReLU) and fresh:
            x = torch.relu_(x)
        else:
            x, fresh = layer(x), False
    return x


#: The parameters of an :func:`mlp` as :func:`stacked_inference` takes them: each
#: ``Linear``'s weight ``[out, in]`` and bias ``[out]``, in order.
MLPParams = tuple[tuple[torch.Tensor, torch.Tensor], ...]


def mlp_layout(net: nn.Sequential) -> tuple[tuple[int, int, torch.dtype], ...] | None:
    """Each ``Linear``'s ``(out, in, dtype)`` for a network of :func:`mlp`'s form
    (``Linear``, then ``ReLU`` and ``Linear`` pairs, every ``Linear`` with a bias); None
    for any other network. Networks of one layout can be run by :func:`stacked_inference`."""
    layers = list(net)
    if not layers or len(layers) % 2 == 0:
        return None
    layout = []
    for k, layer in enumerate(layers):
        if k % 2 == 1:
            if not isinstance(layer, nn.ReLU):
                return None
        elif isinstance(layer, nn.Linear) and layer.bias is not None:
            layout.append((layer.out_features, layer.in_features, layer.weight.dtype))
        else:
            return None
    return tuple(layout)


def mlp_params(net: nn.Sequential) -> MLPParams:
    """The weights and biases of a network with an :func:`mlp_layout` (the module's own
    parameter tensors: loading a state dict updates them in place)."""
    return tuple((layer.weight, layer.bias) for layer in net if isinstance(layer, nn.Linear))


def stacked_inference(params: Sequence[MLPParams], x: torch.Tensor) -> torch.Tensor:
    """``[K, M, out]``: network ``k`` (given by its :func:`mlp_params`) on ``x[k]``, for K
    networks of one :func:`mlp_layout` on one device: one batched matrix product per
    layer over their stacked weights, a ReLU between layers. To call under
    ``torch.no_grad()``; equal to each network's own output up to float rounding (a
    batched product may sum in another order)."""
    depth = len(params[0])
    for k in range(depth):
        weight = torch.stack([p[k][0] for p in params])  # [K, out, in]
        bias = torch.stack([p[k][1] for p in params]).unsqueeze(1)  # [K, 1, out]
        x = torch.baddbmm(bias, x, weight.transpose(1, 2))
        if k < depth - 1:
            x = torch.relu_(x)
    return x


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

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, n_actions)

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[torch.Tensor, Any]:
        x, _ = split_obs(obs, self.input_device)
        return self.net(x), state


class CategoricalActor(Net):
    """Action logits ``[B, n_actions]``, -inf on illegal actions when a mask is given."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, n_actions, out_gain=0.01)

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[torch.Tensor, Any]:
        x, mask = split_obs(obs, self.input_device)
        return mask_logits(self.net(x), mask), state


class GaussianActor(Net):
    """Mean and standard deviation ``([B, A], [B, A])`` of a diagonal Gaussian; the log
    standard deviation is a learned, state-independent parameter."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], log_std_init: float) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, action_dim, out_gain=0.01)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[tuple[torch.Tensor, torch.Tensor], Any]:
        x, _ = split_obs(obs, self.input_device)
        loc = self.net(x)
        return (loc, self.log_std.exp().expand_as(loc)), state


class ValueCritic(Net):
    """State values ``[B, 1]``."""

    def __init__(self, obs_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, 1)

    def forward(self, obs: Any, **kwargs: Any) -> torch.Tensor:
        x, _ = split_obs(obs, self.input_device)
        return self.net(x)


def action_dim(space: Space) -> int:
    """Outputs of a policy head: actions of a Discrete space, entries of a Box."""
    return space.n if isinstance(space, Discrete) else max(space.size, 1)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run torch code (e.g. weight initialisation) with its own seeded generator state,
    leaving the process-wide torch generator untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


__all__ = [
    "CategoricalActor", "GaussianActor", "MLPParams", "QNet", "ValueCritic", "action_dim", "feature_dim",
    "Net", "features", "inference", "mask_logits", "mlp", "mlp_layout", "mlp_params", "seeded", "split_obs", "stacked_inference",
]
