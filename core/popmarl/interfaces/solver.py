"""The meta-solver interface: payoff tensor in, one mixture per player out, or (a
:class:`JointMetaSolver`, JPSRO's correlated solvers) a joint distribution over profiles."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from popmarl.interfaces.component import Component
from popmarl.errors import SolverError
from popmarl.gametheory.metagame import ce_gap, cce_gap, check_payoffs, entropy, joint_values, marginals, nash_conv

#: How far an answer's weights may sum from 1 (they are then renormalised) before it is refused.
SUM_TOL = 1e-6
#: How far below 0 a weight may round (it is then clipped to 0) before the answer is refused.
NEGATIVE_TOL = 1e-9


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
        """Solve, check the answer (:func:`check_mixtures`) and measure its regret on the meta-game."""
        payoffs = check_payoffs(payoffs)
        mixtures = check_mixtures(self.solve(payoffs), payoffs.shape[1:])
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
        """Solve, check the answer (:func:`check_joint_answer`); measure the marginals' regret
        and the joint distribution's CCE and CE gaps."""
        payoffs = check_payoffs(payoffs)
        joint = check_joint_answer(self.solve_joint(payoffs), payoffs.shape[1:])
        mixtures = marginals(joint)
        return SolverResult(mixtures=mixtures, joint=joint,
                            metrics={**solution_metrics(payoffs, mixtures), **joint_metrics(payoffs, joint)})


def joint_metrics(payoffs: np.ndarray, joint: np.ndarray) -> dict[str, float | str]:
    """A joint distribution's gaps on the meta-game, welfare and entropy (nats)."""
    return {"meta_cce_gap": cce_gap(payoffs, joint), "meta_ce_gap": ce_gap(payoffs, joint),
            "meta_welfare": float(joint_values(payoffs, joint).sum()), "meta_joint_entropy": entropy(joint.ravel())}


def solve_checked(solver: MetaSolver, payoffs: np.ndarray, *, name: str, seats: Sequence[str]) -> SolverResult:
    """``solver``'s detailed answer for ``payoffs``, checked whatever ``solve_detailed`` a
    plugin wrote: one mixture per seat (and a joint solver's distribution) as the check
    functions below allow. A wrong answer is the solver's bug: a :class:`SolverError`
    naming the solver (``name``) and the seat (from ``seats``, the payoff tensor's axes)."""
    sizes = tuple(np.shape(payoffs)[1:])
    try:
        result = solver.solve_detailed(payoffs)
        joint = result.joint
        if joint is not None or isinstance(solver, JointMetaSolver):
            joint = check_joint_answer(joint, sizes)
        return attrs.evolve(result, mixtures=check_mixtures(result.mixtures, sizes), joint=joint)
    except SolverError as exc:
        where = "" if exc.seat is None else f"seat {seats[exc.seat]}: "
        raise SolverError(f"meta-solver {name} gave an invalid answer: {where}{exc.problem}") from None


def check_mixtures(mixtures: Any, sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """``mixtures`` as one probability vector per seat, of that seat's size in ``sizes``:
    finite, non-negative (down to -``NEGATIVE_TOL``, clipped), summing to 1 (within
    ``SUM_TOL``, renormalised); a :class:`SolverError` for anything else."""
    try:
        answer = [np.asarray(m, dtype=float) for m in mixtures]
    except (TypeError, ValueError):
        raise SolverError(f"{type(mixtures).__name__} is not one numeric mixture per seat") from None
    if len(answer) != len(sizes):
        raise SolverError(f"{len(answer)} mixture{'' if len(answer) == 1 else 's'} for {len(sizes)} seats; "
                          "a solver answers one per seat")
    return tuple(_check_mixture(m, n, seat) for seat, (m, n) in enumerate(zip(answer, sizes)))


def _check_mixture(mixture: np.ndarray, size: int, seat: int) -> np.ndarray:
    if mixture.shape != (size,):
        got = f"{mixture.size} weights" if mixture.ndim == 1 else f"shape {mixture.shape}"
        raise SolverError(f"the mixture has {got}, not {size} (one per policy of the seat's population)", seat=seat)
    return _distribution(mixture, "the mixture", ("weight", "weights"), lambda i: f"index {i[0]}", seat=seat)


def check_joint_answer(joint: Any, shape: Sequence[int]) -> np.ndarray:
    """``joint`` as a distribution over the profiles of ``shape``, with the tolerances of
    :func:`check_mixtures`; a :class:`SolverError` for anything else."""
    if joint is None:
        raise SolverError("no joint distribution, though the solver is a joint one")
    try:
        arr = np.asarray(joint, dtype=float)
    except (TypeError, ValueError):
        raise SolverError(f"the joint distribution ({type(joint).__name__}) is not numeric") from None
    if arr.shape != tuple(shape):
        raise SolverError(f"the joint distribution has shape {arr.shape}, not the meta-game's {tuple(shape)}")
    return _distribution(arr, "the joint distribution", ("probability", "probabilities"), lambda i: f"profile {i}")


def _distribution(arr: np.ndarray, what: str, unit: tuple[str, str], at: Callable[[tuple[int, ...]], str],
                  seat: int | None = None) -> np.ndarray:
    """``arr`` clipped at 0 and renormalised, after checking it is finite, non-negative and
    sums to 1 within the tolerances; ``what``, ``unit`` (singular, plural) and ``at(index)``
    word the error."""
    if not np.all(np.isfinite(arr)):
        raise SolverError(f"{what} has NaN or infinite {unit[1]}", seat=seat)
    if arr.size and arr.min() < -NEGATIVE_TOL:
        index = tuple(int(i) for i in np.unravel_index(int(arr.argmin()), arr.shape))
        raise SolverError(f"{what} has a negative {unit[0]} ({arr.min():.10g} at {at(index)})", seat=seat)
    total = float(arr.sum())
    if abs(total - 1.0) > SUM_TOL:
        raise SolverError(f"{what} sums to {total:.10g}, not 1", seat=seat)
    clipped = np.clip(arr, 0.0, None)
    return clipped / clipped.sum()
