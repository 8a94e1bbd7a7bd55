"""A trainer's torch state as files in safe formats, and back; random generators as JSON.

Torch files hold only tensors in plain containers (written with ``torch.save``, every
tensor on the CPU; read with ``torch.load(..., weights_only=True)``, so no code runs).
Random-generator states go into ``trainer.json`` as plain numbers. Anything that does not
read back, or does not fit the trainer it is loaded into, is a one-line
:class:`~popmarl.api.CheckpointError` naming the file.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from popmarl.api import TRAINER_FILE, CheckpointError, TrainerState, first_line, state_file


# -- torch files -----------------------------------------------------------------------------
def torch_bytes(obj: Any) -> bytes:
    """``obj`` (tensors in plain dicts, lists and tuples) as a torch file, every tensor
    on the CPU (a trainer on a GPU writes the same portable files as one on the CPU)."""
    out = io.BytesIO()
    torch.save(_each_tensor(obj, torch.Tensor.cpu), out)
    return out.getvalue()


def _each_tensor(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``obj`` with ``fn`` applied to every tensor in its dicts, lists and tuples (the
    containers rebuilt, dicts as plain dicts)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {key: _each_tensor(value, fn) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_each_tensor(value, fn) for value in obj)
    return obj


def read_torch(state: TrainerState, name: str) -> Any:
    """Torch file ``name`` of ``state``, read with ``weights_only=True`` (no code runs)."""
    try:
        return torch.load(io.BytesIO(state_file(state, name)), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"trainer state {name}: not a readable torch file ({first_line(exc)})") from None


def copied(obj: Any) -> Any:
    """``obj`` (a state dict: tensors in plain dicts, lists and tuples) with every tensor
    detached and cloned, dicts as plain dicts: a snapshot that later training leaves alone."""
    return _each_tensor(obj, lambda tensor: tensor.detach().clone())


# -- one module per file ----------------------------------------------------------------------
def module_bytes(module: torch.nn.Module) -> bytes:
    """``module``'s state dict (a copy) as a torch file."""
    return torch_bytes(copied(module.state_dict()))


def load_module(state: TrainerState, name: str, module: torch.nn.Module) -> None:
    """Load :func:`module_bytes` file ``name`` into ``module``, which must have exactly
    its tensors, of the same shapes."""
    tensors = read_torch(state, name)
    expected = module.state_dict()
    if not isinstance(tensors, dict) or set(tensors) != set(expected):
        got = sorted(tensors) if isinstance(tensors, dict) else type(tensors).__name__
        raise CheckpointError(f"trainer state {name}: holds {got}, this trainer's network has {sorted(expected)}")
    for key, value in expected.items():
        if not isinstance(tensors[key], torch.Tensor) or tensors[key].shape != value.shape:
            got = getattr(tensors[key], "shape", type(tensors[key]).__name__)
            raise CheckpointError(f"trainer state {name}: {key} has shape {tuple(got)}, this trainer's network "
                                  f"needs {tuple(value.shape)} (another config?)")
    module.load_state_dict(tensors)


# -- several modules and optimisers in one file ------------------------------------------------
def modules_bytes(modules: Mapping[str, torch.nn.Module | torch.optim.Optimizer]) -> bytes:
    """The state dicts of ``modules`` (copies, by name) as one torch file."""
    return torch_bytes({key: copied(m.state_dict()) for key, m in modules.items()})


def load_modules(state: TrainerState, name: str, modules: Mapping[str, torch.nn.Module | torch.optim.Optimizer]) -> None:
    """Load :func:`modules_bytes` file ``name`` into ``modules``: the same names, each
    state dict fitting its module."""
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


# -- random generators as JSON -----------------------------------------------------------------
def random_state_json(state: Any) -> dict[str, Any]:
    """A ``numpy.random.get_state()`` tuple (Mersenne Twister) as JSON."""
    name, keys, pos, has_gauss, gauss = state
    return {"generator": str(name), "keys": np.asarray(keys, np.uint32).tolist(), "pos": int(pos),
            "has_gauss": int(has_gauss), "gauss": float(gauss)}


def random_state_from_json(data: Any, name: str) -> tuple[str, np.ndarray, int, int, float]:
    """The inverse of :func:`random_state_json`, checked (``name`` says where it came from)."""
    try:
        keys = np.asarray(data["keys"], dtype=np.uint32)
        state = (str(data["generator"]), keys, int(data["pos"]), int(data["has_gauss"]), float(data["gauss"]))
        np.random.RandomState().set_state(state)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise CheckpointError(f"trainer state {TRAINER_FILE}: {name} is not a numpy generator state "
                              f"({first_line(exc)})") from None
    return state


def generator_json(rng: np.random.Generator) -> dict[str, Any]:
    """A numpy ``Generator``'s bit-generator state as JSON (PCG64: integers)."""
    return dict(rng.bit_generator.state)


def generator_from_json(data: Any, name: str) -> np.random.Generator:
    """The inverse of :func:`generator_json`, checked (``name`` says where it came from)."""
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = data
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"trainer state {TRAINER_FILE}: {name} is not a numpy generator state "
                              f"({first_line(exc)})") from None
    return rng


__all__ = ["copied", "generator_from_json", "generator_json", "load_module", "load_modules", "module_bytes",
           "modules_bytes", "random_state_from_json", "random_state_json", "read_torch", "torch_bytes"]
