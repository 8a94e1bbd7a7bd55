"""Learning on PettingZoo envs with deep RL oracles (popmarl-tianshou, popmarl-pettingzoo).

Three runs, each from an example config:

- ``tictactoe``: PSRO with a ``dqn`` oracle and a Nash meta-solver on
  ``pettingzoo.classic.tictactoe_v3`` (examples/psro_tictactoe_dqn.yaml). The final
  meta-strategy of each seat then plays 1000 episodes against a uniformly random
  opponent (``popmarl eval RUN --opponent random --episodes 1000``); the target is a loss
  rate of at most 2% in each seat. Random against random, for reference: the first
  player wins ~58.5%, draws ~12.7%, loses ~28.8%; the second wins ~28.8%.
- ``connect_four``: the same with ``pettingzoo.classic.connect_four_v3``
  (examples/psro_connect_four_dqn.yaml: 3-step returns, gamma 0.95, lr 3e-4, 200,000 env
  steps per best response, 16 iterations; ~15 minutes). Random against random: the first
  seat loses ~44%, the second ~57%.
- ``spread``: scenario ``marl``, ``ppo`` with parameter sharing on MPE
  ``simple_spread_v3`` (N=2, 25 cycles, discrete actions;
  examples/marl_simple_spread_ppo.yaml): the mean episode return per agent of the trained
  shared policy against that of the initial (untrained) one.

Wall and CPU time cover the run (training and payoff evaluation), not the final
evaluation against random. Needs popmarl-tianshou, popmarl-pettingzoo[mpe] and
popmarl-solvers::

    python benchmarks/pettingzoo_learning.py
    python benchmarks/pettingzoo_learning.py --runs tictactoe --seeds 0 1 2
    python benchmarks/pettingzoo_learning.py --runs connect_four
    python benchmarks/pettingzoo_learning.py --runs spread --set stopping.max_iterations=8
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

import popmarl
from popmarl.config.schema import RunConfig
from popmarl.tools.evaluate import evaluate_run, load_run, opponent_pools

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUNS = {
    "tictactoe": EXAMPLES / "psro_tictactoe_dqn.yaml",
    "connect_four": EXAMPLES / "psro_connect_four_dqn.yaml",
    "spread": EXAMPLES / "marl_simple_spread_ppo.yaml",
}
#: The runs judged against a uniformly random opponent.
BOARD_GAMES = ("tictactoe", "connect_four")
#: Their target: the final meta-strategy's loss rate against random, per seat.
MAX_LOSS = 0.02
EVAL_EPISODES = 1000


def _algorithm(config: RunConfig) -> str:
    """The run's algorithm name (``a/b`` for per-population algorithms)."""
    spec = config.algorithm
    return "/".join(sorted({c.name for c in spec.values()})) if isinstance(spec, dict) else spec.name


def run(name: str, seed: int, overrides: list[str], out: Path) -> dict[str, Any]:
    config = popmarl.load_config(str(RUNS[name]), [*overrides, f"seed={seed}", "trackers=[]"])
    directory = out / f"{name}-{seed}"
    wall, cpu = time.perf_counter(), time.process_time()
    summary = popmarl.run(config, out=str(directory))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    result: dict[str, Any] = {"run": name, "seed": seed, "algorithm": _algorithm(config),
                              "iterations": summary["iterations"], "env_steps": summary["env_steps"],
                              "wall_s": wall, "cpu_s": cpu}
    if name in BOARD_GAMES:
        loaded = load_run(directory)
        report = evaluate_run(loaded, opponent_pools(loaded, "random"), episodes=EVAL_EPISODES, seed=seed + 1)
        result["vs_random"] = report
        result["meta_strategy"] = {p: info["meta_strategy"] for p, info in summary["populations"].items()}
        result["passed"] = all(r["loss"] <= MAX_LOSS for r in report.values())
    else:
        result["initial"] = summary["initial_returns"]
        result["final"] = summary["mean_returns"]
        rows = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
        result["curve"] = {p: [r[f"mean_return/{p}"] for r in rows] for p in summary["mean_returns"]}
    return result


def describe(r: dict[str, Any]) -> list[str]:
    head = (f"{r['run']} seed {r['seed']} ({r['algorithm']}): {r['iterations']} iterations, "
            f"{r['env_steps']} env steps, {r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU")
    lines = [head]
    if r["run"] in BOARD_GAMES:
        for population, v in r["vs_random"].items():
            lines.append(f"  {population} vs random ({v['episodes']} episodes): win {v['win']:.3f} "
                         f"draw {v['draw']:.3f} loss {v['loss']:.3f} mean return {v['mean_return']:+.3f}")
        lines.append(f"  meta-strategies: {r['meta_strategy']}")
        lines.append(f"  loss <= {MAX_LOSS:.0%} in every seat: {'yes' if r['passed'] else 'NO'}")
    else:
        for population in r["final"]:
            curve = " ".join(f"{v:.2f}" for v in r["curve"][population])
            lines.append(f"  {population}: initial {r['initial'][population]:.3f} -> final "
                         f"{r['final'][population]:.3f} (by iteration: {curve})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every run, e.g. training.max_env_steps=30000")
    parser.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="The old environment creation API")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        results = []
        for name in args.runs:
            for seed in args.seeds:
                results.append(run(name, seed, args.overrides, out))
                print("\n".join(describe(results[-1])), flush=True)
        print()
        print(json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    main()
