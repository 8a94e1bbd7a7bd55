"""Several policies of one network layout acting as one: their MLPs' outputs from one
batched matrix product per layer (:func:`~popmarl_torch.mlp.stacked_inference`) instead
of a forward per policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from popmarl.api import Observations
from popmarl_torch.features import features
from popmarl_torch.mlp import stacked_inference

if TYPE_CHECKING:
    from popmarl_torch.policies import TorchPolicy


def stacked_outputs(policies: Sequence[TorchPolicy], nets: Sequence[nn.Sequential],
                    batches: Sequence[Observations]) -> np.ndarray:
    """The outputs of ``nets[k]`` (policy ``k``'s MLP; one group key) on ``batches[k]``,
    -inf on illegal actions, as one ``[sum of rows, out]`` float32 array in batch order:
    each policy's rows padded to the largest batch, one batched product per layer."""
    counts = [len(b) for b in batches]
    k, width = len(nets), max(counts)
    first = policies[0]
    x = np.ascontiguousarray(features(first.space.observation_space, np.concatenate([b.obs for b in batches])))
    rows = None
    if any(n != width for n in counts):
        # Row r of policy j sits at j * width + r of the padded rows.
        starts = np.cumsum(counts) - counts
        rows = np.arange(len(x)) + np.repeat(np.arange(k) * width - starts, counts)
        padded = np.zeros((k * width, x.shape[1]), dtype=x.dtype)
        padded[rows] = x
        x = padded
    inputs = torch.from_numpy(x).view(k, width, -1)
    if first.device.type != "cpu":
        inputs = inputs.to(first.device)
    params = [policy.mlp_params(net) for policy, net in zip(policies, nets)]
    with torch.no_grad():
        out = stacked_inference(params, inputs).flatten(0, 1).cpu().numpy()
    if rows is not None:
        out = out[rows]
    if any(b.mask is not None for b in batches):
        legal = np.concatenate([np.ones((n, out.shape[1]), bool) if b.mask is None else np.asarray(b.mask, dtype=bool)
                                for b, n in zip(batches, counts)])
        out[~legal] = -np.inf
    return out


def split_rows(rows: np.ndarray, batches: Sequence[Observations]) -> list[np.ndarray]:
    """``rows`` (one per row of the concatenated batches) cut back into one array per batch."""
    out, start = [], 0
    for batch in batches:
        out.append(rows[start:start + len(batch)])
        start += len(batch)
    return out


__all__ = ["split_rows", "stacked_outputs"]
