"""Atomic file writes: write a sibling temp file, fsync, rename over the target."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never half."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False, default=json_default) + "\n")


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray], *, compress: bool = False) -> None:
    """An ``.npz`` of plain arrays (loadable with ``allow_pickle=False``); ``compress``
    deflates it (lossless; ``np.load`` reads either kind)."""
    buffer = io.BytesIO()
    plain: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}
    (np.savez_compressed if compress else np.savez)(buffer, **plain)
    write_bytes(path, buffer.getvalue())


def json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
