"""The meta-solver interface: payoff tensor in, one mixture per player out, or (a
:class:`JointMetaSolver`, JPSRO's correlated solvers) a joint distribution over profiles."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping

import attrs
import numpy as np

from popmarl.component import Component
from popmarl.metagame import ce_gap, cce_gap, check_joint, check_payoffs, entropy, joint_values, marginals, nash_conv


@attrs.frozen(kw_only=True)
class SolverResult:
    """A solver's answer with its diagnostics (``meta_nash_conv`` always among them).

    ``joint`` is set by joint solvers: a distribution over profiles (shape
    ``[|P_1|, ..., |P_n|]``) whose marginals are ``mixtures``; profiles are then drawn from
    it, not from the product of the mixtures."""

    mixtures: tuple[np.ndarray, ...]
    metrics: Mapping[str, float | str] = attrs.field(factory=dict)
    joint: np.ndarray | None = None


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


class JointMetaSolver(MetaSolver):
    """Computes a joint distribution over profiles (a correlated meta-strategy, as in
    JPSRO's CE/CCE solvers) from a payoff tensor.

    Subclass, implement :meth:`solve_joint`, register under ``popmarl.solvers``. PSRO then
    draws opponents from the joint distribution (conditioned on the learner's
    recommendation when ``conditional``, as a CE's best responses are; marginalised over
    the learner's seat otherwise, as a CCE's are)."""

    #: Best-respond to each recommendation of the learner's seat (CE) rather than to the
    #: distribution marginalised over that seat (CCE).
    conditional: bool = False

    @abstractmethod
    def solve_joint(self, payoffs: np.ndarray) -> np.ndarray:
        """Return a distribution over profiles, shaped ``payoffs.shape[1:]``."""

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        """The marginals of :meth:`solve_joint`'s answer."""
        return marginals(self.solve_joint(payoffs))

    def solve_detailed(self, payoffs: np.ndarray) -> SolverResult:
        """Solve; measure the marginals' regret and the joint distribution's CCE and CE gaps."""
        payoffs = check_payoffs(payoffs)
        joint = check_joint(self.solve_joint(payoffs), payoffs.shape[1:])
        mixtures = marginals(joint)
        return SolverResult(mixtures=mixtures, joint=joint,
                            metrics={**solution_metrics(payoffs, mixtures), **joint_metrics(payoffs, joint)})


def joint_metrics(payoffs: np.ndarray, joint: np.ndarray) -> dict[str, float | str]:
    """A joint distribution's gaps on the meta-game, welfare and entropy (nats)."""
    return {"meta_cce_gap": cce_gap(payoffs, joint), "meta_ce_gap": ce_gap(payoffs, joint),
            "meta_welfare": float(joint_values(payoffs, joint).sum()), "meta_joint_entropy": entropy(joint.ravel())}
