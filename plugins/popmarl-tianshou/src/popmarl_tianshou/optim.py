"""The optimiser the algorithms train with: Adam, fused.

Tianshou's :class:`~tianshou.algorithm.optim.AdamOptimizerFactory` builds torch's
default per-tensor Adam; the fused kernel (the same update, one call for all the
parameters) cuts an update of a 128x128 MLP's optimiser step to about a third on one
CPU core, which matters at hundreds of gradient steps per second.
"""

from __future__ import annotations

import torch
from tianshou.algorithm.optim import OptimizerFactory, ParamsType


class FusedAdamFactory(OptimizerFactory):
    """Makes ``torch.optim.Adam(params, lr=lr, fused=True)`` for a Tianshou algorithm."""

    def __init__(self, *, lr: float) -> None:
        super().__init__()
        self.lr = lr

    def _create_optimizer_for_params(self, params: ParamsType) -> torch.optim.Optimizer:
        return torch.optim.Adam(params, lr=self.lr, fused=True)
