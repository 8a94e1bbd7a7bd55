"""Where the torch algorithms compute: the ``device`` (updates) and ``acting_device``
(policies) parameters of ``dqn``, ``ppo`` and ``a2c``.

Each is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``. ``device`` defaults to ``auto``,
``acting_device`` to ``cpu``. ``cpu``, ``cuda`` and ``cuda:N`` are explicit: used as
they are, nothing timed.

``auto`` picks the faster device for the learner's own networks and batch. Where torch
sees no GPU it is the CPU, without timing. Where it sees one, each trainer decides when
it first needs its device (its first update, or its first ``state()``): it times a few
stand-in steps (after a warm-up) on each candidate, the CPU and the current GPU
(:meth:`AutoDevice.candidates`), and keeps the faster (:func:`fastest`). For ``device``
a step is one gradient step of copies of the trainer's own modules on synthetic data at
its real batch size (:func:`update_workload`: a numpy batch to the device, DQN's
bootstrap forward passes, forward and backward passes, a fused Adam step, the loss
read back). For ``acting_device`` it is one batched forward pass of the policy network
(:func:`acting_workload`) at the rollout batch size, as estimated by the number of games
in the trainer's first round (at most that many are in flight). Timing takes a few
tenths of a second per candidate. Measured on an H100: the default 128x128 networks
train no faster there than on one CPU core (launch-bound), 1024x1024 ones at batch
1024 2-4 times faster.

The choice (:class:`DeviceChoice`: the device, the candidates' timings and the rows
timed) is:

- logged, one ``INFO`` line of logger ``popmarl_tianshou`` per ``auto`` decision,
  naming the learner (algorithm, population, seed), the devices and their timings;
- reported in every update's metrics (``device/<device>`` and ``acting_device/<device>``
  1.0, and when timed ``device_ms/<candidate>`` and ``acting_device_ms/<candidate>``:
  milliseconds per step), which reach a run's ``metrics.jsonl`` as
  ``train/<learner>/device/cuda:0`` and so on;
- kept in the trainer's state (``trainer.json``, ``devices``): a trainer restored from
  it uses the recorded device without timing again, so a resumed run continues
  bit-identically. A state without the record (older checkpoints) loads and the trainer
  decides anew, as it does when the recorded device is not a candidate here (a GPU
  run resumed on a machine without one).

One decision per process and workload (the same networks, batch and candidates) is kept
(:class:`AutoDevice`'s cache): the best responses PSRO starts every iteration time once;
a restored record seeds it. Learners started after a resume whose checkpoint holds no
trainer state (PSRO's default ``newest_weights``) time anew.

Policies are built on the acting device where it is explicit and on the CPU for
``auto``: frozen policies, rollout workers' copies and initial policies stay on the CPU
(nothing to time them by there), and a trainer moves its learner's own policy to the
device its ``acting_device`` decision picked. Weights are published as CPU arrays
either way. The trainer:

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
import logging
import math
import re
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import torch
from torch import nn

from popmarl.errors import CheckpointError

log = logging.getLogger("popmarl_tianshou")

#: What ``device`` may be, for error messages.
FORMS = "auto, cpu, cuda or cuda:N (N a GPU index)"
_SPEC = re.compile(r"auto|cpu|cuda(?::(\d+))?")
CPU = torch.device("cpu")
#: The rollout batch ``acting_device: auto`` is timed on before a trainer has seen a
#: round (``training.num_envs``' default; a round's games where it has).
ACTING_ROWS = 64

#: One timed step on a device (its result is ignored).
Step = Callable[[], object]
#: What is timed: the step to time on a device, set up there (not timed).
Workload = Callable[[torch.device], Step]
#: Seconds per step of ``step`` on ``device`` (see :func:`time_steps`).
Timer = Callable[[Step, torch.device], float]


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
    """The torch device ``spec`` names; for ``auto``, the current GPU if torch sees one
    (the candidate besides the CPU: what ``auto`` picks is timed, see
    :class:`AutoDevice`), else the CPU."""
    check_device(spec)
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(spec)


# -- timing and choosing --------------------------------------------------------------------
def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step: Step, device: torch.device, *, warmup: int = 2, steps: int = 20, budget_s: float = 0.15) -> float:
    """Seconds per ``step`` on ``device``: ``warmup`` untimed steps, then ``steps`` timed
    ones, or fewer (at least 2) once ``budget_s`` has passed; the GPU is synchronised
    before the clock is read."""
    for _ in range(warmup):
        step()
    _synchronize(device)
    start = time.perf_counter()
    done = 0
    while done < steps:
        step()
        done += 1
        if done >= 2 and time.perf_counter() - start >= budget_s:
            break
    _synchronize(device)
    return (time.perf_counter() - start) / done


def fastest(candidates: Sequence[str], workload: Workload,
            timer: Timer = time_steps) -> tuple[str, tuple[tuple[str, float], ...]]:
    """The candidate on which ``workload``'s step is fastest by ``timer`` (the first of
    equals), and every candidate's seconds per step, in order. Each candidate's step is
    set up, timed and dropped before the next one's."""
    if not candidates:
        raise ValueError("fastest: no candidate device")
    timings = []
    for candidate in candidates:
        device = torch.device(candidate)
        seconds = float(timer(workload(device), device))
        timings.append((candidate, seconds))
    best = min(range(len(timings)), key=lambda i: timings[i][1])
    return timings[best][0], tuple(timings)


@attrs.frozen(kw_only=True)
class DeviceChoice:
    """What a ``device`` or ``acting_device`` setting (``spec``) resolved to: ``device``,
    the candidates' seconds per step (``timings``, empty where nothing was timed) and the
    rows a step was timed on. ``how`` says how it was reached, for the log only."""

    spec: str
    device: str
    rows: int | None = None
    timings: tuple[tuple[str, float], ...] = ()
    how: str = attrs.field(default="", eq=False)

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "device": self.device, "rows": self.rows,
                "timings": [[candidate, seconds] for candidate, seconds in self.timings]}

    @classmethod
    def from_json(cls, data: object, name: str) -> DeviceChoice:
        """The inverse of :meth:`to_json`; a CheckpointError naming ``name`` otherwise."""
        error = CheckpointError(f"trainer state trainer.json: {name} is not a device choice (spec, device, rows, "
                                "timings)")
        if not isinstance(data, dict) or not {"spec", "device", "rows", "timings"} <= data.keys():
            raise error
        spec, device, rows, pairs = data["spec"], data["device"], data["rows"], data["timings"]
        if not (isinstance(spec, str) and _SPEC.fullmatch(spec) and isinstance(device, str) and device
                and (rows is None or (isinstance(rows, int) and rows > 0)) and isinstance(pairs, list)
                and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                        and isinstance(p[1], int | float) and math.isfinite(p[1]) for p in pairs)):
            raise error
        timings = tuple((str(c), float(s)) for c, s in pairs)
        return cls(spec=spec, device=device, rows=rows, timings=timings)

    def describe(self, what: str, unit: str) -> str:
        """E.g. ``device auto -> cuda:0 (timed: cpu 1.52 ms, cuda:0 0.61 ms per update
        step of 256 rows)``."""
        head = f"{what} {self.spec} -> {self.device}"
        if not self.timings:
            return f"{head} ({self.how or 'not timed'})"
        times = ", ".join(f"{candidate} {seconds * 1e3:.3g} ms" for candidate, seconds in self.timings)
        return f"{head} ({self.how or 'timed'}: {times} per {unit} of {self.rows} rows)"


class AutoDevice:
    """How ``auto`` is decided in this process: among ``candidates`` (default: the CPU,
    and the current GPU where torch sees one), each timed by ``timer`` on the workload.
    A decision is kept per workload ``key``, rows and candidates, so that later trainers
    of the same networks and batch take it without timing. :data:`AUTO` is the one the
    trainers use (tests put their own there)."""

    def __init__(self, candidates: Sequence[str] | None = None, timer: Timer = time_steps) -> None:
        self._candidates = list(candidates) if candidates is not None else None
        self.timer = timer
        self.cache: dict[Hashable, DeviceChoice] = {}

    def candidates(self) -> list[str]:
        if self._candidates is not None:
            return list(self._candidates)
        devices = ["cpu"]
        if torch.cuda.is_available():
            devices.append(f"cuda:{torch.cuda.current_device()}")
        return devices

    def static(self, spec: str) -> torch.device | None:
        """The device ``spec`` resolves to without timing (explicit, or ``auto`` with
        one candidate); None where ``auto`` must time."""
        check_device(spec)
        if spec != "auto":
            return _indexed(torch.device(spec))
        if self._candidates is None:  # without starting CUDA (policies are built in every process)
            return None if torch.cuda.is_available() else CPU
        return torch.device(self._candidates[0]) if len(self._candidates) == 1 else None

    def choose(self, spec: str, workload: Workload, *, key: Hashable, rows: int) -> DeviceChoice:
        """What ``spec`` resolves to for ``workload`` at ``rows`` rows (timed where it is
        ``auto`` with several candidates, unless decided for ``key`` before)."""
        static = self.static(spec)
        if static is not None:
            how = "explicit" if spec != "auto" else "the only candidate: torch sees no GPU, not timed"
            return DeviceChoice(spec=spec, device=str(static), how=how)
        candidates = tuple(self.candidates())
        cached = self.cache.get((key, rows, candidates))
        if cached is not None:
            return attrs.evolve(cached, how="as timed earlier in this process")
        device, timings = fastest(candidates, workload, self.timer)
        choice = DeviceChoice(spec=spec, device=device, rows=rows, timings=timings, how="timed")
        self.cache[(key, rows, candidates)] = choice
        return choice

    def usable(self, choice: DeviceChoice) -> bool:
        """Whether a recorded ``auto`` choice can be kept here (its device a candidate)."""
        return choice.device in self.candidates()

    def remember(self, key: Hashable, choice: DeviceChoice) -> None:
        """Keep a restored ``choice`` for ``key`` (where it was timed among the same candidates)."""
        candidates = tuple(self.candidates())
        if choice.rows is not None and tuple(c for c, _ in choice.timings) == candidates:
            self.cache.setdefault((key, choice.rows, candidates), choice)


#: How ``auto`` is decided in this process.
AUTO = AutoDevice()


# -- what is timed --------------------------------------------------------------------------
def _first_tensor(out: Any) -> torch.Tensor:
    """The first tensor of a module's output (Tianshou's ``(output, state)`` pairs, a
    Gaussian's ``((loc, scale), state)``, a critic's tensor)."""
    while not isinstance(out, torch.Tensor):
        out = out[0]
    return out


def in_features(module: nn.Module) -> int:
    """The input width of ``module`` (its first linear layer's)."""
    return next(m for m in module.modules() if isinstance(m, nn.Linear)).in_features


def shapes(*modules: nn.Module) -> tuple[tuple[int, ...], ...]:
    """Every parameter's shape: what identifies a workload's networks."""
    return tuple(tuple(p.shape) for module in modules for p in module.parameters())


def _synthetic(rows: int, width: int, seed: int = 0) -> np.ndarray:
    # Its own generator: timing touches no random state of the run.
    return np.random.default_rng(seed).random((rows, width), dtype=np.float32)


def update_workload(modules: Sequence[nn.Module], rows: int, *, lr: float = 1e-4,
                    no_grad_passes: int = 0) -> Workload:
    """A stand-in for one gradient step of a trainer of ``modules`` on ``rows`` rows,
    on copies of them: ``no_grad_passes`` forward passes of the first module without
    gradients on a second numpy batch (DQN's bootstrap targets), a forward and backward
    pass of every module on a numpy batch (moved to the device by the modules, as
    Tianshou's batches are), a fused Adam step, the loss read back."""
    width = in_features(modules[0])
    obs, obs_next = _synthetic(rows, width), _synthetic(rows, width, seed=1)

    def on(device: torch.device) -> Step:
        nets = [copy.deepcopy(module).to(device) for module in modules]
        optim = torch.optim.Adam([p for net in nets for p in net.parameters()], lr=lr, fused=True)

        def step() -> float:
            if no_grad_passes:
                with torch.no_grad():
                    for _ in range(no_grad_passes):
                        _first_tensor(nets[0](obs_next))
            loss = torch.zeros((), device=device)
            for net in nets:
                loss = loss + _first_tensor(net(obs)).float().square().mean()
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
            return loss.detach().item()

        return step

    return on


def acting_workload(module: nn.Module, rows: int) -> Workload:
    """A stand-in for one batched ``act`` of a policy with network ``module`` on ``rows``
    observations: features to the device, a forward pass without gradients, the output
    back to numpy."""
    obs = _synthetic(rows, in_features(module))

    def on(device: torch.device) -> Step:
        net = copy.deepcopy(module).to(device)

        def step() -> np.ndarray:
            with torch.no_grad():
                x = torch.from_numpy(obs)
                return _first_tensor(net(x if device.type == "cpu" else x.to(device))).cpu().numpy()

        return step

    return on


# -- placement ------------------------------------------------------------------------------
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
        return cls(device=device, separate=_indexed(device) != _indexed(acting), acting=acting)


class TrainerDevices:
    """A trainer's ``device`` and ``acting_device`` (``config``'s), decided once: on
    :meth:`decide` (the trainer's first need) by :data:`AUTO`, or by :meth:`load` from
    a recorded state. ``update`` and ``acting`` make the workloads timed at a number of
    rows; ``signature`` identifies the networks (with the rows, the decisions shared in a
    process); ``forced``: a placement to use whatever is decided; ``name`` names the
    learner in the log."""

    def __init__(self, *, config: Any, name: str, signature: Hashable, update: Callable[[int], Workload],
                 acting: Callable[[int], Workload], rows: int, acting_rows: int,
                 forced: Placement | None = None) -> None:
        self.config = config
        self.name = name
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
            self.update = self._choose(self.config.device, self._update(rows), ("update", self.signature), rows)
            self._log("device", self.update, "update step")
        if self.acting is None:
            rows = acting_rows or self.acting_rows
            self.acting = self._choose(self.config.acting_device, self._acting(rows), ("acting", self.signature), rows)
            self._log("acting_device", self.acting, "batched forward pass")

    @staticmethod
    def _choose(spec: str, workload: Workload, key: Hashable, rows: int) -> DeviceChoice:
        return AUTO.choose(spec, workload, key=key, rows=rows)

    def _log(self, what: str, choice: DeviceChoice, unit: str) -> None:
        if choice.spec == "auto":
            log.info("%s: %s", self.name, choice.describe(what, unit))

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
                log.info("%s: the trainer state records no device choice (an older checkpoint); deciding anew",
                         self.name)
            return
        if not isinstance(data, dict):
            raise CheckpointError("trainer state trainer.json: devices is not an object")
        for what, spec, kind in (("device", self.config.device, "update"),
                                 ("acting_device", self.config.acting_device, "acting")):
            if what not in data:
                continue
            choice = DeviceChoice.from_json(data[what], f"devices.{what}")
            if spec != "auto" or choice.spec != "auto":
                continue  # explicit now, or then: the config decides
            if not AUTO.usable(choice):
                log.info("%s: the trainer state records %s auto -> %s, which is not a candidate here (%s); "
                         "deciding anew", self.name, what, choice.device, ", ".join(AUTO.candidates()))
                continue
            choice = attrs.evolve(choice, how="recorded in the trainer state, not timed again")
            AUTO.remember((kind, self.signature), choice)
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
        if next(module.parameters()).device != _indexed(placement.acting):
            module.to(placement.acting)


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

    def placement(self) -> Placement | None:
        """Where trainers update, where no timing is needed to know (both settings
        explicit, or ``auto`` with the CPU the only candidate); None: each trainer
        decides by timing (:class:`TrainerDevices`)."""
        device, acting = AUTO.static(self.config.device), AUTO.static(self.config.acting_device)
        if device is None or acting is None:
            return None
        return Placement.between(device, acting)

    def acting(self) -> torch.device:
        """Where this algorithm's policies are built to act: ``acting_device``; for
        ``auto`` the CPU where it must be timed (a trainer moves its own learner's
        policy to the device it picks; other policies stay on the CPU)."""
        return AUTO.static(self.config.acting_device) or CPU


__all__ = ["ACTING_ROWS", "AUTO", "CPU", "FORMS", "AutoDevice", "DeviceChoice", "DeviceCopies", "OnDevice",
           "Placement", "Step", "Timer", "TrainerDevices", "Workload", "acting_workload", "check_device",
           "device_validator", "fastest", "in_features", "move_policy", "resolve_device", "shapes", "time_steps",
           "update_workload"]
