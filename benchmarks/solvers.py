"""Meta-solver benchmark: popmarl-solvers against nashpy and OpenSpiel, same games, same run.

Prints one table: for each task, our solver's time and regret (NashConv of the answer on
the game; for the correlated solvers ``cce``/``ce``, the CCE/CE gap of the joint
distribution), then each baseline's, with ``ratio`` = baseline time / our time (> 1: ours
is faster) measured in this same process. Baselines that are not installed are listed as
such; a baseline still running after its time limit is stopped and shown as a timeout.
Run: ``python benchmarks/solvers.py`` (about six minutes), or only some sections:
``python benchmarks/solvers.py --sections correlated`` (see ``--help``). OpenSpiel's JPSRO
solvers use CVXOPT (QPs) and ECOS (LPs) when installed, else OSQP and Clarabel; the rows
say which.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from popmarl.gametheory.metagame import ce_gap, cce_gap, nash_conv
from popmarl_solvers import (
    AlphaRank,
    CoarseCorrelated,
    Correlated,
    Nash,
    ProjectedReplicatorDynamics,
    RegretMatching,
)
from popmarl_solvers.support_search import pure_equilibrium

warnings.filterwarnings("ignore")  # OpenSpiel's α-Rank overflows in exp(); nashpy warns on degeneracy

try:
    import nashpy
except ImportError:  # pragma: no cover - optional baseline
    nashpy = None
try:
    import pyspiel
    from open_spiel.python.algorithms import jpsro, lp_solver
    from open_spiel.python.algorithms import projected_replicator_dynamics as os_prd
    from open_spiel.python.algorithms import regret_matching as os_rm
    from open_spiel.python.algorithms.psro_v2 import meta_strategies
    from open_spiel.python.egt import alpharank as os_alpharank
except ImportError:  # pragma: no cover - optional baseline
    pyspiel = None

ROWS: list[tuple[str, str, str, str, str]] = []


class _MetaGameHolder:
    """What OpenSpiel's ``psro_v2.meta_strategies`` functions expect of a PSRO solver."""

    def __init__(self, payoffs: np.ndarray, **kwargs: Any) -> None:
        self._meta = [np.asarray(p) for p in payoffs]
        self._kwargs = kwargs
        self.symmetric_game = False

    def get_meta_game(self) -> list[np.ndarray]:
        return self._meta

    def get_kwargs(self) -> dict[str, Any]:
        return self._kwargs


def timed(fn: Callable[[], Any], budget_s: float = 1.0) -> tuple[float, Any]:
    """Best wall time of up to 5 calls (fewer when one call is slow) and the last result."""
    best, result, spent = np.inf, None, 0.0
    for _ in range(5):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            result = fn()
        elapsed = time.perf_counter() - start
        best, spent = min(best, elapsed), spent + elapsed
        if spent > budget_s:
            break
    return best, result


#: A baseline call taking longer is stopped and reported as a timeout (nashpy's
#: Lemke–Howson can cycle forever on ordinary random games).
BASELINE_TIMEOUT_S = 10.0
#: OpenSpiel's α-Rank builds its chains in Python loops: seconds to minutes.
ALPHARANK_TIMEOUT_S = 60.0


def _child(fn: Callable[[], Any], conn: Any) -> None:
    conn.send(timed(fn))


def timed_with_timeout(fn: Callable[[], Any], timeout_s: float) -> tuple[float, Any]:
    """:func:`timed` in a forked child, killed after ``timeout_s``."""
    parent, child = multiprocessing.get_context("fork").Pipe(duplex=False)
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(fn, child))
    proc.start()
    ready = parent.poll(timeout_s)
    result = parent.recv() if ready else None
    if not ready:
        proc.kill()
    proc.join()
    if result is None:
        raise TimeoutError
    return result


def regret_of(payoffs: np.ndarray, mixtures: Sequence[np.ndarray] | None) -> float:
    if mixtures is None:
        return float("nan")
    cleaned = [np.clip(np.asarray(m, float).ravel(), 0.0, None) for m in mixtures]
    cleaned = [m / m.sum() for m in cleaned]
    return nash_conv(payoffs, cleaned)


def compare(
    task: str,
    payoffs: np.ndarray,
    ours: Callable[[], Any],
    baselines: dict[str, Callable[[], Any] | str],
    timeout_s: float = BASELINE_TIMEOUT_S,
    measure: Callable[[np.ndarray, Any], float] = regret_of,
) -> None:
    """Time ``ours`` and every baseline on ``payoffs``; a str baseline is a skip reason.
    ``measure(payoffs, answer)`` is the quality column (by default NashConv of mixtures)."""
    our_time, our_answer = timed(ours)
    ROWS.append((task, "popmarl-solvers", f"{our_time * 1e3:10.2f}", f"{measure(payoffs, our_answer):9.1e}", "1.00"))
    for name, fn in baselines.items():
        if isinstance(fn, str):
            ROWS.append((task, name, "         -", "        -", fn))
            continue
        try:
            t, answer = timed_with_timeout(fn, timeout_s)
        except TimeoutError:
            ROWS.append((task, name, f"> {timeout_s * 1e3:8.0f}", "  timeout", "> " + f"{timeout_s / our_time:.0f}"))
            continue
        except Exception as exc:  # a baseline that crashes is a result too
            ROWS.append((task, name, "         -", "        -", f"error: {type(exc).__name__}"))
            continue
        shown = "no answer" if answer is None else f"{measure(payoffs, answer):9.1e}"
        ROWS.append((task, name, f"{t * 1e3:10.2f}", shown, f"{t / our_time:.2f}"))


def _nashpy_lh(payoffs: np.ndarray) -> Sequence[np.ndarray] | None:
    return nashpy.Game(payoffs[0], payoffs[1]).lemke_howson(initial_dropped_label=0)


def _nashpy_lp(payoffs: np.ndarray) -> Sequence[np.ndarray] | None:
    return nashpy.Game(payoffs[0], payoffs[1]).linear_program()


def _nashpy_support(payoffs: np.ndarray) -> Sequence[np.ndarray] | None:
    return next(iter(nashpy.Game(payoffs[0], payoffs[1]).support_enumeration()), None)


def _openspiel_lp(payoffs: np.ndarray) -> Sequence[np.ndarray]:
    p0, p1, _, _ = lp_solver.solve_zero_sum_matrix_game(pyspiel.create_matrix_game(payoffs[0], payoffs[1]))
    return np.asarray(p0).ravel(), np.asarray(p1).ravel()


def _missing(lib: Any, name: str) -> str | None:
    return None if lib is not None else f"{name} not installed"


def nash_baselines(payoffs: np.ndarray, zero_sum: bool) -> dict[str, Any]:
    """The 2-player Nash baselines that apply to ``payoffs``."""
    no_spiel, no_nashpy = _missing(pyspiel, "open_spiel"), _missing(nashpy, "nashpy")
    baselines: dict[str, Any] = {}
    if zero_sum:
        baselines["openspiel lp_solver"] = no_spiel or (lambda: _openspiel_lp(payoffs))
        baselines["openspiel psro_v2 nash"] = no_spiel or (
            lambda: meta_strategies.nash_strategy(_MetaGameHolder(payoffs))
        )
        baselines["nashpy linear_program"] = no_nashpy or (lambda: _nashpy_lp(payoffs))
    else:
        baselines["openspiel psro_v2 nash"] = "zero-sum only"
    baselines["nashpy lemke_howson"] = no_nashpy or (lambda: _nashpy_lh(payoffs))
    if max(payoffs.shape[1:]) <= 6:  # exponential: every pair of supports
        baselines["nashpy support_enum"] = no_nashpy or (lambda: _nashpy_support(payoffs))
    return baselines


def zero_sum_tasks(rng: np.random.Generator) -> None:
    for n in (10, 50, 100, 200):
        a = rng.uniform(-1, 1, (n, n))
        payoffs = np.stack([a, -a])
        compare(f"nash zero-sum {n}x{n}", payoffs, partial(Nash().solve, payoffs), nash_baselines(payoffs, True))


def general_sum_tasks(rng: np.random.Generator) -> None:
    for n in (6, 10, 25, 50, 100):
        payoffs = rng.uniform(-1, 1, (2, n, n))
        compare(
            f"nash general-sum {n}x{n}",
            payoffs,
            partial(Nash().solve, payoffs),
            nash_baselines(payoffs, False),
        )
    # Degenerate: duplicated strategies and integer ties.
    base = rng.integers(0, 3, (2, 4, 4)).astype(float)
    payoffs = base[:, [0, 0, 1, 2, 3, 3], :][:, :, [0, 1, 1, 2, 3, 3]]
    compare("nash degenerate 6x6", payoffs, partial(Nash().solve, payoffs), nash_baselines(payoffs, False))


def n_player_tasks(rng: np.random.Generator) -> None:
    payoffs = rng.uniform(-1, 1, (3, 4, 4, 4))
    while pure_equilibrium(payoffs, 0.0) is not None:  # exercise the mixed search
        payoffs = rng.uniform(-1, 1, (3, 4, 4, 4))
    kwargs = {"prd_iterations": 10_000, "prd_dt": 1e-2}
    compare(
        "nash 3-player 4x4x4",
        payoffs,
        lambda: Nash().solve(payoffs),
        {
            "openspiel psro_v2 nash": "2-player only",
            "openspiel psro_v2 prd (1e4 it)": _missing(pyspiel, "open_spiel")
            or (lambda: meta_strategies.prd_strategy(_MetaGameHolder(payoffs, **kwargs))),
        },
    )


def dynamics_tasks(rng: np.random.Generator) -> None:
    a = rng.uniform(-1, 1, (20, 20))
    payoffs = np.stack([a, -a])
    compare(
        "prd 20x20 (1e4 it)",
        payoffs,
        lambda: ProjectedReplicatorDynamics(iterations=10_000, dt=1e-2, symmetric=False).solve(payoffs),
        {
            "openspiel prd": _missing(pyspiel, "open_spiel")
            or (lambda: os_prd.projected_replicator_dynamics(list(payoffs), prd_iterations=10_000, prd_dt=1e-2)),
        },
    )
    compare(
        "rm 20x20 (1e4 it)",
        payoffs,
        lambda: RegretMatching(iterations=10_000, symmetric=False).solve(payoffs),
        {
            "openspiel regret_matching": _missing(pyspiel, "open_spiel")
            or (lambda: os_rm.regret_matching(list(payoffs), iterations=10_000)),
        },
    )


def alpharank_tasks(rng: np.random.Generator) -> None:
    a = rng.uniform(-1, 1, (50, 50))
    single = np.stack([a, a.T])
    compare(
        "alpharank 1-pop, 50 strategies, alpha=1",
        single,
        lambda: AlphaRank(alpha=1.0).solve(single),
        {
            "openspiel alpharank.compute": _missing(pyspiel, "open_spiel")
            or (lambda: 2 * [os_alpharank.compute([a], alpha=1.0)[2]]),
        },
    )
    compare(
        "alpharank 1-pop, 50 strategies, eps sweep",
        single,
        lambda: AlphaRank(sweep="epsilon").solve(single),
        {
            "openspiel sweep_pi_vs_epsilon": _missing(pyspiel, "open_spiel")
            or (lambda: 2 * [os_alpharank.sweep_pi_vs_epsilon([a])]),
        },
    )
    for n in (10, 20, 30, 50):
        payoffs = rng.uniform(-1, 1, (2, n, n))
        for label, ours, theirs, sweep in (
            ("alpha=1", AlphaRank(alpha=1.0, symmetric=False), "openspiel alpharank.compute", False),
            ("eps sweep", AlphaRank(sweep="epsilon", symmetric=False), "openspiel sweep_pi_vs_epsilon", True),
        ):
            compare(
                f"alpharank 2-pop {n}x{n}, {label}",
                payoffs,
                partial(ours.solve, payoffs),
                {theirs: _missing(pyspiel, "open_spiel") or partial(_openspiel_alpharank, payoffs, sweep)},
                timeout_s=ALPHARANK_TIMEOUT_S,
            )


def _openspiel_alpharank(payoffs: np.ndarray, sweep: bool) -> list[np.ndarray]:
    """Marginals of OpenSpiel's multi-population α-Rank (α = 1, or its ε sweep)."""
    tables = list(payoffs)
    joint = os_alpharank.sweep_pi_vs_epsilon(tables) if sweep else os_alpharank.compute(tables, alpha=1.0)[2]
    joint = np.asarray(joint).reshape(payoffs.shape[1:])
    return [joint.sum(axis=1), joint.sum(axis=0)]


def _gambit(payoffs: np.ndarray, method: str, nfg_text: bool = False) -> Sequence[np.ndarray] | None:
    """One pygambit 17 solver, as a user would call it, on ``payoffs`` scaled to [0, 1];
    its first equilibrium (``gnm_random``: GNM from a seeded random perturbation). With
    ``nfg_text`` the game is built as ours is (``.nfg`` text, ~4x faster than
    ``from_arrays`` at 15x15x15), so the row times the method itself."""
    import pygambit

    from popmarl_solvers.gambit import strategic_game

    low, high = float(payoffs.min()), float(payoffs.max())
    scaled = (payoffs - low) / (high - low)
    game = strategic_game(scaled) if nfg_text else pygambit.StrategicGame.from_arrays(*scaled)
    rng = np.random.default_rng(0)
    solvers = {
        "gnm": lambda: pygambit.nash.gnm_solve(game),
        "gnm_random": lambda: pygambit.nash.gnm_solve(
            game.mixed_strategy_profile(data=[list(w / w.sum()) for w in (rng.random(k) + 0.5 for k in payoffs.shape[1:])])
        ),
        "ipa": lambda: pygambit.nash.ipa_solve(game),
        "logit": lambda: pygambit.nash.logit_solve(game, maxregret=1e-8),
        "enumpure": lambda: pygambit.nash.enumpure_solve(game),
    }
    result = solvers[method]()
    found = [e for e in (result.equilibria if hasattr(result, "equilibria") else [result.equilibrium]) if e is not None]
    if not found:
        return None
    return [np.array([float(x) for _, x in found[0][p]]) for p in game.players]


KUHN3_META = Path(__file__).resolve().parents[1] / "tests" / "plugins" / "solvers" / "data"


def gambit_n_player_tasks(rng: np.random.Generator) -> None:
    """Our n-player nash against each Gambit method: random 3- and 4-player games without a
    pure equilibrium (sizes 5 to 15 per player) and 3-player Kuhn PSRO meta-games."""
    games: list[tuple[str, np.ndarray]] = []
    for players, size in [(3, 5), (3, 10), (3, 15), (4, 5), (4, 8)]:
        payoffs = rng.uniform(-1, 1, (players, *[size] * players))
        while pure_equilibrium(payoffs, 1e-9) is not None:
            payoffs = rng.uniform(-1, 1, (players, *[size] * players))
        games.append((f"nash {players}-player {size}^{players}", payoffs))
    for size in (9, 12):
        payoffs = np.load(KUHN3_META / f"kuhn3_meta_{size}.npy")
        games += [(f"nash 3-player Kuhn meta {k}^3", payoffs[:, :k, :k, :k]) for k in (size - 2, size)]
    for task, payoffs in games:
        compare(
            task,
            payoffs,
            lambda payoffs=payoffs: Nash().solve(payoffs),
            {
                **{
                    f"pygambit {m}": (lambda m=m, payoffs=payoffs: _gambit(payoffs, m))
                    for m in ("logit", "ipa", "gnm", "gnm_random", "enumpure")
                },
                **{
                    f"pygambit {m}, nfg text": (lambda m=m, payoffs=payoffs: _gambit(payoffs, m, nfg_text=True))
                    for m in ("logit", "ipa")
                },
            },
        )


def _openspiel_correlated(payoffs: np.ndarray, solver: Callable[..., Any]) -> np.ndarray:
    """One of OpenSpiel's JPSRO meta-solvers (``jpsro._mgcce`` etc.) on ``payoffs``."""
    joint, _ = solver(payoffs, [np.ones(k) for k in payoffs.shape[1:]], ignore_repeats=True)
    return np.asarray(joint)


def _openspiel_lp_solver() -> str:
    """jpsro's LPs (``_mwcce``, ``_mwce``) default to ECOS; without it, use Clarabel."""
    import cvxpy

    if "ECOS" in cvxpy.installed_solvers():
        return "ECOS"
    jpsro.DEFAULT_ECOS_SOLVER_KWARGS = {"solver": "CLARABEL", "verbose": False}
    return "CLARABEL"


def correlated_tasks(rng: np.random.Generator) -> None:
    """``cce``/``ce`` with each objective against OpenSpiel's JPSRO solver for the same
    (C)CE (max Gini: ``_mgcce``/``_mgce``, CVXOPT then OSQP; max welfare:
    ``_mwcce``/``_mwce``); the quality column is the answer's CCE or CE gap."""
    import cvxpy

    qp = "CVXOPT" if "CVXOPT" in cvxpy.installed_solvers() else "OSQP"
    lp = _openspiel_lp_solver() if pyspiel is not None else ""
    games = [rng.uniform(-1, 1, (2, n, n)) for n in (5, 10, 15)]
    games += [rng.uniform(-1, 1, (3, n, n, n)) for n in (5, 8, 12)]
    for payoffs in games:
        size = "x".join(str(k) for k in payoffs.shape[1:])
        for name, cls, gap in (("cce", CoarseCorrelated, cce_gap), ("ce", Correlated, ce_gap)):
            for objective in ("max_gini", "max_entropy", "max_welfare"):
                solver = cls(objective=objective)
                solver.solve_joint(payoffs)  # cvxpy's first import is not the solver's time
                theirs: dict[str, Any]
                if objective == "max_entropy":
                    theirs = {"openspiel jpsro": "no max-entropy solver"}
                else:
                    flag = {"max_gini": "mg", "max_welfare": "mw"}[objective] + name
                    label = f"openspiel jpsro _{flag} ({qp if objective == 'max_gini' else lp})"
                    function = getattr(jpsro, f"_{flag}") if pyspiel is not None else None
                    theirs = {label: _missing(pyspiel, "open_spiel") or partial(_openspiel_correlated, payoffs, function)}
                compare(
                    f"{name} {objective} {payoffs.shape[0]}p {size}",
                    payoffs,
                    partial(solver.solve_joint, payoffs),
                    theirs,
                    timeout_s=ALPHARANK_TIMEOUT_S,
                    measure=gap,
                )


SECTIONS: dict[str, Callable[[np.random.Generator], None]] = {
    "zero_sum": zero_sum_tasks,
    "general_sum": general_sum_tasks,
    "n_player": n_player_tasks,
    "gambit": gambit_n_player_tasks,
    "dynamics": dynamics_tasks,
    "alpharank": alpharank_tasks,
    "correlated": correlated_tasks,
}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS), metavar="SECTION",
        help=f"which tables to run (default: all): {', '.join(SECTIONS)}",
    )
    args = parser.parse_args(argv)
    rng = np.random.default_rng(2024)
    for name in args.sections:
        SECTIONS[name](rng)
    header = ("task", "solver", "time (ms)", "regret", "ratio")
    widths = [max(len(str(r[i])) for r in [header, *ROWS]) for i in range(5)]
    line = " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    print(line)
    print("-+-".join("-" * w for w in widths))
    for row in ROWS:
        print(" | ".join(str(c).strip().ljust(w) for c, w in zip(row, widths, strict=True)))
    print("\nratio = baseline time / popmarl-solvers time, same process; regret = NashConv of the answer"
          " (cce/ce rows: the joint distribution's CCE/CE gap).")


if __name__ == "__main__":
    main()
