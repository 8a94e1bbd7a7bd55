"""Turn popmarl's nested configs and metrics lines into what MLflow accepts.

MLflow names may use letters, digits, ``_ - . / space`` and must not look like odd file
paths (no empty, ``.`` or ``..`` segments); params are strings of at most 6000
characters, tag values at most 8000, keys at most 250.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000

_BAD_CHARS = re.compile(r"[^A-Za-z0-9_.\- /]")


def mlflow_name(name: str) -> str:
    """``name`` made a valid MLflow metric, param or tag key (bad characters become ``_``)."""
    parts = [_BAD_CHARS.sub("_", part) for part in str(name).split("/")]
    parts = ["_" if part in ("", ".", "..") else part for part in parts]
    return "/".join(parts)[:MAX_KEY] or "_"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in ``...`` when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _leaves(data: Any, prefix: str, sep: str, *, lists: bool) -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` for each leaf; empty containers (and lists, unless
    ``lists``) are leaves."""
    if isinstance(data, Mapping) and data:
        items: Any = data.items()
    elif lists and isinstance(data, (list, tuple)) and data:
        items = enumerate(data)
    else:
        yield prefix, data
        return
    for key, value in items:
        yield from _leaves(value, f"{prefix}{sep}{key}" if prefix else str(key), sep, lists=lists)


def _param_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    return json.dumps(value, default=str)


def config_params(config: Mapping[str, Any]) -> dict[str, str]:
    """The config as MLflow params: dotted keys (``trackers.1.params.experiment``), YAML-like
    values (``null``, ``true``, ``0.001``), both cut to MLflow's limits."""
    return {
        mlflow_name(key): truncate(_param_text(value), MAX_PARAM_VALUE)
        for key, value in _leaves(config, "", ".", lists=True)
    }


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a number (bools and numpy scalars too), else None."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if getattr(value, "shape", None) == () and hasattr(value, "dtype"):
        try:
            return float(value)
        except (TypeError, ValueError):
            return None
    return None


def metric_values(line: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of a metrics line under MLflow-safe names; nested mappings are
    flattened with ``/``; ``None``, strings and lists are skipped."""
    metrics: dict[str, float] = {}
    for key, value in _leaves(line, "", "/", lists=False):
        number = _number(value)
        if number is not None:
            metrics[mlflow_name(key)] = number
    return metrics
