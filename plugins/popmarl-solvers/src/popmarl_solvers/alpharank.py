"""α-Rank (Omidshafiei et al. 2019): the stationary distribution of an evolutionary chain.

States are monomorphic profiles — one strategy per population (or one strategy, for a
single symmetric population). From a profile, a mutant strategy of one population
fixates with the Fermi-process probability ``ρ = (1 - e^{-u}) / (1 - e^{-m u})``, where
``u = α (f_mutant - f_resident)`` (population size ``m``); ``ρ = 1/m`` when ``u ≈ 0``.
The answer of each population is the marginal of the chain's stationary distribution.

This follows OpenSpiel's ``open_spiel.python.egt.alpharank.compute`` (same profile order,
the local selection model by default, the closed form for constant-sum games, the
infinite-α model with noise ε) and its ``sweep_pi_vs_alpha`` / ``sweep_pi_vs_epsilon``.
It differs in how: the chain is built with array operations over all (profile, mutant)
pairs at once, the fixation probabilities are computed in log space, and the
stationary distribution comes from :mod:`.markov` rather than an eigen-decomposition —
so large α and ε → 0 give an answer instead of "expected 1 stationary distribution".
"""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np
from attrs import validators as v
from scipy.special import logsumexp

from popmarl_solvers.base import Extra, Mixtures, Solver
from popmarl_solvers.markov import stationary_distribution
from popmarl_solvers.symmetric import SymmetricOption, validate_symmetric

Chain = tuple[np.ndarray, np.ndarray, np.ndarray]  # rows, cols, log rates


def log_fixation(u: np.ndarray, m: int) -> np.ndarray:
    """``log((1 - e^{-u}) / (1 - e^{-m u}))`` without overflow; ``log(1/m)`` at ``|u| <= 1e-14``."""
    w = np.abs(u)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(-np.expm1(-w)) - np.log(-np.expm1(-m * w)) - np.where(u < 0, (m - 1) * w, 0.0)
    out[w <= 1e-14] = -np.log(m)
    return out


def _log_infinite_alpha(mutant: np.ndarray, resident: np.ndarray, epsilon: float) -> np.ndarray:
    """Infinite-α rates: 1 - ε towards a better payoff, ε towards a worse one, 1/2 on ties."""
    better = mutant > resident
    out = np.full(better.shape, np.log(epsilon))
    out[better] = np.log1p(-epsilon)
    out[np.isclose(mutant, resident, atol=1e-14)] = np.log(0.5)
    return out


def single_population_chain(
    a: np.ndarray, alpha: float, m: int, local: bool, infinite: bool, epsilon: float
) -> Chain:
    """Transitions s → r of one population with payoff matrix ``a`` (row = own strategy)."""
    n = a.shape[0]
    s, r = np.nonzero(~np.eye(n, dtype=bool))
    if infinite:
        return s, r, _log_infinite_alpha(a[r, s], a[s, r], epsilon)
    if local:
        return s, r, log_fixation(alpha * (a[r, s] - a[s, r]), m)
    # Global selection: fitness against the whole population with p mutants, p = 1..m-1.
    p = np.arange(1, m, dtype=float)
    d = np.diag(a)
    f_mutant = ((p - 1) * d[r, None] + (m - p) * a[r, s][:, None]) / (m - 1)
    f_resident = ((m - p - 1) * d[s, None] + p * a[s, r][:, None]) / (m - 1)
    exponents = -alpha * np.cumsum(f_mutant - f_resident, axis=1)
    return s, r, -np.logaddexp(0.0, logsumexp(exponents, axis=1))


def multi_population_chain(
    payoffs: np.ndarray, alpha: float, m: int, infinite: bool, epsilon: float
) -> Chain:
    """Transitions between profiles differing in one population's strategy (row-major ids)."""
    sizes = payoffs.shape[1:]
    ids = np.arange(int(np.prod(sizes))).reshape(sizes)
    rows, cols, logs = [], [], []
    for k, n_k in enumerate(sizes):
        pay = np.moveaxis(payoffs[k], k, -1).reshape(-1, n_k)  # [other profiles, own strategy]
        idx = np.moveaxis(ids, k, -1).reshape(-1, n_k)
        s, r = np.nonzero(~np.eye(n_k, dtype=bool))
        resident, mutant = pay[:, s], pay[:, r]
        if infinite:
            logs.append(_log_infinite_alpha(mutant, resident, epsilon).ravel())
        else:
            logs.append(log_fixation(alpha * (mutant - resident), m).ravel())
        rows.append(idx[:, s].ravel())
        cols.append(idx[:, r].ravel())
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(logs)


@attrs.frozen(kw_only=True)
class AlphaRankConfig:
    """α-Rank parameters; the defaults are those of OpenSpiel's ``alpharank.compute``.

    ``sweep``: ``"alpha"`` doubles α from 1e-4 until the distribution stops changing
    (``sweep_pi_vs_alpha``); ``"epsilon"`` uses infinite α and halves ε from 0.5 until it
    stops changing (``sweep_pi_vs_epsilon``, what OpenSpiel's PSRO uses).
    """

    alpha: float = attrs.field(default=100.0, converter=float, validator=[v.gt(0.0), v.le(1e12)])
    population_size: int = attrs.field(default=50, validator=[v.instance_of(int), v.ge(2)])
    local_selection: bool = attrs.field(default=True, validator=v.instance_of(bool))
    infinite_alpha: bool = attrs.field(default=False, validator=v.instance_of(bool))
    epsilon: float = attrs.field(default=0.01, converter=float, validator=[v.gt(0.0), v.lt(1.0)])
    sweep: Literal["none", "alpha", "epsilon"] = attrs.field(
        default="none", validator=v.in_(("none", "alpha", "epsilon"))
    )
    sweep_max_iterations: int = attrs.field(default=100, validator=[v.instance_of(int), v.ge(2)])
    symmetric: SymmetricOption = attrs.field(default="auto", validator=validate_symmetric)


class AlphaRank(Solver):
    """PSRO-α-Rank meta-solver: marginals of the α-Rank stationary distribution."""

    Config = AlphaRankConfig

    def stationary(
        self, payoffs: np.ndarray, symmetric: bool, alpha: float, infinite: bool, epsilon: float
    ) -> tuple[np.ndarray, int]:
        """The joint stationary distribution (profiles in row-major order; strategies
        if ``symmetric``) and the number of closed classes it averages."""
        c = self.config
        if symmetric:
            chain = single_population_chain(
                payoffs[0], alpha, c.population_size, c.local_selection, infinite, epsilon
            )
            n_states = payoffs.shape[1]
        else:
            chain = multi_population_chain(payoffs, alpha, c.population_size, infinite, epsilon)
            n_states = int(np.prod(payoffs.shape[1:]))
        return stationary_distribution(*chain, n_states)

    def _solve(self, payoffs: np.ndarray, symmetric: bool) -> tuple[Mixtures, Extra]:
        c = self.config
        extra: dict[str, float | str] = {}
        if c.sweep == "alpha":
            pi, closed, alpha, iterations, converged = self._sweep_alpha(payoffs, symmetric)
            extra.update(alpharank_alpha=alpha, solver_method="alpharank_alpha_sweep")
        elif c.sweep == "epsilon":
            pi, closed, eps, iterations, converged = self._sweep_epsilon(payoffs, symmetric)
            extra.update(alpharank_epsilon=eps, solver_method="alpharank_epsilon_sweep")
        else:
            pi, closed = self.stationary(payoffs, symmetric, c.alpha, c.infinite_alpha, c.epsilon)
            iterations, converged = 1, True
            extra["solver_method"] = "alpharank_infinite" if c.infinite_alpha else "alpharank"
        extra.update(
            solver_iterations=iterations,
            alpharank_closed_classes=closed,
            alpharank_converged=float(converged),
        )
        if symmetric:
            return (pi, pi), extra
        joint = pi.reshape(payoffs.shape[1:])
        n = joint.ndim
        marginals = tuple(joint.sum(axis=tuple(j for j in range(n) if j != k)) for k in range(n))
        return marginals, extra

    def _sweep_alpha(self, payoffs: np.ndarray, symmetric: bool) -> tuple[np.ndarray, int, float, int, bool]:
        """OpenSpiel's ``sweep_pi_vs_alpha``: α doubles from 1e-4 until π stops changing.

        Where OpenSpiel's eigen-solver finds several stationary distributions, this finds
        several closed classes (rates underflowed): the step factor then shrinks while π
        is still moving, and the sweep stops once it has settled.
        """
        alpha, factor = 1e-4, 2.0
        history: list[np.ndarray] = []
        pi, closed = np.empty(0), 0
        for iteration in range(1, self.config.sweep_max_iterations + 1):
            pi, closed = self.stationary(payoffs, symmetric, alpha, False, 0.5)
            if closed > 1:
                if len(history) >= 2 and not _close(history[-1], history[-2]):
                    alpha /= factor
                    factor = (factor + 1.0) / 2.0
                    alpha *= factor
                    continue
                if history:  # settled: keep the last unique answer and its α
                    return history[-1], 1, alpha / factor, iteration, len(history) >= 2
                return pi, closed, alpha, iteration, False
            history.append(pi)
            if len(history) > 1 and _close(history[-1], history[-2]):
                return pi, closed, alpha, iteration, True
            alpha *= factor
        return pi, closed, alpha, self.config.sweep_max_iterations, False

    def _sweep_epsilon(
        self, payoffs: np.ndarray, symmetric: bool
    ) -> tuple[np.ndarray, int, float, int, bool]:
        """OpenSpiel's ``sweep_pi_vs_epsilon``: infinite α, ε halves from 0.5; stop when π
        stops changing after more than 10 steps."""
        epsilon, previous = 0.5, None
        pi, closed = np.empty(0), 0
        for iteration in range(self.config.sweep_max_iterations):
            pi, closed = self.stationary(payoffs, symmetric, 0.0, True, epsilon)
            if iteration > 10 and previous is not None and _close(pi, previous):
                return pi, closed, epsilon, iteration + 1, True
            previous = pi
            epsilon *= 0.5
        return pi, closed, epsilon * 2.0, self.config.sweep_max_iterations, False


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=1e-5, atol=1e-8))
