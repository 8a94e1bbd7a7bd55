"""The meta-solver interface: payoff tensor in, one mixture per player out."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping

import attrs
import numpy as np

from popmarl.component import Component
from popmarl.metagame import check_payoffs, entropy, nash_conv


@attrs.frozen(kw_only=True)
class SolverResult:
    """A solver's answer with its diagnostics (``meta_nash_conv`` always among them)."""

    mixtures: tuple[np.ndarray, ...]
    metrics: Mapping[str, float | str] = attrs.field(factory=dict)


class MetaSolver(Component):
    """Computes a meta-strategy (one mixture per player) from a payoff tensor.

    Subclass, implement :meth:`solve`, register under ``popmarl.solvers``. Override
    :meth:`solve_detailed` instead to report extra metrics (e.g. the method used).
    """

    @abstractmethod
    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        """Return one probability vector per player for ``payoffs`` shaped
        ``[n, |P_1|, ..., |P_n|]``."""

    def solve_detailed(self, payoffs: np.ndarray) -> SolverResult:
        """Solve and measure the answer's regret on the meta-game."""
        payoffs = check_payoffs(payoffs)
        mixtures = tuple(np.asarray(m, dtype=float) for m in self.solve(payoffs))
        return SolverResult(mixtures=mixtures, metrics=solution_metrics(payoffs, mixtures))


def solution_metrics(payoffs: np.ndarray, mixtures: tuple[np.ndarray, ...]) -> dict[str, float | str]:
    """The metrics every solver reports: meta-game NashConv and per-player entropy."""
    metrics: dict[str, float | str] = {"meta_nash_conv": nash_conv(payoffs, mixtures)}
    for k, m in enumerate(mixtures):
        metrics[f"meta_entropy_{k}"] = entropy(m)
    return metrics
