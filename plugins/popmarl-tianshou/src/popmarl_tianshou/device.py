"""Where the torch algorithms compute: the ``device`` (updates) and ``acting_device``
(policies) parameters of ``dqn``, ``ppo`` and ``a2c``.

Each is ``auto`` (a GPU when ``torch.cuda.is_available()``, else the CPU), ``cpu``,
``cuda`` or ``cuda:N``. ``device`` defaults to ``auto``, ``acting_device`` to ``cpu``:
policies (rollout workers, frozen policies, the learner's own policy) act on the CPU
unless configured: with the default small networks even the updates ran no faster on an
H100 than on one CPU core (``benchmarks/learning.py``), and acting's batches are smaller;
with wide networks and many parallel games, batched inference on a GPU can pay. Weights
are published as CPU arrays either way. The trainer:

- where it updates on the acting device, trains the policy's own modules (no copies);
- elsewhere (e.g. a GPU trainer of a CPU policy) trains copies of them on its device
  (its critic and target network live only there), and :meth:`DeviceCopies.training`
  copies the policy's parameters there before each ``update`` (they may have been set
  since) and back after it: two copies per update, not per gradient step.

Asking for a GPU torch does not see is a config error, raised when the config is
validated (before a run writes anything) and wherever the algorithm is built.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterator
from typing import Any

import attrs
import torch
from torch import nn

#: What ``device`` may be, for error messages.
FORMS = "auto, cpu, cuda or cuda:N (N a GPU index)"
_SPEC = re.compile(r"auto|cpu|cuda(?::(\d+))?")


def check_device(spec: object) -> None:
    """Raise a one-line ValueError unless ``spec`` is a valid ``device`` that this process
    can use (``cuda``/``cuda:N`` need torch to see that GPU)."""
    match = _SPEC.fullmatch(spec) if isinstance(spec, str) else None
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
    """attrs validator of a config's ``device`` field (see :func:`check_device`)."""
    check_device(value)


def resolve_device(spec: str) -> torch.device:
    """The torch device ``spec`` names (``auto``: the current GPU if torch sees one)."""
    check_device(spec)
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(spec)


@attrs.frozen(kw_only=True)
class Placement:
    """Where a trainer updates, and whether it trains copies of the policy's modules
    (``separate``: when the policies act elsewhere)."""

    device: torch.device
    separate: bool

    @classmethod
    def of(cls, spec: str, acting: str = "cpu") -> Placement:
        device = resolve_device(spec)
        return cls(device=device, separate=_indexed(device) != _indexed(resolve_device(acting)))


class DeviceCopies:
    """The modules a trainer updates: a learner policy's own (CPU, not ``separate``) or
    their copies on the placement's device, kept in step with the policy around updates."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self._pairs: list[tuple[nn.Module, nn.Module]] = []

    @property
    def device(self) -> torch.device:
        return self.placement.device

    def of(self, module: nn.Module) -> nn.Module:
        """What the trainer trains for the policy's ``module``: itself, or its device copy."""
        if not self.placement.separate:
            return module
        trained = copy.deepcopy(module).to(self.placement.device)
        self._pairs.append((module, trained))
        return trained

    @contextlib.contextmanager
    def training(self) -> Iterator[None]:
        """Around one update: the policy's parameters to the copies, then back."""
        for policy_module, trained in self._pairs:
            trained.load_state_dict(policy_module.state_dict())
        yield
        for policy_module, trained in self._pairs:
            policy_module.load_state_dict(trained.state_dict())


def _indexed(device: torch.device) -> torch.device:
    """``cuda`` as ``cuda:N`` of the current GPU, so that ``cuda`` and ``cuda:0`` compare
    equal where GPU 0 is current; other devices unchanged."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


class OnDevice:
    """Mixin of the algorithms whose config has ``device`` and ``acting_device``: where
    their trainers update and their policies act."""

    config: Any

    def placement(self) -> Placement:
        return Placement.of(self.config.device, self.config.acting_device)

    def acting(self) -> torch.device:
        """Where this algorithm's policies act."""
        return resolve_device(self.config.acting_device)


__all__ = ["FORMS", "DeviceCopies", "OnDevice", "Placement", "check_device", "device_validator", "resolve_device"]
