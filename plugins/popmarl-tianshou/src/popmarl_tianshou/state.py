"""The Tianshou parts of a trainer's state as named files in safe formats, and back:
an algorithm's optimisers and learning-rate schedulers (a torch file) and a replay
buffer (its filled rows as ``.npz`` arrays, each in its smallest lossless dtype; its
fill, sampling generator and arrays' dtypes as JSON).

The torch files, module files and generator JSON are popmarl-torch's
(:mod:`popmarl_torch.state`). Anything that does not read back, or does not fit the
trainer it is loaded into, is a one-line :class:`~popmarl.api.CheckpointError` naming
the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import torch
from tianshou.algorithm.algorithm_base import Algorithm as TianshouAlgorithm
from tianshou.data import Batch, ReplayBuffer

from popmarl.api import TRAINER_FILE, CheckpointError, TrainerState, first_line
from popmarl_torch.state import random_state_from_json, random_state_json, read_torch, smallest, torch_bytes


# -- optimisers -----------------------------------------------------------------------------
def _torch_optimizer(optim: TianshouAlgorithm.Optimizer) -> torch.optim.Optimizer:
    # Tianshou's wrapper forwards state_dict/load_state_dict but not the parameters,
    # which the shape check below needs.
    return optim._optim


def optimizer_bytes(algorithm: TianshouAlgorithm) -> bytes:
    """The state of ``algorithm``'s optimisers and learning-rate schedulers."""
    return torch_bytes({"optimizers": [o.state_dict() for o in algorithm._optimizers],
                        "lr_schedulers": [s.state_dict() for s in algorithm.lr_schedulers]})


def load_optimizer(state: TrainerState, name: str, algorithm: TianshouAlgorithm) -> None:
    """Load :func:`optimizer_bytes` file ``name`` into ``algorithm``'s optimisers."""
    data = read_torch(state, name)
    optimizers = data.get("optimizers") if isinstance(data, dict) else None
    schedulers = data.get("lr_schedulers") if isinstance(data, dict) else None
    if not isinstance(optimizers, list) or not isinstance(schedulers, list):
        raise CheckpointError(f"trainer state {name}: not an optimiser state (expected optimizers and lr_schedulers)")
    if len(optimizers) != len(algorithm._optimizers) or len(schedulers) != len(algorithm.lr_schedulers):
        raise CheckpointError(f"trainer state {name}: holds {len(optimizers)} optimisers and {len(schedulers)} "
                              f"schedulers, this trainer has {len(algorithm._optimizers)} and "
                              f"{len(algorithm.lr_schedulers)}")
    for optim, saved in zip(algorithm._optimizers, optimizers, strict=True):
        params = [p for group in _torch_optimizer(optim).param_groups for p in group["params"]]
        try:
            slots = saved["state"]
            for index, slot in slots.items():
                for key, value in slot.items():
                    if isinstance(value, torch.Tensor) and value.dim() and value.shape != params[index].shape:
                        raise ValueError(f"{key} of parameter {index} has shape {tuple(value.shape)}, "
                                         f"the parameter {tuple(params[index].shape)}")
            optim.load_state_dict(saved)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"trainer state {name}: does not fit this trainer's optimiser ({first_line(exc)})") from None
    for scheduler, saved in zip(algorithm.lr_schedulers, schedulers, strict=True):
        scheduler.load_state_dict(saved)


# -- replay buffers -------------------------------------------------------------------------
def _flatten(batch: Batch, prefix: str = "") -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for key in batch.get_keys():
        value = batch[key]
        if isinstance(value, Batch):
            arrays.update(_flatten(value, f"{prefix}{key}."))
        else:
            arrays[prefix + key] = np.asarray(value)
    return arrays


def _filled(buffer: ReplayBuffer) -> dict[str, np.ndarray]:
    """The filled rows of ``buffer``'s storage, nested keys joined with ``.``."""
    return {key: value[:len(buffer)] for key, value in _flatten(cast(Batch, buffer._meta)).items()}


def buffer_arrays(buffer: ReplayBuffer) -> dict[str, np.ndarray]:
    """The filled rows of ``buffer``'s storage, nested keys joined with ``.``, each in its
    smallest lossless dtype (their own are in :func:`buffer_json`)."""
    return {key: smallest(value) for key, value in _filled(buffer).items()}


def buffer_json(buffer: ReplayBuffer) -> dict[str, Any]:
    """``buffer``'s capacity, fill, insertion point and sampling generator, and the dtypes
    of its arrays."""
    dtypes = {key: value.dtype.str for key, value in _filled(buffer).items()} if len(buffer) else {}
    return {"maxsize": buffer.maxsize, "size": len(buffer), "insertion": int(buffer._insertion_idx),
            "last": int(buffer.last_index[0]), "random": random_state_json(buffer._random_state.get_state()),
            "dtypes": dtypes}


def load_buffer(buffer: ReplayBuffer, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], name: str,
                widths: Mapping[str, tuple[int, ...]]) -> None:
    """Refill the empty ``buffer`` from :func:`buffer_json` ``meta`` and the arrays of
    file ``name``; ``widths`` are the row shapes each array must have."""
    try:
        maxsize, size = int(meta["maxsize"]), int(meta["size"])
        insertion, last = int(meta["insertion"]), int(meta["last"])
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"trainer state {TRAINER_FILE}: buffer needs integer maxsize, size, insertion, last") from None
    if maxsize != buffer.maxsize:
        raise CheckpointError(f"trainer state {TRAINER_FILE}: the replay buffer holds up to {maxsize} transitions, "
                              f"this config's buffer_size is {buffer.maxsize}")
    if not (0 <= size <= maxsize and 0 <= insertion < maxsize and 0 <= last < maxsize):
        raise CheckpointError(f"trainer state {TRAINER_FILE}: buffer size {size}, insertion {insertion}, last {last} "
                              f"do not fit a capacity of {maxsize}")
    if size and set(arrays) != set(widths):
        raise CheckpointError(f"trainer state {name}: holds {sorted(arrays)}, expected {sorted(widths)}")
    for key, value in arrays.items():
        if value.shape != (size, *widths[key]) or value.dtype == object:
            raise CheckpointError(f"trainer state {name}: {key} has shape {value.shape}, expected "
                                  f"{(size, *widths[key])} (another config?)")
    random = random_state_from_json(meta.get("random"), "buffer.random")
    dtypes = meta.get("dtypes") or {}  # none in states written before the arrays were stored small
    if size:
        nested: dict[str, Any] = {}
        for key, value in arrays.items():
            try:
                value = value.astype(np.dtype(dtypes[key])) if key in dtypes else value
            except (TypeError, ValueError):
                raise CheckpointError(f"trainer state {TRAINER_FILE}: buffer dtype {dtypes[key]!r} of {key} is not "
                                      "a numpy dtype") from None
            *parents, leaf = key.split(".")
            node = nested
            for parent in parents:
                node = node.setdefault(parent, {})
            full = np.zeros((maxsize, *value.shape[1:]), dtype=value.dtype)
            full[:size] = value
            node[leaf] = full
        buffer._meta = Batch(nested)
    buffer._size, buffer._insertion_idx = size, insertion
    buffer.last_index[0] = last
    buffer._random_state.set_state(random)


__all__ = ["buffer_arrays", "buffer_json", "load_buffer", "load_optimizer", "optimizer_bytes"]
