"""A trainer's state as named files in safe formats, and back.

Torch files hold only tensors in plain containers (``torch.save``; read with
``weights_only=True``), ``.npz`` files plain arrays (``allow_pickle=False``), JSON the
counters and numpy generator states. A file that does not read back, or does not fit the
trainer, is a one-line :class:`~popmarl.errors.CheckpointError` naming it.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from popmarl.errors import CheckpointError
from popmarl.trainer import TrainerState

#: Version of these files; a state of another version is refused.
FORMAT = 1
TRAINER = "trainer.json"


def _file(state: TrainerState, name: str) -> bytes:
    if name not in state:
        raise CheckpointError(f"trainer state: file {name!r} is missing (has {sorted(state) or 'none'})")
    return state[name]


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def torch_bytes(obj: Any) -> bytes:
    """Tensors in plain dicts and lists as a torch file."""
    out = io.BytesIO()
    torch.save(obj, out)
    return out.getvalue()


def read_torch(state: TrainerState, name: str) -> Any:
    """Torch file ``name`` of ``state``, read with ``weights_only=True`` (no code runs)."""
    try:
        return torch.load(io.BytesIO(_file(state, name)), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"trainer state {name}: not a readable torch file ({_line(exc)})") from None


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
                                  f"{_line(exc)}") from None


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


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Plain arrays as a compressed ``.npz`` file."""
    out = io.BytesIO()
    plain: dict[str, Any] = {key: np.asarray(value) for key, value in arrays.items()}
    np.savez_compressed(out, **plain)
    return out.getvalue()


def read_npz(state: TrainerState, name: str) -> dict[str, np.ndarray]:
    """The arrays of ``.npz`` file ``name`` (pickled arrays are refused)."""
    try:
        with np.load(io.BytesIO(_file(state, name)), allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"trainer state {name}: not a readable .npz file of plain arrays ({_line(exc)})") from None


def trainer_json(kind: str, **fields: Any) -> bytes:
    """The trainer's counters and generator states, tagged with its kind and :data:`FORMAT`."""
    return json.dumps({"format": FORMAT, "kind": kind, **fields}, sort_keys=True).encode()


def read_trainer_json(state: TrainerState, kind: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """The trainer's JSON file, checked to be of ``kind`` and to hold ``fields``."""
    try:
        data = json.loads(_file(state, TRAINER))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"trainer state {TRAINER}: not valid JSON ({_line(exc)})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("kind") != kind:
        got = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise CheckpointError(f"trainer state {TRAINER}: holds a {got!r} trainer state, expected {kind!r} of format "
                              f"{FORMAT}")
    missing = [field for field in fields if field not in data]
    if missing:
        raise CheckpointError(f"trainer state {TRAINER}: missing {', '.join(missing)}")
    return data


def generator_json(rng: np.random.Generator) -> dict[str, Any]:
    """A numpy ``Generator``'s bit-generator state as JSON (PCG64: integers)."""
    return dict(rng.bit_generator.state)


def generator_from_json(data: Any, name: str) -> np.random.Generator:
    """The inverse of :func:`generator_json`, checked."""
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = data
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"trainer state {TRAINER}: {name} is not a numpy generator state ({_line(exc)})") from None
    return rng
