"""The correlated meta-solvers of JPSRO (Marris et al. 2021): ``cce`` and ``ce``.

A distribution σ over profiles is an ε-*coarse correlated* equilibrium (CCE) when no
player gains more than ε by committing to a strategy ``d`` before its recommendation::

    Σ_s σ(s) (u_k(d, s_-k) − u_k(s)) ≤ ε               for every player k and strategy d

and an ε-*correlated* equilibrium (CE) when no player gains more than ε by playing ``d``
whenever it is told ``r``::

    Σ_{s_-k} σ(r, s_-k) (u_k(d, s_-k) − u_k(r, s_-k)) ≤ ε    for every k and r ≠ d.

Both sets are polytopes ``{A σ ≤ ε, σ ≥ 0, Σ σ = 1}``; :func:`deviation_gains` builds
``A`` in one vectorised pass per player (a sparse matrix: one row per player per
deviation, or per (recommended, deviation) pair) and drops the rows no distribution can
violate. ``objective`` picks one point of the polytope:

- ``max_gini``: the maximum-Gini-impurity (C)CE ``max 1 − Σ σ²``, JPSRO's MG(C)CE — unique,
  a quadratic program: a CCE's through its dual, which has one variable per player and
  strategy (:func:`_max_gini_dual`: L-BFGS-B, then solved exactly on the support and
  active rows it finds and checked against the KKT conditions); a CE's, and a CCE's
  whose dual fails the check, with Clarabel through cvxpy;
- ``max_entropy``: the maximum-entropy (C)CE ``max −Σ σ log σ`` — unique, an
  exponential-cone program (Clarabel, through cvxpy);
- ``max_welfare``: a (C)CE of maximum total payoff ``Σ_k Σ_s σ(s) u_k(s)`` — a linear program
  (HiGHS); with ``welfare_tie_break="max_gini"`` (default) the maximum-Gini one among
  the maximisers: the QP again, on the LP's optimal face read off its duals by
  complementary slackness (rows with a positive dual held tight, profiles with a positive
  reduced cost held at 0) — exact, and smaller than the whole polytope, so it costs less
  than the LP. The answer is then unique and treats duplicated policies alike; with
  ``"none"``, the vertex HiGHS returns. (OpenSpiel's ``mwcce``/``mwce`` take whatever their
  LP solver returns.)

Payoffs are shifted and divided by their range (``payoff_scale``) before solving, so
``tol`` is relative to the payoff range; ``epsilon`` is in payoff units. The solvers run
to ``tol / 1000``; an answer is accepted when no constraint exceeds ε by more than
``tol`` (the margin is for Clarabel's exponential cones near forced zeros). Otherwise —
or when the solver fails — the uniform distribution over profiles if it is an ε-(C)CE,
else the product of ``nash``'s mixtures (a Nash equilibrium is a CE and a CCE). The
metrics say which (``solver_method``), for which ``solver_objective``, after how many
iterations (``solver_iterations``: Clarabel's interior-point ones plus HiGHS's simplex
ones), with how many constraints (``solver_constraints``) and what excess over ε
(``solver_violation``, payoff units).

Accuracy: the (C)CE constraints hold to ``tol / 1000`` typically; the distribution itself
is only as exact as a strictly convex objective pins it, about ``sqrt`` of the solver's
tolerance (~1e-5) where the optimum is degenerate (tight constraints with zero
multipliers, e.g. Shapley's game), 1e-6 or better otherwise — OpenSpiel's OSQP answers
agree with ours to that.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any, Literal

import attrs
import numpy as np
import scipy.sparse as sp
from attrs import validators as v
from scipy.optimize import linprog

from popmarl_solvers.base import Extra, JointSolver
from popmarl_solvers.games import payoff_scale

Objective = Literal["max_gini", "max_entropy", "max_welfare"]
TieBreak = Literal["max_gini", "none"]
OBJECTIVES: tuple[str, ...] = ("max_gini", "max_entropy", "max_welfare")
TIE_BREAKS: tuple[str, ...] = ("max_gini", "none")
#: The solvers' own tolerances are ``tol`` times this (HiGHS's at least 1e-10).
PRECISION = 1e-3
Candidate = tuple[str, np.ndarray, int]  # method, flat joint distribution, iterations


@attrs.frozen
class Face:
    """A face of the (C)CE polytope: constraint rows held tight, profiles held at 0."""

    tight: np.ndarray
    zero: np.ndarray


def _number(instance: Any, attribute: Any, value: Any) -> None:
    """attrs validator: a finite int or float (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise TypeError(f"{attribute.name} must be a finite number, got {value!r}")


@attrs.frozen(kw_only=True)
class CorrelatedConfig:
    """``objective`` picks the (C)CE (see the module docstring); ``epsilon`` (payoff
    units) is the gain each constraint may keep; ``tol`` (relative to the payoff range)
    is how much more an answer's constraints may gain, and the welfare a max-Gini
    tie-break may give up (per player); ``max_iterations`` caps each
    Clarabel solve (HiGHS's simplex runs to its end); ``welfare_tie_break`` picks among
    the maximisers of ``max_welfare``."""

    objective: Objective = attrs.field(default="max_gini", validator=v.in_(OBJECTIVES))
    epsilon: float = attrs.field(default=0.0, validator=[_number, v.ge(0.0)])
    tol: float = attrs.field(default=1e-7, validator=[_number, v.gt(0.0), v.le(1e-2)])
    max_iterations: int = attrs.field(default=200, validator=[v.instance_of(int), v.ge(1)])
    welfare_tie_break: TieBreak = attrs.field(default="max_gini", validator=v.in_(TIE_BREAKS))


def deviation_gains(payoffs: np.ndarray, conditional: bool, epsilon: float = 0.0) -> sp.csr_matrix:
    """The (C)CE constraint matrix ``A`` over the flattened profiles (C order): row ``a``
    gives ``a @ σ``, a deviation's expected gain under σ; rows whose every entry is
    ``<= epsilon`` (never violated) are dropped.

    CCE (``conditional=False``): one row per player ``k`` and strategy ``d``, entry
    ``u_k(d, s_-k) − u_k(s)``. CE: one row per ``k`` and pair ``r ≠ d``, entry
    ``u_k(d, s_-k) − u_k(r, s_-k)`` on the profiles where ``k`` is told ``r``, else 0.
    """
    shape = payoffs.shape[1:]
    size = int(np.prod(shape))
    profiles = np.arange(size).reshape(shape)
    data, indices, lengths = [], [], []
    for k, count in enumerate(shape):
        own = np.moveaxis(payoffs[k], k, 0).reshape(count, -1)  # [own strategy, others' profile]
        index = np.moveaxis(profiles, k, 0).reshape(count, -1)
        if conditional:
            told, dev = np.nonzero(~np.eye(count, dtype=bool))
            gains = own[dev] - own[told]  # [pair, others' profile]
            columns = index[told]
        else:
            gains = (own[:, None, :] - own[None, :, :]).reshape(count, -1)  # [d, (told, others)]
            columns = np.broadcast_to(index.reshape(1, -1), (count, size))
        keep = gains.max(axis=1) > epsilon
        data.append(gains[keep].ravel())
        indices.append(columns[keep].ravel())
        lengths.append(np.full(int(keep.sum()), gains.shape[1]))
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(lengths))])
    matrix = sp.csr_matrix((np.concatenate(data), np.concatenate(indices), indptr), shape=(indptr.size - 1, size))
    matrix.eliminate_zeros()
    return matrix


class _CorrelatedBase(JointSolver):
    """The shared solver of ``cce`` and ``ce`` (``conditional`` picks the constraints)."""

    Config = CorrelatedConfig

    def _solve_joint(self, payoffs: np.ndarray) -> tuple[np.ndarray, Extra]:
        c = self.config
        scale = payoff_scale(payoffs)
        lows = payoffs.reshape(payoffs.shape[0], -1).min(axis=1)
        game = (payoffs - lows.reshape((-1,) + (1,) * (payoffs.ndim - 1))) / scale  # each player in [0, 1]
        epsilon = c.epsilon / scale
        a = deviation_gains(game, self.conditional, epsilon)
        best: tuple[float, Candidate] | None = None
        for candidate in self._candidates(payoffs, game, a, epsilon):
            x = np.clip(candidate[1], 0.0, None)
            if not np.all(np.isfinite(x)) or x.sum() <= 0.0:
                continue
            x = x / x.sum()
            excess = float((a @ x).max()) - epsilon if a.shape[0] else 0.0
            if best is None or excess < best[0]:
                best = (excess, (candidate[0], x, candidate[2]))
            if excess <= c.tol:
                break
        assert best is not None  # the Nash product is always a candidate
        excess, (method, x, iterations) = best
        extra = {
            "solver_method": method,
            "solver_objective": c.objective,
            "solver_iterations": iterations,
            "solver_constraints": a.shape[0],
            "solver_violation": max(excess, 0.0) * scale,
        }
        return x.reshape(payoffs.shape[1:]), extra

    def _candidates(
        self, payoffs: np.ndarray, game: np.ndarray, a: sp.csr_matrix, epsilon: float
    ) -> Iterator[Candidate]:
        """The objective's optimum, then the fallbacks: uniform, the Nash product."""
        c = self.config
        size = a.shape[1]
        welfare = game.reshape(game.shape[0], -1).sum(axis=0)
        if a.shape[0] == 0:  # every distribution is a (C)CE
            yield "unconstrained", _unconstrained(c.objective, c.welfare_tie_break, welfare, c.tol), 0
        elif c.objective == "max_welfare":
            found = _max_welfare(a, epsilon, welfare, c)
            if found is not None:
                x, iterations, face = found
                if c.welfare_tie_break == "max_gini":
                    tied = _max_gini(a, epsilon, c, dual=not self.conditional, face=face)
                    if tied is not None and welfare @ tied[1] >= welfare @ x - c.tol * game.shape[0]:
                        yield f"highs_lp+{tied[0]}", tied[1], iterations + tied[2]
                yield "highs_lp", x, iterations
        elif c.objective == "max_gini":
            gini = _max_gini(a, epsilon, c, dual=not self.conditional)
            if gini is not None:
                yield gini
        else:
            optimum = _convex(a, epsilon, c.objective, c)
            if optimum is not None:
                yield "clarabel_exp_cone", optimum[0], optimum[1]
        yield "uniform_fallback", np.full(size, 1.0 / size), 0
        yield "nash_fallback", _nash_product(payoffs), 0


class CoarseCorrelated(_CorrelatedBase):
    """JPSRO's CCE meta-solver: a coarse correlated equilibrium of the meta-game."""

    conditional = False


class Correlated(_CorrelatedBase):
    """JPSRO's CE meta-solver: a correlated equilibrium of the meta-game."""

    conditional = True


def _unconstrained(objective: str, tie_break: str, welfare: np.ndarray, tol: float) -> np.ndarray:
    """The answer when every distribution is a (C)CE."""
    if objective != "max_welfare":
        return np.full(welfare.size, 1.0 / welfare.size)
    if tie_break == "none":
        vertex = np.zeros(welfare.size)
        vertex[int(np.argmax(welfare))] = 1.0
        return vertex
    best = (welfare >= welfare.max() - tol).astype(float)
    return best / best.sum()


def _max_welfare(
    a: sp.csr_matrix, epsilon: float, welfare: np.ndarray, c: CorrelatedConfig
) -> tuple[np.ndarray, int, Face] | None:
    """HiGHS on ``max welfare·σ`` over the polytope: a vertex, its simplex iterations, and
    the LP's optimal face read off the duals by complementary slackness (the rows with a
    positive dual are tight on it, the profiles with a positive reduced cost are 0)."""
    size = a.shape[1]
    precision = max(c.tol * PRECISION, 1e-10)
    res = linprog(
        -welfare,
        A_ub=a,
        b_ub=np.full(a.shape[0], epsilon),
        A_eq=np.ones((1, size)),
        b_eq=[1.0],
        bounds=(0.0, None),
        method="highs",
        options={"primal_feasibility_tolerance": precision, "dual_feasibility_tolerance": precision},
    )
    if res.status != 0 or res.x is None:
        return None
    face = Face(tight=-np.asarray(res.ineqlin.marginals) > precision, zero=np.asarray(res.lower.marginals) > precision)
    return np.asarray(res.x), int(res.nit), face


def _max_gini(a: sp.csr_matrix, epsilon: float, c: CorrelatedConfig, dual: bool,
              face: Face | None = None) -> Candidate | None:
    """The max-Gini (C)CE (over ``face``, if given): from its dual if ``dual``
    (:func:`_max_gini_dual`; a CCE's), else, or where the dual's answer fails its check,
    Clarabel's QP. A CE's rows grow with the square of the population and are highly
    degenerate: on 3-player Leduc meta-games its dual is slower than Clarabel and can
    fail the KKT check, so a CE goes to Clarabel directly."""
    if dual:
        found = _max_gini_dual(a, epsilon, c, face)
        if found is not None:
            return "dual_polished", found[0], found[1]
    optimum = _convex(a, epsilon, "max_gini", c, face)
    return None if optimum is None else ("clarabel_qp", optimum[0], optimum[1])


def _max_gini_dual(
    a: sp.csr_matrix, epsilon: float, c: CorrelatedConfig, face: Face | None = None
) -> tuple[np.ndarray, int] | None:
    """``min ½‖σ‖²`` over the polytope through its dual, which has one variable per
    constraint row (a CCE's rows are one per player and strategy: ~100 where the primal
    has ~30,000 profiles at 31×31×31, so this is much faster than Clarabel's QP there).

    With ``y = (λ, μ)`` for the rows ``B = [A; 1ᵀ]`` and right-hand sides ``b = (ε, 1)``,
    the minimiser of the Lagrangian over ``σ ≥ 0`` is ``σ(y) = max(0, −Bᵀy)`` and the dual
    is ``max −½‖σ(y)‖² − bᵀy`` over ``λ ≥ 0`` (free on ``face``'s tight rows and for ``μ``):
    smooth, solved with L-BFGS-B. Its answer fixes the support ``S`` and the active rows
    ``T``; the exact optimum on them is the minimum-norm solution of ``B_TS σ_S = b_T``
    (least squares), with the multipliers solving ``B_TSᵀ y_T = −σ_S`` nearest the dual's.
    The answer is returned only when it passes the KKT conditions to ``tol / 1000``:
    ``σ ≥ 0``, every row within ``ε`` (tight rows at it), ``Σ σ = 1``, ``λ ≥ 0``,
    stationarity on the support, ``−Bᵀy ≤ 0`` off it (no profile left out would enter)
    and complementary slackness; otherwise ``None`` (the caller asks Clarabel)."""
    from scipy.optimize import minimize

    free = np.ones(a.shape[1], dtype=bool) if face is None else ~face.zero
    tight = np.zeros(a.shape[0], dtype=bool) if face is None else face.tight
    rows = sp.vstack([a[:, free], sp.csr_matrix(np.ones((1, int(free.sum()))))]).tocsr()
    columns = rows.T.tocsr()
    b = np.concatenate([np.full(a.shape[0], epsilon), [1.0]])
    equality = np.concatenate([tight, [True]])

    def objective(y: np.ndarray) -> tuple[float, np.ndarray]:
        sigma = np.maximum(-(columns @ y), 0.0)
        return 0.5 * float(sigma @ sigma) + float(b @ y), b - rows @ sigma

    start = np.zeros(len(b))
    start[-1] = -1.0 / rows.shape[1]  # σ uniform
    bounds = [(None, None) if eq else (0.0, None) for eq in equality]
    res = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 5 * c.max_iterations, "ftol": 1e-15, "gtol": 1e-13, "maxcor": 30})
    y = np.asarray(res.x)
    support = -(columns @ y) > 0.0
    active = equality | (y > 0.0)
    if not support.any():
        return None
    on = rows[active][:, support].toarray()
    sigma_s = np.linalg.lstsq(on, b[active], rcond=None)[0]
    # Stationarity B_TSᵀ y_T = −σ_S by the smallest change to the dual's y: where the
    # multipliers are not unique (degenerate rows) they stay where the dual put them.
    y[active] -= np.linalg.lstsq(on.T, on.T @ y[active] + sigma_s, rcond=None)[0]
    sigma = np.zeros(rows.shape[1])
    sigma[support] = sigma_s
    precision = c.tol * PRECISION
    slack = rows @ sigma - b
    kkt = (
        sigma_s.min() >= -precision
        and np.all(np.where(equality, np.abs(slack), slack) <= precision)
        and np.all(y[~equality] >= -precision)
        and np.all(np.abs(on.T @ y[active] + sigma_s) <= precision)
        and np.all((-(columns @ y))[~support] <= precision)
        and np.all(np.abs(y * slack) <= precision)
    )
    if not kkt:
        return None
    answer = np.zeros(a.shape[1])
    answer[free] = np.clip(sigma, 0.0, None)
    return answer, int(res.nit)


def _convex(
    a: sp.csr_matrix, epsilon: float, objective: str, c: CorrelatedConfig, face: Face | None = None
) -> tuple[np.ndarray, int] | None:
    """Clarabel (through cvxpy) on the max-Gini QP or the max-entropy exponential-cone
    program over the polytope (or over its ``face``: tight rows as equalities, zero
    profiles left out)."""
    import cvxpy as cp  # imported on first use: about two seconds

    free = np.ones(a.shape[1], dtype=bool) if face is None else ~face.zero
    tight = np.zeros(a.shape[0], dtype=bool) if face is None else face.tight
    sub = a[:, free]
    x = cp.Variable(int(free.sum()), nonneg=True)
    constraints = [cp.sum(x) == 1]
    if (~tight).any():
        constraints.append(sub[~tight] @ x <= epsilon)
    if tight.any():
        constraints.append(sub[tight] @ x == epsilon)
    goal = cp.Minimize(cp.sum_squares(x)) if objective == "max_gini" else cp.Maximize(cp.sum(cp.entr(x)))
    problem = cp.Problem(goal, constraints)
    with warnings.catch_warnings():  # "may be inaccurate": the answer's constraints are measured anyway
        warnings.simplefilter("ignore", UserWarning)
        try:
            problem.solve(
                solver=cp.CLARABEL,
                max_iter=c.max_iterations,
                tol_feas=c.tol * PRECISION,
                tol_gap_abs=c.tol * PRECISION,
                tol_gap_rel=c.tol * PRECISION,
            )
        except (cp.error.SolverError, ValueError, ArithmeticError):
            return None
    if x.value is None or problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        return None
    answer = np.zeros(a.shape[1])
    answer[free] = x.value
    return answer, int(problem.solver_stats.num_iters or 0)


def _nash_product(payoffs: np.ndarray) -> np.ndarray:
    """The product of ``nash``'s mixtures, flattened: a Nash equilibrium is a CE and a CCE."""
    from popmarl_solvers.nash import Nash

    joint = np.ones(())
    for mixture in Nash().solve(payoffs):
        joint = np.multiply.outer(joint, mixture)
    return joint.ravel()
