"""What a network reads and writes: observations as flat float features, the widths of
observations and actions, and a seat's one-hot id appended to its features."""

from __future__ import annotations

import numpy as np
import torch

from popmarl.api import Discrete, Space


def feature_dim(space: Space) -> int:
    """The width of the flat feature vector of one observation of ``space``: a Discrete
    space's size (one-hot), a Box's number of entries (at least 1)."""
    return space.n if isinstance(space, Discrete) else max(space.size, 1)


def action_dim(space: Space) -> int:
    """Outputs of a policy head: actions of a Discrete space, entries of a Box."""
    return space.n if isinstance(space, Discrete) else max(space.size, 1)


def features(space: Space, obs: np.ndarray) -> np.ndarray:
    """``[B, feature_dim]`` float32 features of a batch of observations: a Box is
    flattened, a Discrete observation is one-hot encoded."""
    obs = np.asarray(obs)
    if isinstance(space, Discrete):
        return np.eye(space.n, dtype=np.float32)[obs.reshape(len(obs)).astype(np.int64)]
    x = obs.reshape(len(obs), -1).astype(np.float32, copy=False)
    return x if x.flags.writeable else x.copy()  # torch takes no read-only array (Ray's object store)


def with_ids(x: torch.Tensor, seat: torch.Tensor | int, n_seats: int) -> torch.Tensor:
    """``x`` ``[..., D]`` with the one-hot of ``seat`` (of ``n_seats``) appended; unchanged
    when ``n_seats`` is 1 (a population of one seat needs no id)."""
    if n_seats <= 1:
        return x
    ids = torch.nn.functional.one_hot(torch.as_tensor(seat), n_seats).to(x.dtype)
    return torch.cat([x, ids.expand(*x.shape[:-1], n_seats)], dim=-1)


__all__ = ["action_dim", "feature_dim", "features", "with_ids"]
