"""Multilayer perceptrons: built, run without module calls, and run many at once.

An :func:`mlp` is a plain :class:`torch.nn.Sequential` of ``Linear`` layers with an
activation between them (its state dict names them ``0.weight``, ``0.bias``,
``2.weight``...). :func:`inference` runs one with fewer calls; :func:`stacked_inference`
runs several of one layout (:func:`mlp_layout`) with one batched matrix product per
layer, which is how policies of one network layout act together.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

#: Activations a config may name.
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def mlp(inputs: int, hidden: Sequence[int], outputs: int, *, activation: type[nn.Module] = nn.ReLU,
        out_gain: float | None = None) -> nn.Sequential:
    """``Linear`` layers of widths ``hidden`` between ``inputs`` and ``outputs``, an
    ``activation`` after each but the last; ``out_gain`` rescales the last layer's initial
    weights and zeroes its bias (0.01 starts a policy head near uniform). The layers are
    made in order, so under one seed the weights are TorchRL's ``MLP``'s of the same
    sizes."""
    layers: list[nn.Module] = []
    width = inputs
    for size in hidden:
        layers += [nn.Linear(width, size), activation()]
        width = size
    last = nn.Linear(width, outputs)
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
    """Each ``Linear``'s ``(out, in, dtype)`` for a network of :func:`mlp`'s form with
    ReLU activations (``Linear``, then ``ReLU`` and ``Linear`` pairs, every ``Linear``
    with a bias); None for any other network. Networks of one layout can be run by
    :func:`stacked_inference`."""
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


__all__ = ["ACTIVATIONS", "MLPParams", "inference", "mlp", "mlp_layout", "mlp_params", "stacked_inference"]
