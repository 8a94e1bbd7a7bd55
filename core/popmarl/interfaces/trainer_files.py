"""A trainer's state as named files in safe formats: the numpy and JSON ones (numpy only).

What :data:`~popmarl.interfaces.trainer.TrainerState` files look like for any plugin's trainer:
``.npz`` files of plain arrays (read with ``allow_pickle=False``) and JSON objects, the
trainer's own ``trainer.json`` tagged with its kind and :data:`TRAINER_FORMAT`. A file that is
missing or does not read back is a one-line :class:`~popmarl.errors.CheckpointError`
naming it. (Torch files are the plugins' own: the core imports no torch.)
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from popmarl.errors import CheckpointError
from popmarl.interfaces.trainer import TrainerState

#: Version of ``trainer.json``; a state of another version is refused.
TRAINER_FORMAT = 1
#: The trainer's own file: its kind, counters and generator states.
TRAINER_FILE = "trainer.json"


def state_file(state: TrainerState, name: str) -> bytes:
    """File ``name`` of ``state`` (a missing one is a CheckpointError listing those there)."""
    if name not in state:
        raise CheckpointError(f"trainer state: file {name!r} is missing (has {sorted(state) or 'none'})")
    return state[name]


def first_line(exc: BaseException) -> str:
    """An error's first line (its type where it has no message), for one-line errors."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Plain (non-object) arrays as a compressed ``.npz`` file (replay buffers of
    one-hot and mostly-zero features shrink about 30-fold)."""
    out = io.BytesIO()
    plain: dict[str, Any] = {key: np.asarray(value) for key, value in arrays.items()}
    np.savez_compressed(out, **plain)
    return out.getvalue()


def read_npz(state: TrainerState, name: str) -> dict[str, np.ndarray]:
    """The arrays of ``.npz`` file ``name`` of ``state`` (pickled arrays are refused)."""
    try:
        with np.load(io.BytesIO(state_file(state, name)), allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"trainer state {name}: not a readable .npz file of plain arrays "
                              f"({first_line(exc)})") from None


def json_bytes(obj: Any) -> bytes:
    """``obj`` as a JSON file (keys sorted: the same state, the same bytes)."""
    return json.dumps(obj, sort_keys=True).encode()


def read_json(state: TrainerState, name: str) -> dict[str, Any]:
    """JSON file ``name`` of ``state``, which must hold an object."""
    try:
        data = json.loads(state_file(state, name))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"trainer state {name}: not valid JSON ({first_line(exc)})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"trainer state {name}: expected a JSON object, got {type(data).__name__}")
    return data


def trainer_json(kind: str, **fields: Any) -> bytes:
    """The trainer's counters and generator states, tagged with its kind and :data:`TRAINER_FORMAT`."""
    return json_bytes({"format": TRAINER_FORMAT, "kind": kind, **fields})


def read_trainer_json(state: TrainerState, kind: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """The trainer's JSON file, checked to be of ``kind`` and :data:`TRAINER_FORMAT` and to hold ``fields``."""
    data = read_json(state, TRAINER_FILE)
    if data.get("format") != TRAINER_FORMAT or data.get("kind") != kind:
        raise CheckpointError(f"trainer state {TRAINER_FILE}: holds a {data.get('kind')!r} trainer state of format "
                              f"{data.get('format')!r}, expected {kind!r} of format {TRAINER_FORMAT}")
    missing = [field for field in fields if field not in data]
    if missing:
        raise CheckpointError(f"trainer state {TRAINER_FILE}: missing {', '.join(missing)}")
    return data
