"""The ``nash`` meta-solver: an equilibrium of the meta-game, always, with its regret checked.

Two populations, constant-sum: one exact LP (:mod:`.zero_sum`). Two populations,
general-sum: Lemke–Howson in floating point from several starting labels, polished on its
supports; if none of these answers is within tolerance, exact integer-pivoting
Lemke–Howson, which cannot fail on degenerate games (:mod:`.lemke_howson`). Symmetric
games (``symmetric``): the same for one population — the row player's maximin strategy
of a symmetric zero-sum game, else Lemke–Howson on the *imitation game* ``(A, I)``,
whose column strategy is a symmetric equilibrium (McLennan & Tourky 2010). More than two
populations: a pure equilibrium if there is one, then (on large tables) double oracle over
subgames, each solved as below, then Gambit's logit tracing, IPA and
global Newton (:mod:`.gambit`), each answer polished on its support, then support search
with Newton's method (:mod:`.support_search`), then replicator dynamics polished on its
support — the last two within ``max_seconds``.

Every candidate's regret is measured; the first within tolerance is returned, else the
best one seen — so the method and the regret actually reached are in the metrics
(``solver_method``, ``meta_nash_conv``), never a silent empty answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import attrs
import numpy as np
from attrs import validators as v

from popmarl.api import nash_conv

from popmarl_solvers.base import Extra, Mixtures, Solver
from popmarl_solvers.gambit import GAMBIT_METHODS, gambit_equilibria
from popmarl_solvers.games import MetaGame, contract, payoff_scale
from popmarl_solvers.lemke_howson import lemke_howson, lemke_howson_exact
from popmarl_solvers.polish import polish
from popmarl_solvers.replicator import projected_replicator_dynamics
from popmarl_solvers.support_search import pure_equilibrium, solve_on_support, support_search
from popmarl_solvers.symmetric import SymmetricOption, validate_symmetric
from popmarl_solvers.zero_sum import is_constant_sum, solve_zero_sum

Candidate = tuple[str, Mixtures, int]  # method, mixtures, iterations
_REPLICATOR_CHUNK = 1_000
_RESTRICTED_ADDS = 3  # best replies a player adds per double-oracle round


@attrs.frozen(kw_only=True)
class NashConfig:
    """Tolerances are absolute regrets for payoffs of range 1 (scaled by the payoff range)."""

    symmetric: SymmetricOption = attrs.field(default="auto", validator=validate_symmetric)
    tol: float = attrs.field(default=1e-8, converter=float, validator=[v.gt(0.0), v.le(1.0)])
    zero_sum_atol: float = attrs.field(default=1e-9, converter=float, validator=[v.ge(0.0), v.le(1e-2)])
    lh_starts: int = attrs.field(default=8, validator=[v.instance_of(int), v.ge(1)])
    max_pivots: int = attrs.field(default=20_000, validator=[v.instance_of(int), v.ge(1)])
    gambit: bool = attrs.field(default=True, validator=v.instance_of(bool))  # n players: Gambit first
    n_player_tol: float = attrs.field(default=1e-6, converter=float, validator=[v.gt(0.0), v.le(1.0)])
    max_support_profiles: int = attrs.field(default=20_000, validator=[v.instance_of(int), v.ge(0)])
    newton_starts: int = attrs.field(default=3, validator=[v.instance_of(int), v.ge(1)])
    replicator_iterations: int = attrs.field(default=100_000, validator=[v.instance_of(int), v.ge(0)])
    # n players: once Gambit found nothing within tolerance, support search and replicator
    # dynamics stop after this many seconds (the solve's total) with the best answer seen.
    max_seconds: float = attrs.field(default=10.0, converter=float, validator=v.gt(0.0))
    # n players: a game with more strategies than this for some player is first solved
    # by double oracle over its subgames (0: never).
    restrict_above: int = attrs.field(default=16, validator=[v.instance_of(int), v.ge(0)])


class Nash(Solver):
    """PSRO-Nash / double-oracle meta-solver (see the module docstring for the methods)."""

    Config = NashConfig

    def _solve(self, payoffs: np.ndarray, symmetric: bool) -> tuple[Mixtures, Extra]:
        scale = payoff_scale(payoffs)
        if payoffs.shape[0] == 2:
            tol = self.config.tol * scale
            candidates = self._symmetric(payoffs) if symmetric else self._bimatrix(payoffs)
        else:
            tol = self.config.n_player_tol * scale
            candidates = self._n_player(payoffs, tol)
        return _first_within(payoffs, candidates, tol, symmetric)

    # -- n players, large tables ---------------------------------------------------------

    def _restricted(self, payoffs: np.ndarray, tol: float) -> Candidate | None:
        """Double oracle inside the meta-game: an equilibrium of a subgame (to begin with,
        each player's newest ⌈√k⌉ of its k strategies and its best reply to the uniform
        profile) is one of the whole game once no player gains by a strategy outside it;
        else each player adds its (up to three) best gaining strategies and the larger
        subgame is solved again. PSRO meta-games have small supports, mostly among recent
        policies, so a few rounds of small subgames answer much sooner than solving the
        whole table (and sooner than starting from the newest strategy alone). None
        (solve it whole) when a subgame's answer is not accurate enough to go on, or when
        the subgames grow past half the strategies, as on random games (which then cost
        more than solving whole)."""
        n, sizes = payoffs.shape[0], payoffs.shape[1:]
        uniform = [np.full(k, 1.0 / k) for k in sizes]
        supports = [sorted({*range(k - int(np.ceil(np.sqrt(k))), k), int(np.argmax(d))})
                    for k, d in zip(sizes, contract(payoffs, uniform), strict=True)]
        for rounds in range(1, sum(sizes) + 1):
            sub = payoffs[np.ix_(range(n), *supports)]
            small, extra = _first_within(sub, self._n_player(sub, tol, restrict=False), tol, False)
            mixtures = []
            for k, support, x in zip(sizes, supports, small, strict=True):
                full = np.zeros(k)
                full[support] = x
                mixtures.append(full)
            deviations = contract(payoffs, mixtures)
            gains = [float(d.max() - d @ x) for d, x in zip(deviations, mixtures, strict=True)]
            if sum(gains) <= tol:
                return f"restricted_{extra['solver_method']}", tuple(mixtures), rounds
            added = False
            for support, d, x in zip(supports, deviations, mixtures, strict=True):
                better = [int(i) for i in np.argsort(-d)[:_RESTRICTED_ADDS] if d[i] > d @ x and i not in support]
                support.extend(better)
                support.sort()
                added = added or bool(better)
            if not added:  # the subgame's answer is not accurate enough to go on
                return None
            if sum(len(support) for support in supports) > sum(sizes) / 2:
                return None  # not a small-support game: solving it whole is faster
        return None

    # -- two players -------------------------------------------------------------------

    def _bimatrix(self, payoffs: np.ndarray) -> Iterator[Candidate]:
        a, b = payoffs
        c = self.config
        if is_constant_sum(payoffs, c.zero_sum_atol * payoff_scale(payoffs)):
            found = solve_zero_sum(a)
            if found is not None:
                yield "zero_sum_lp", found, 1
        yield from _lemke_howson_candidates(a, b, c.lh_starts, c.max_pivots, lambda x, y: (x, y))

    def _symmetric(self, payoffs: np.ndarray) -> Iterator[Candidate]:
        a = payoffs[0]
        c = self.config
        if is_constant_sum(payoffs, c.zero_sum_atol * payoff_scale(payoffs)):
            found = solve_zero_sum(a)
            if found is not None:
                yield "symmetric_zero_sum_lp", (found[0], found[0]), 1
        imitation = np.eye(a.shape[0])  # the column player wants to match the row player
        yield from _lemke_howson_candidates(
            a, imitation, c.lh_starts, c.max_pivots, lambda x, y: (y, y), prefix="symmetric_"
        )

    # -- n players ---------------------------------------------------------------------

    def _n_player(self, payoffs: np.ndarray, tol: float, restrict: bool = True) -> Iterator[Candidate]:
        c = self.config
        deadline = time.monotonic() + c.max_seconds
        pure = pure_equilibrium(payoffs, tol)
        if pure is not None:
            yield "pure_equilibrium", pure, 0
            return
        if restrict and 0 < c.restrict_above < max(payoffs.shape[1:]):
            restricted = self._restricted(payoffs, tol)
            if restricted is not None:
                yield restricted
        for method in GAMBIT_METHODS if c.gambit else ():
            for mixtures in gambit_equilibria(payoffs, method):
                supports = tuple(tuple(int(i) for i in np.flatnonzero(x > 1e-6)) for x in mixtures)
                polished = solve_on_support(payoffs, supports, mixtures)
                if polished is not None:
                    yield f"gambit_{method}_polished", polished, 1
                yield f"gambit_{method}", mixtures, 1
        found, tried = support_search(payoffs, tol, c.max_support_profiles, c.newton_starts, deadline=deadline)
        if found is not None:
            yield "support_search", found, tried
            return
        # Replicator dynamics in chunks, each last iterate polished on its support; the
        # caller stops at the first candidate within tolerance (or keeps the best one).
        game = MetaGame(payoffs)
        xs, done = game.uniform(), 0
        while done < c.replicator_iterations and time.monotonic() <= deadline:
            chunk = min(_REPLICATOR_CHUNK, c.replicator_iterations - done)
            xs = projected_replicator_dynamics(game, chunk, 1e-2, 0.0, average_over_last=1, initial=xs)
            done += chunk
            approx = game.expand(xs)
            yield "replicator", approx, done
            supports = tuple(tuple(int(i) for i in np.flatnonzero(x > 1e-3)) for x in approx)
            polished = solve_on_support(payoffs, supports, approx)
            if polished is not None:
                yield "replicator_polished", polished, done


def _first_within(payoffs: np.ndarray, candidates: Iterator[Candidate], tol: float,
                  symmetric: bool) -> tuple[Mixtures, Extra]:
    """The first candidate with regret within ``tol``, else the best one seen (replicator
    dynamics if there is none), with the method, iterations and attempts it took."""
    best: tuple[float, Candidate] | None = None
    tried = 0
    for candidate in candidates:
        tried += 1
        regret = nash_conv(payoffs, candidate[1])
        if best is None or regret < best[0]:
            best = (regret, candidate)
        if regret <= tol:
            break
    if best is None:  # every method failed to produce anything: replicator dynamics
        game = MetaGame(payoffs, symmetric=symmetric)
        xs = projected_replicator_dynamics(game, _REPLICATOR_CHUNK, 1e-2, 0.0)
        best = (0.0, ("replicator", game.expand(xs), _REPLICATOR_CHUNK))
    method, mixtures, iterations = best[1]
    extra: Extra = {
        "solver_method": method,
        "solver_iterations": iterations,
        "solver_attempts": tried,
        "solver_tolerance": tol,
    }
    return mixtures, extra


def _lemke_howson_candidates(
    a: np.ndarray,
    b: np.ndarray,
    starts: int,
    max_pivots: int,
    answer: Callable[[np.ndarray, np.ndarray], Mixtures],
    prefix: str = "",
) -> Iterator[Candidate]:
    """Floating-point LH from ``starts`` labels (raced, each answer polished), then exact LH."""
    labels = range(min(starts, sum(a.shape)))
    for x, y, pivots in lemke_howson(a, b, labels, max_pivots):
        x, y = polish(a, b, x, y)
        yield f"{prefix}lemke_howson", answer(x, y), pivots
    for x, y, pivots in lemke_howson_exact(a, b, labels, max_pivots):
        yield f"{prefix}lemke_howson_exact", answer(x, y), pivots
