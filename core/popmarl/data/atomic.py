"""Atomic file writes: write a sibling temp file, fsync, rename over the target; ``.npz``
files deflated, with the same bytes for the same arrays."""

from __future__ import annotations

import io
import json
import os
import zipfile
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


#: zlib's level for arrays written once (policies, learner states): its default, the
#: smaller files for the little time small arrays take.
DEFLATE_LEVEL = 6
#: zlib's fastest level, for arrays rewritten each iteration as they grow (a payoff
#: table): about a fifth of the default's time for a file a fifth larger.
FAST_DEFLATE_LEVEL = 1
#: The time stamp of every member of the ``.npz`` files written here: fixed, so the same
#: arrays always make the same bytes.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def npz_file_bytes(arrays: Mapping[str, np.ndarray], *, level: int = DEFLATE_LEVEL) -> bytes:
    """An ``.npz`` file of plain arrays (``np.load(..., allow_pickle=False)`` reads it),
    deflated at zlib ``level`` (0: stored), its bytes a function of the arrays alone."""
    buffer = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if level else zipfile.ZIP_STORED
    with zipfile.ZipFile(buffer, "w") as archive:
        for key, value in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(value), allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_TIME), member.getvalue(),
                             compress_type=method, compresslevel=level or None)
    return buffer.getvalue()


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray], *, level: int = DEFLATE_LEVEL) -> None:
    """Replace ``path`` with an ``.npz`` file of plain arrays (:func:`npz_file_bytes`)."""
    write_bytes(path, npz_file_bytes(arrays, level=level))


def json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_json_lines(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, one per line; a line that is not one (a torn
    last line of a file being written) is left out, and a missing file has none."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            lines.append(line)
    return lines
