"""A user's own network for ``model: {name: module, params: {path: "user_nets:Pooled"}}``."""

from __future__ import annotations

import torch
from torch import nn

from popmarl.api import Box, Space


class Pooled(nn.Module):
    """Each channel of an image observation (height, width, channels) averaged over the
    image, then a ``Linear`` layer of ``width``: ``features_dim`` is ``width``."""

    def __init__(self, *, observation_space: Space, inputs: int, width: int = 16) -> None:
        super().__init__()
        assert isinstance(observation_space, Box)
        self.shape = observation_space.shape
        self.layer = nn.Linear(self.shape[-1], width)
        self.features_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pixels = self.shape[0] * self.shape[1] * self.shape[2]
        image = x[..., :pixels].reshape(*x.shape[:-1], *self.shape)  # leading dimensions: the batch (and seats)
        return torch.relu(self.layer(image.mean(dim=(-3, -2)) / 255))
