"""popmarl exact-oracle PSRO vs OpenSpiel's own psro_v2 on Kuhn and Leduc poker, one run.

Both sides use an exact best response as the oracle (psro_v2: OpenSpiel's C++
``TabularBestResponse``; popmarl: ``exact_br``'s sequence-form one, the same values) and a
Nash meta-solver (popmarl: ``nash`` from popmarl-solvers; OpenSpiel:
``meta_strategy_method="nash"``, its cvxpy/ecos LP; ``--openspiel-solver prd`` if those
are not installed). psro_v2 runs as its example does: ``sims_per_entry`` = 1000 sampled
episodes per payoff entry, ``--openspiel-iterations`` iterations (30). popmarl evaluates
payoff entries exactly (sequence form) and runs until its NashConv is below
``--target`` or ``--budget-s`` seconds have passed.

NashConv is OpenSpiel's ``exploitability.nash_conv`` of the ``PolicyAggregator``
mixture for psro_v2 and popmarl's own per-iteration figure (equal to OpenSpiel's to
1e-9, see tests/plugins/openspiel) for popmarl. Wall times: popmarl's include its
start-up, computing its NashConv and writing its checkpoint every iteration, and its final
export; psro_v2's exclude the NashConv measurement (not part of its loop). Both run in this one process, one after the other.

Printed per game: the wall-clock time (and iteration) at which each side first reaches
each NashConv threshold, the best NashConv each reached within the fixed budget, and
how much sooner popmarl reaches psro_v2's best NashConv over its iterations::

    python benchmarks/psro_vs_openspiel.py                 # kuhn + leduc, ~10 minutes
    python benchmarks/psro_vs_openspiel.py --games kuhn_poker --openspiel-iterations 10
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np
import pyspiel
from open_spiel.python import policy as spiel_policy
from open_spiel.python.algorithms import exploitability, policy_aggregator
from open_spiel.python.algorithms.psro_v2 import best_response_oracle, psro_v2, strategy_selectors

import popmarl

THRESHOLDS = {"kuhn_poker": (0.05, 0.02, 0.001), "leduc_poker": (1.0, 0.75, 0.3, 0.1)}


@attrs.frozen(kw_only=True)
class Curve:
    """NashConv and cumulative wall time after each iteration (index 0: the start)."""

    nash_conv: Sequence[float]
    wall_s: Sequence[float]

    def first_below(self, threshold: float) -> int | None:
        """The first iteration with NashConv <= ``threshold``, or None."""
        return next((i for i, value in enumerate(self.nash_conv) if value <= threshold), None)

    def best_within(self, budget_s: float) -> tuple[float, int]:
        """The lowest NashConv of the iterations finished within ``budget_s``, and where."""
        done = [i for i, t in enumerate(self.wall_s) if t <= budget_s] or [0]
        best = min(done, key=lambda i: self.nash_conv[i])
        return self.nash_conv[best], best


def run_popmarl(game: str, budget_s: float, target: float, seed: int, out: Path) -> Curve:
    """popmarl's exact-oracle PSRO with ``nash`` until ``target`` or ``budget_s``."""
    config_path = out / f"{game}.yaml"
    config_path.write_text(json.dumps({
        "scenario": "psro", "seed": seed,
        "env": {"name": "openspiel", "params": {"game": game}},
        "agents": {"mapping": "per_player"},
        "algorithm": {"name": "exact_br"}, "solver": {"name": "nash"},
        "stopping": {"max_iterations": 100_000, "target_nash_conv": target, "max_wall_time_s": budget_s},
        "evaluation": {"exact": "auto"}, "trackers": ["jsonl"],
    }))
    run_dir = out / f"popmarl-{game}"
    start = time.perf_counter()
    popmarl.run(popmarl.load_config(str(config_path)), out=str(run_dir))
    total = time.perf_counter() - start
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # Charge start-up (loading the game and plugins) and the final export to every iteration.
    overhead = total - lines[-1]["wall_time_s"]
    return Curve(nash_conv=[_uniform_nash_conv(game)] + [m["nash_conv"] for m in lines],
                 wall_s=[0.0] + [m["wall_time_s"] + overhead for m in lines])


def _uniform_nash_conv(game_name: str) -> float:
    """NashConv of the uniform policy, where both sides start (iteration 0)."""
    game = pyspiel.load_game(game_name)
    return float(exploitability.nash_conv(game, spiel_policy.UniformRandomPolicy(game)))


def run_psro_v2(game_name: str, iterations: int, sims: int, meta: str, seed: int) -> Curve:
    """OpenSpiel's psro_v2 with its exact BestResponseOracle, as in its example."""
    np.random.seed(seed)
    game = pyspiel.load_game_as_turn_based(game_name, {"players": 2})
    start = time.perf_counter()
    uniform = spiel_policy.TabularPolicy(game)
    oracle = best_response_oracle.BestResponseOracle(game=game, policy=uniform)
    solver = psro_v2.PSROSolver(
        game, oracle, initial_policies=[uniform.__copy__() for _ in range(2)],
        training_strategy_selector=strategy_selectors.probabilistic, rectifier="",
        sims_per_entry=sims, number_policies_selected=1, meta_strategy_method=meta,
        prd_iterations=50000, prd_gamma=1e-10, sample_from_marginals=True, symmetric_game=False)
    elapsed = time.perf_counter() - start

    def nash_conv() -> float:
        aggregated = policy_aggregator.PolicyAggregator(game).aggregate(
            range(2), solver.get_policies(), solver.get_meta_strategies())
        return float(exploitability.nash_conv(game, aggregated))

    nash, times = [nash_conv()], [elapsed]
    for i in range(iterations):
        t0 = time.perf_counter()
        solver.iteration()
        elapsed += time.perf_counter() - t0
        nash.append(nash_conv())
        times.append(elapsed)
        print(f"  psro_v2 {game_name} iteration {i + 1}: NashConv {nash[-1]:.4f}, {elapsed:.1f} s", flush=True)
    return Curve(nash_conv=nash, wall_s=times)


def _reached(curve: Curve, threshold: float) -> tuple[str, float]:
    i = curve.first_below(threshold)
    return ("not reached", math.inf) if i is None else (f"{curve.wall_s[i]:8.2f} s (it {i:>3})", curve.wall_s[i])


def _speedup(ours_s: float, theirs_s: float) -> str:
    if math.isinf(theirs_s):
        return "only popmarl" if math.isfinite(ours_s) else "-"
    if math.isinf(ours_s):
        return "only psro_v2"
    return f"{theirs_s / max(ours_s, 1e-9):.1f}x"


def report(game: str, ours: Curve, theirs: Curve, budget_s: float) -> str:
    """Threshold times, best NashConv within the budget, and the time to psro_v2's best."""
    rows = [f"\n{game}: wall-clock time to reach NashConv <= threshold (iteration)",
            f"  {'threshold':>9}  {'popmarl':>19}  {'psro_v2':>19}  {'popmarl sooner by':>17}"]
    for threshold in THRESHOLDS.get(game, ()):
        (ours_text, ours_s), (theirs_text, theirs_s) = _reached(ours, threshold), _reached(theirs, threshold)
        rows.append(f"  {threshold:>9g}  {ours_text:>19}  {theirs_text:>19}  {_speedup(ours_s, theirs_s):>17}")
    (ours_best, ours_it), (theirs_best, theirs_it) = ours.best_within(budget_s), theirs.best_within(budget_s)
    rows.append(f"  best NashConv within {budget_s:g} s: popmarl {ours_best:.6g} (it {ours_it}), "
                f"psro_v2 {theirs_best:.6g} (it {theirs_it})")
    best = min(theirs.nash_conv)
    best_it = theirs.nash_conv.index(best)
    ours_text, ours_s = _reached(ours, best)
    rows.append(f"  psro_v2's best NashConv in {len(theirs.nash_conv) - 1} iterations: {best:.6f} at "
                f"{theirs.wall_s[best_it]:.2f} s (it {best_it}); popmarl reaches it at {ours_text.strip()}: "
                f"{_speedup(ours_s, theirs.wall_s[best_it])} sooner")
    rows.append(f"  totals: popmarl {len(ours.nash_conv) - 1} iterations in {ours.wall_s[-1]:.2f} s, "
                f"final NashConv {ours.nash_conv[-1]:.6g}; psro_v2 {len(theirs.nash_conv) - 1} iterations "
                f"in {theirs.wall_s[-1]:.2f} s, final NashConv {theirs.nash_conv[-1]:.6g}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["kuhn_poker", "leduc_poker"])
    parser.add_argument("--openspiel-iterations", type=int, default=30)
    parser.add_argument("--budget-s", type=float, default=60.0,
                        help="popmarl's wall-clock budget per game, and the budget of the best-NashConv row")
    parser.add_argument("--target", type=float, default=1e-6, help="popmarl stops at this NashConv")
    parser.add_argument("--sims-per-entry", type=int, default=1000)
    parser.add_argument("--openspiel-solver", default="nash", choices=["nash", "prd", "uniform"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        for game in args.games:
            ours = run_popmarl(game, args.budget_s, args.target, args.seed, Path(tmp))
            theirs = run_psro_v2(game, args.openspiel_iterations, args.sims_per_entry,
                                 args.openspiel_solver, args.seed)
            reports.append(report(game, ours, theirs, args.budget_s))
            print(reports[-1], flush=True)
    print("\n" + "=" * 30 + " summary " + "=" * 30 + "".join(reports))


if __name__ == "__main__":
    main()
