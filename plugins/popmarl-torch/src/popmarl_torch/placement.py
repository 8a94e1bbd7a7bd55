"""Where a trainer updates and its learner's policy acts: the ``device`` (updates) and
``acting_device`` (policies) settings of an algorithm's config, decided and applied.

Each setting is explicit or ``auto`` (:mod:`popmarl_torch.devices`); a trainer decides
``auto`` on its first need by :data:`popmarl_torch.auto.AUTO` (:class:`TrainerDevices`).
The choice is

- logged, one ``INFO`` line per ``auto`` decision on the logger the trainer names,
  naming the learner (algorithm, population, seed), the devices and their timings;
- reported in every update's metrics (``device/<device>`` and ``acting_device/<device>``
  1.0, and when timed ``device_ms/<candidate>`` and ``acting_device_ms/<candidate>``:
  milliseconds per step), which reach a run's ``metrics.jsonl`` as
  ``train/<learner>/device/cuda:0`` and so on;
- kept in the trainer's state (``trainer.json``, ``devices``): a trainer restored from
  it uses the recorded device without timing again, so a resumed run continues
  bit-identically. A state without the record loads and the trainer decides anew, as
  it does when the recorded device is not a candidate here (a GPU run resumed on a
  machine without one).

Policies are built on the acting device where it is explicit and on the CPU for
``auto`` (:meth:`OnDevice.acting`): frozen policies, rollout workers' copies and initial
policies stay on the CPU, and a trainer moves its learner's own policy to the device
its ``acting_device`` decision picked (:func:`move_policy`). Weights are published as
CPU arrays either way. The trainer:

- where it updates on the acting device, trains the policy's own modules (no copies);
- elsewhere (e.g. a GPU trainer of a CPU policy) trains copies of them on its device,
  and :meth:`DeviceCopies.training` copies the policy's parameters there before each
  update (they may have been set since) and back after it: two copies per update, not
  per gradient step.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import attrs
import torch
from torch import nn

from popmarl.api import TRAINER_FILE, CheckpointError
from popmarl_torch import auto
from popmarl_torch.auto import DeviceChoice
from popmarl_torch.devices import CPU, indexed
from popmarl_torch.timing import Workload


@attrs.frozen(kw_only=True)
class Placement:
    """Where a trainer updates, and whether it trains copies of the policy's modules
    (``separate``: when the policies act elsewhere); ``acting``: where its learner's
    policy acts (None: where it was built)."""

    device: torch.device
    separate: bool
    acting: torch.device | None = None

    @classmethod
    def between(cls, device: torch.device, acting: torch.device) -> Placement:
        return cls(device=device, separate=indexed(device) != indexed(acting), acting=acting)


class TrainerDevices:
    """A trainer's ``device`` and ``acting_device`` (``config``'s), decided once: on
    :meth:`decide` (the trainer's first need) by :data:`popmarl_torch.auto.AUTO`, or by
    :meth:`load` from a recorded state. ``update`` and ``acting`` make the workloads
    timed at a number of rows; ``signature`` identifies the networks (with the rows, the
    decisions shared in a process); ``forced``: a placement to use whatever is decided;
    ``name`` names the learner in the lines logged on ``log``."""

    def __init__(self, *, config: Any, name: str, log: logging.Logger, signature: Hashable,
                 update: Callable[[int], Workload], acting: Callable[[int], Workload], rows: int, acting_rows: int,
                 forced: Placement | None = None) -> None:
        self.config = config
        self.name = name
        self.log = log
        self.signature = signature
        self._update, self._acting = update, acting
        self.rows, self.acting_rows = rows, acting_rows
        self.forced = forced
        self.update: DeviceChoice | None = None
        self.acting: DeviceChoice | None = None

    def decide(self, rows: int | None = None, acting_rows: int | None = None) -> None:
        """Decide what is not decided yet (``rows``: the update's batch, ``acting_rows``:
        the rollout's; default: the trainer's estimates)."""
        if self.update is None:
            rows = rows or self.rows
            self.update = auto.AUTO.choose(self.config.device, self._update(rows), key=("update", self.signature),
                                           rows=rows)
            self._log("device", self.update, "update step")
        if self.acting is None:
            rows = acting_rows or self.acting_rows
            self.acting = auto.AUTO.choose(self.config.acting_device, self._acting(rows),
                                           key=("acting", self.signature), rows=rows)
            self._log("acting_device", self.acting, "batched forward pass")

    def _log(self, what: str, choice: DeviceChoice, unit: str) -> None:
        if choice.spec == "auto":
            self.log.info("%s: %s", self.name, choice.describe(what, unit))

    def placement(self) -> Placement:
        self.decide()
        if self.forced is not None:
            return self.forced
        assert self.update is not None and self.acting is not None
        return Placement.between(torch.device(self.update.device), torch.device(self.acting.device))

    def record(self) -> dict[str, Any]:
        """The decisions, for ``trainer.json``."""
        self.decide()
        assert self.update is not None and self.acting is not None
        return {"device": self.update.to_json(), "acting_device": self.acting.to_json()}

    def load(self, data: object) -> None:
        """Take the recorded ``auto`` decisions of :meth:`record` ``data`` (None: a state
        without them, whose trainer decides anew); explicit settings are what the config
        says; a recorded device that is not a candidate here is decided anew."""
        if data is None:
            if "auto" in (self.config.device, self.config.acting_device):
                self.log.info("%s: the trainer state records no device choice (an older checkpoint); deciding anew",
                              self.name)
            return
        if not isinstance(data, dict):
            raise CheckpointError(f"trainer state {TRAINER_FILE}: devices is not an object")
        for what, spec, kind in (("device", self.config.device, "update"),
                                 ("acting_device", self.config.acting_device, "acting")):
            if what not in data:
                continue
            choice = DeviceChoice.from_json(data[what], f"devices.{what}")
            if spec != "auto" or choice.spec != "auto":
                continue  # explicit now, or then: the config decides
            if not auto.AUTO.usable(choice):
                self.log.info("%s: the trainer state records %s auto -> %s, which is not a candidate here (%s); "
                              "deciding anew", self.name, what, choice.device, ", ".join(auto.AUTO.candidates()))
                continue
            choice = attrs.evolve(choice, how="recorded in the trainer state, not timed again")
            auto.AUTO.remember((kind, self.signature), choice)
            setattr(self, kind, choice)
            self._log(what, choice, "update step" if kind == "update" else "batched forward pass")

    def metrics(self) -> dict[str, float]:
        """``device/<device>`` and ``acting_device/<device>`` 1.0, and each timed
        candidate's milliseconds per step (``device_ms/<candidate>``...)."""
        out: dict[str, float] = {}
        for what, choice in (("device", self.update), ("acting_device", self.acting)):
            if choice is None:
                continue
            out[f"{what}/{choice.device}"] = 1.0
            out.update({f"{what}_ms/{candidate}": seconds * 1e3 for candidate, seconds in choice.timings})
        return out


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


def move_policy(modules: Sequence[nn.Module], placement: Placement) -> None:
    """Put a learner's policy modules where ``placement`` says it acts."""
    if placement.acting is None:
        return
    for module in modules:
        if next(module.parameters()).device != indexed(placement.acting):
            module.to(placement.acting)


class OnDevice:
    """Mixin of the algorithms whose config has ``device`` and ``acting_device``: where
    their trainers update and their policies act."""

    config: Any

    def placement(self) -> Placement | None:
        """Where trainers update, where no timing is needed to know (both settings
        explicit, or ``auto`` with the CPU the only candidate); None: each trainer
        decides by timing (:class:`TrainerDevices`)."""
        device, acting = auto.AUTO.static(self.config.device), auto.AUTO.static(self.config.acting_device)
        if device is None or acting is None:
            return None
        return Placement.between(device, acting)

    def acting(self) -> torch.device:
        """Where this algorithm's policies are built to act: ``acting_device``; for
        ``auto`` the CPU where it must be timed (a trainer moves its own learner's
        policy to the device it picks; other policies stay on the CPU)."""
        return auto.AUTO.static(self.config.acting_device) or CPU


__all__ = ["DeviceCopies", "OnDevice", "Placement", "TrainerDevices", "move_policy"]
