"""``auto``: the faster device for a learner's own networks and batch, timed once.

Where torch sees no GPU, ``auto`` is the CPU, without timing. Where it sees one, each
trainer decides when it first needs its device (its first update, or its first
``state()``): it times a few stand-in steps (after a warm-up) on each candidate, the CPU
and the current GPU (:meth:`AutoDevice.candidates`), and keeps the faster
(:func:`~popmarl_torch.timing.fastest`). For an update device a step is one gradient
step of copies of the trainer's own modules at its real batch size
(:func:`~popmarl_torch.timing.update_workload`); for an acting device one batched
forward pass of the policy network (:func:`~popmarl_torch.timing.acting_workload`) at
the rollout batch size. On a data-centre GPU, 128x128 networks train no faster than on
one CPU core (launch-bound), 1024x1024 ones at batch 1024 several times faster: which
is faster depends on the networks and the batch, so it is timed rather than guessed.

The choice (:class:`DeviceChoice`: the device, the candidates' timings and the rows
timed) is logged, reported in the trainer's metrics and kept in its state, so that a
trainer restored from it uses the recorded device without timing again (see
:class:`~popmarl_torch.placement.TrainerDevices`). One decision per process and workload
(the same networks, batch and candidates) is kept (:class:`AutoDevice`'s cache): the
best responses PSRO starts every iteration time once; a restored record seeds it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import attrs
import torch

from popmarl.api import TRAINER_FILE, CheckpointError
from popmarl_torch.devices import CPU, SPEC, check_device, indexed
from popmarl_torch.timing import Timer, Workload, fastest, time_steps

#: The rollout batch ``acting_device: auto`` is timed on before a trainer has seen a
#: round (``training.num_envs``' default; a round's games where it has).
ACTING_ROWS = 64


@attrs.frozen(kw_only=True)
class DeviceChoice:
    """What a device setting (``spec``) resolved to: ``device``, the candidates' seconds
    per step (``timings``, empty where nothing was timed) and the rows a step was timed
    on. ``how`` says how it was reached, for the log only."""

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
        error = CheckpointError(f"trainer state {TRAINER_FILE}: {name} is not a device choice (spec, device, rows, "
                                "timings)")
        if not isinstance(data, dict) or not {"spec", "device", "rows", "timings"} <= data.keys():
            raise error
        spec, device, rows, pairs = data["spec"], data["device"], data["rows"], data["timings"]
        if not (isinstance(spec, str) and SPEC.fullmatch(spec) and isinstance(device, str) and device
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
            return indexed(torch.device(spec))
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


__all__ = ["ACTING_ROWS", "AUTO", "AutoDevice", "DeviceChoice"]
