"""Device settings (``device``, ``acting_device``) and the torch devices they name.

A setting is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``. ``cpu``, ``cuda`` and ``cuda:N``
are explicit: used as they are. ``auto`` is decided by timing
(:mod:`popmarl_torch.auto`). Asking for a GPU torch does not see is a one-line error,
raised when the config is validated (:func:`device_validator`: popmarl reports it as a
:class:`~popmarl.api.ConfigError` naming the field) and wherever the device is resolved.
"""

from __future__ import annotations

import re
from typing import Any

import torch

#: What a device setting may be, for error messages.
FORMS = "auto, cpu, cuda or cuda:N (N a GPU index)"
SPEC = re.compile(r"auto|cpu|cuda(?::(\d+))?")
CPU = torch.device("cpu")


def check_device(spec: object) -> None:
    """Raise a one-line ValueError unless ``spec`` is a valid device setting that this
    process can use (``cuda``/``cuda:N`` need torch to see that GPU)."""
    match = SPEC.fullmatch(spec) if isinstance(spec, str) else None
    if match is None:
        raise ValueError(f"must be {FORMS}, got {spec!r}")
    if not str(spec).startswith("cuda"):
        return
    if not torch.cuda.is_available():
        raise ValueError(f"{spec} requested but torch sees no GPU (torch.cuda.is_available() is False); "
                         "use auto or cpu")
    index = match.group(1)
    count = torch.cuda.device_count()
    if index is not None and int(index) >= count:
        raise ValueError(f"{spec} requested but torch sees {count} GPU{'s' if count != 1 else ''} "
                         f"(cuda:0 to cuda:{count - 1}); use auto, cpu or one of those")


def device_validator(_instance: Any, _attribute: Any, value: object) -> None:
    """attrs validator of a config's device field (see :func:`check_device`)."""
    check_device(value)


def resolve_device(spec: str) -> torch.device:
    """The torch device ``spec`` names; for ``auto``, the current GPU if torch sees one
    (the candidate besides the CPU: what ``auto`` picks is timed, see
    :class:`~popmarl_torch.auto.AutoDevice`), else the CPU."""
    check_device(spec)
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(spec)


def indexed(device: torch.device) -> torch.device:
    """``cuda`` as ``cuda:N`` of the current GPU, so that ``cuda`` and ``cuda:0`` compare
    equal where GPU 0 is current; other devices unchanged."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


__all__ = ["CPU", "FORMS", "SPEC", "check_device", "device_validator", "indexed", "resolve_device"]
