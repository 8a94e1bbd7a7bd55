"""Timing what a device does: a step timed on each candidate device, the fastest kept.

What is timed are stand-ins of a trainer's work, built from copies of its own modules on
synthetic data at its real batch size: one gradient step (:func:`update_workload`) or
one batched forward pass of a policy network (:func:`acting_workload`). Timing takes a
few tenths of a second per candidate and touches no random state of the run.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

#: One timed step on a device (its result is ignored).
Step = Callable[[], object]
#: What is timed: the step to time on a device, set up there (not timed).
Workload = Callable[[torch.device], Step]
#: Seconds per step of ``step`` on ``device`` (see :func:`time_steps`).
Timer = Callable[[Step, torch.device], float]


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


def _first_tensor(out: Any) -> torch.Tensor:
    """The first tensor of a module's output (Tianshou's ``(output, state)`` pairs, a
    Gaussian's ``((loc, scale), state)``, a critic's tensor)."""
    while not isinstance(out, torch.Tensor):
        out = out[0]
    return out


def in_features(module: nn.Module) -> int:
    """The input width of ``module``: the ``input_width`` a network of a model declares
    (:mod:`popmarl_torch.models`), else its first linear layer's."""
    for m in module.modules():
        width = getattr(m, "input_width", None)
        if isinstance(width, int):
            return width
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


__all__ = ["Step", "Timer", "Workload", "acting_workload", "fastest", "in_features", "shapes", "time_steps",
           "update_workload"]
