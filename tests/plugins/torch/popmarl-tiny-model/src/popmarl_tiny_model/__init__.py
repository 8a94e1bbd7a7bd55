"""Model ``tiny``: one ``Linear`` layer of ``width`` and a tanh, registered from outside
popmarl under the ``popmarl.models`` entry-point group."""

from __future__ import annotations

import attrs
from torch import nn

from popmarl.api import Space
from popmarl_torch.features import feature_dim
from popmarl_torch.models import Model

POPMARL_API = "2.0"


@attrs.frozen(kw_only=True)
class TinyConfig:
    """``width``: the layer's, the width of the features."""

    width: int = 8


class Tiny(Model):
    """One tanh layer over the flat features."""

    Config = TinyConfig
    config: TinyConfig

    def build(self, space: Space, *, extra: int = 0) -> nn.Module:
        encoder = nn.Sequential(nn.Linear(feature_dim(space) + extra, self.config.width), nn.Tanh())
        encoder.features_dim = self.config.width
        return encoder

    def describe(self) -> str:
        return f"tiny width {self.config.width}"
