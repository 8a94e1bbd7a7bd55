"""A trainer's torch state as files in safe formats, and back; random generators as JSON.

Torch files hold only tensors in plain containers (written with ``torch.save``, every
tensor on the CPU; read with ``torch.load(..., weights_only=True)``, so no code runs).
Random-generator states go into ``trainer.json`` as plain numbers. Replay buffers' arrays
are stored compactly and losslessly: each in the smallest dtype that holds its values
bit for bit (:func:`smallest`), and a column of next observations as only the rows that
are not the following row of its source column (:func:`successor_rows`). Anything that
does not read back, or does not fit the trainer it is loaded into, is a one-line
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


# -- replay buffers' arrays, compactly ----------------------------------------------------------
#: The dtypes tried, smallest first, for an array of each kind (``f`` float, ``i``/``u`` integer).
_SMALLER = {"f": (np.uint8, np.int8, np.int16, np.float16, np.int32, np.float32),
            "i": (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32),
            "u": (np.uint8, np.uint16, np.uint32)}


def smallest(array: np.ndarray) -> np.ndarray:
    """``array`` in the smallest dtype whose values cast back to its own bit for bit (a
    one-hot float32 feature as uint8, action indices as uint8), else as it is. The
    reader casts back to the dtype it needs (:func:`numpy.ndarray.astype`)."""
    array = np.ascontiguousarray(array)
    if not array.size:
        return array
    for dtype in _SMALLER.get(array.dtype.kind, ()):
        if np.dtype(dtype).itemsize >= array.itemsize:
            break
        with np.errstate(all="ignore"):  # a value out of range fails the round trip, as it should
            small = array.astype(dtype)
            back = small.astype(array.dtype)
        if back.tobytes() == array.tobytes():
            return small
    return array


def successor_rows(column: np.ndarray, source: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``column`` (a replay buffer's next observations) as the rows that are not
    ``source``'s next row (row ``i + 1``, the last row's the first), and a mask of the rows
    that are (within an episode, nearly all): :func:`with_successor_rows` inverts it."""
    rows = np.ascontiguousarray(column).reshape(len(column), -1).view(np.uint8)
    following = np.roll(np.ascontiguousarray(source), -1, axis=0).reshape(len(source), -1).view(np.uint8)
    same = (rows == following).all(axis=1) if rows.shape == following.shape else np.zeros(len(column), bool)
    return column[~same], same


def with_successor_rows(kept: np.ndarray, same: np.ndarray, source: np.ndarray) -> np.ndarray:
    """The column :func:`successor_rows` split into ``kept`` rows and the ``same`` mask."""
    same = np.asarray(same, dtype=bool)
    if source.shape[0] != len(same) or len(kept) != int((~same).sum()) or kept.shape[1:] != source.shape[1:]:
        raise ValueError(f"{len(kept)} rows kept and a mask of {len(same)} do not fit a source of {source.shape}")
    column = np.roll(source, -1, axis=0)
    column[~same] = kept
    return column


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
           "modules_bytes", "random_state_from_json", "random_state_json", "read_torch", "smallest", "successor_rows",
           "torch_bytes", "with_successor_rows"]
