"""A trainer's state as named files in safe formats, and back.

Torch files hold only tensors in plain containers (``torch.save``; read with
``weights_only=True``), ``.npz`` files plain arrays (``allow_pickle=False``), JSON the
counters and numpy generator states. A file that does not read back, or does not fit the
trainer, is a one-line :class:`~popmarl.errors.CheckpointError` naming it.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from popmarl.errors import CheckpointError
from popmarl.interfaces.trainer import TrainerState
from popmarl.interfaces.trainer_files import TRAINER_FILE as TRAINER, first_line, npz_bytes, read_npz, read_trainer_json, state_file, trainer_json


def torch_bytes(obj: Any) -> bytes:
    """Tensors in plain dicts and lists as a torch file."""
    out = io.BytesIO()
    torch.save(obj, out)
    return out.getvalue()


def read_torch(state: TrainerState, name: str) -> Any:
    """Torch file ``name`` of ``state``, read with ``weights_only=True`` (no code runs)."""
    try:
        return torch.load(io.BytesIO(state_file(state, name)), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"trainer state {name}: not a readable torch file ({first_line(exc)})") from None


def load_modules(state: TrainerState, name: str, modules: Mapping[str, torch.nn.Module | torch.optim.Optimizer]) -> None:
    """Load torch file ``name`` (a dict of state dicts by name) into ``modules``."""
    saved = read_torch(state, name)
    if not isinstance(saved, dict) or set(saved) != set(modules):
        got = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
        raise CheckpointError(f"trainer state {name}: holds {got}, this trainer has {sorted(modules)}")
    for key, target in modules.items():
        try:
            target.load_state_dict(saved[key])
        except (KeyError, RuntimeError, ValueError, TypeError) as exc:
            raise CheckpointError(f"trainer state {name}: {key} does not fit this trainer (another config?): "
                                  f"{first_line(exc)}") from None


def modules_bytes(modules: Mapping[str, torch.nn.Module | torch.optim.Optimizer]) -> bytes:
    """The state dicts of ``modules`` (copies) as one torch file."""
    return torch_bytes({key: _copy(m.state_dict()) for key, m in modules.items()})


def _copy(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_copy(v) for v in obj)
    return obj


def generator_json(rng: np.random.Generator) -> dict[str, Any]:
    """A numpy ``Generator``'s bit-generator state as JSON (PCG64: integers)."""
    return dict(rng.bit_generator.state)


def generator_from_json(data: Any, name: str) -> np.random.Generator:
    """The inverse of :func:`generator_json`, checked."""
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = data
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"trainer state {TRAINER}: {name} is not a numpy generator state ({first_line(exc)})") from None
    return rng


__all__ = ["TRAINER", "generator_from_json", "generator_json", "load_modules", "modules_bytes", "npz_bytes",
           "read_npz", "read_torch", "read_trainer_json", "torch_bytes", "trainer_json"]
