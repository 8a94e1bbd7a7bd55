"""popmarl exact-oracle PSRO vs OpenSpiel's own psro_v2, same games, same iterations.

Both sides use OpenSpiel's exact best response (C++ ``TabularBestResponse``) as the
oracle and a Nash meta-solver (popmarl: ``nash`` from popmarl-solvers; OpenSpiel:
``meta_strategy_method="nash"``, its cvxpy LP; ``--openspiel-solver prd`` if that is
unavailable). The difference is the meta-game: popmarl evaluates payoff entries exactly
(sequence form), psro_v2 samples ``sims_per_entry`` episodes per entry (1000, its
example's default), so its meta-game is noisy and its NashConv stalls.

NashConv is OpenSpiel's (``exploitability.nash_conv`` of the ``PolicyAggregator``
mixture) for psro_v2 and popmarl's own per-iteration figure for popmarl. Wall times:
popmarl's includes computing its NashConv every iteration; psro_v2's excludes the
NashConv measurement (it is not part of its loop). Run in one process, so machine load
affects both sides alike::

    python benchmarks/psro_openspiel.py                    # kuhn 15, leduc 20 iterations
                                                           # (~2.5 CPU-minutes, nearly all psro_v2's)
    python benchmarks/psro_openspiel.py --games kuhn_poker --iterations 10
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pyspiel
from open_spiel.python import policy as spiel_policy
from open_spiel.python.algorithms import exploitability, policy_aggregator
from open_spiel.python.algorithms.psro_v2 import best_response_oracle, psro_v2, strategy_selectors

import popmarl


def run_popmarl(game: str, iterations: int, out: Path) -> tuple[list[float], list[float]]:
    """NashConv and cumulative wall time after each iteration (index 0: the start)."""
    config_path = out / f"{game}.yaml"
    config_path.write_text(json.dumps({
        "scenario": "psro", "seed": 0,
        "env": {"name": "openspiel", "params": {"game": game}},
        "agents": {"mapping": "per_player"},
        "algorithm": {"name": "exact_br"}, "solver": {"name": "nash"},
        "stopping": {"max_iterations": iterations},
        "evaluation": {"exact": "auto"}, "trackers": ["jsonl"],
    }))
    start = time.perf_counter()
    popmarl.run(popmarl.load_config(str(config_path)), out=str(out / f"popmarl-{game}"))
    total = time.perf_counter() - start
    lines = [json.loads(line) for line in (out / f"popmarl-{game}" / "metrics.jsonl").read_text().splitlines()]
    env = popmarl.envs.load("openspiel")(game=game)
    uniform = env.nash_conv({a: [(popmarl.algorithms.load("exact_br")().make_policy(
        space=_space(env, a), seed=0), 1.0)] for a in env.agents})
    nash = [uniform] + [m["nash_conv"] for m in lines]
    times = [0.0] + [m["wall_time_s"] for m in lines]
    times[-1] = max(times[-1], total)  # include start-up and the final summary
    return nash, times


def _space(env: popmarl.Env, agent: str) -> popmarl.PolicySpace:
    return popmarl.PolicySpace(population=agent, agents=(agent,), observation_space=env.observation_space(agent),
                               action_space=env.action_space(agent))


def run_psro_v2(game_name: str, iterations: int, sims: int, meta: str) -> tuple[list[float], list[float]]:
    """OpenSpiel's psro_v2 with its exact BestResponseOracle, as in its example."""
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
    for _ in range(iterations):
        t0 = time.perf_counter()
        solver.iteration()
        elapsed += time.perf_counter() - t0
        nash.append(nash_conv())
        times.append(elapsed)
    return nash, times


def table(game: str, ours: tuple[list[float], list[float]], theirs: tuple[list[float], list[float]]) -> str:
    rows = [f"\n{game}: NashConv per iteration (cumulative wall time, s)",
            f"{'iter':>4}  {'popmarl':>10} {'time':>7}  {'psro_v2':>10} {'time':>7}"]
    for i, (a, ta, b, tb) in enumerate(zip(ours[0], ours[1], theirs[0], theirs[1])):
        rows.append(f"{i:>4}  {a:>10.6f} {ta:>7.2f}  {b:>10.6f} {tb:>7.2f}")
    ta, tb = ours[1][-1], theirs[1][-1]
    rows.append(f"final NashConv: popmarl {ours[0][-1]:.6f}, psro_v2 {theirs[0][-1]:.6f}; "
                f"wall time: popmarl {ta:.2f}s, psro_v2 {tb:.2f}s, ratio psro_v2/popmarl {tb / ta:.1f}x")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["kuhn_poker", "leduc_poker"])
    parser.add_argument("--iterations", type=int, nargs="+", default=[15, 20],
                        help="iterations per game (one value for all, or one per game)")
    parser.add_argument("--sims-per-entry", type=int, default=1000)
    parser.add_argument("--openspiel-solver", default="nash", choices=["nash", "prd", "uniform"])
    args = parser.parse_args()
    counts = args.iterations * len(args.games) if len(args.iterations) == 1 else args.iterations
    np.random.seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for game, iterations in zip(args.games, counts):
            ours = run_popmarl(game, iterations, Path(tmp))
            theirs = run_psro_v2(game, iterations, args.sims_per_entry, args.openspiel_solver)
            print(table(game, ours, theirs), flush=True)


if __name__ == "__main__":
    main()
