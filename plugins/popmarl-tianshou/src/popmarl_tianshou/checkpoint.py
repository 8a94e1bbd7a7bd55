"""Policy checkpoints as torch files of plain tensors.

``save_checkpoint`` writes the policy's weights (``get_weights``) as a dict of tensors
with ``torch.save``; ``load_checkpoint`` reads it back with ``torch.load(...,
weights_only=True)``, so loading a checkpoint never unpickles code.
"""

from __future__ import annotations

import os
import pickle
from typing import TypeVar

import numpy as np
import torch

from popmarl.api import CheckpointError, Policy

FORMAT = 1
P = TypeVar("P", bound=Policy)


def save_checkpoint(policy: Policy, path: str | os.PathLike[str]) -> None:
    """Write ``policy``'s weights to ``path``."""
    weights = {name: torch.from_numpy(np.array(value, copy=True)) for name, value in policy.get_weights().items()}
    torch.save({"format": FORMAT, "policy": type(policy).__name__, "weights": weights}, path)


def load_checkpoint(path: str | os.PathLike[str], policy: P) -> P:
    """Load the weights saved at ``path`` into ``policy`` (of the same kind); return it."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise CheckpointError(f"{path}: not a readable policy checkpoint ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("weights"), dict):
        raise CheckpointError(f"{path}: not a popmarl-tianshou policy checkpoint (format {FORMAT})")
    if data.get("policy") != type(policy).__name__:
        raise CheckpointError(f"{path}: holds a {data.get('policy')}, cannot load it into a {type(policy).__name__}")
    policy.set_weights({name: tensor.numpy() for name, tensor in data["weights"].items()})
    return policy
