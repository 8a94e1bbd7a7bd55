"""PSRO with deep RL oracles (popmarl-tianshou) on Kuhn and Leduc poker.

Runs the example configs and prints, per run, NashConv after each iteration and when it
first reached its target (Kuhn: 0.1 within 12 iterations and 15 minutes; Leduc: 1.0;
``leduc_half``: 0.5, nash, 40,000 steps per best response, 12-20 CPU-minutes;
the uniform policy's NashConv is 0.9167 on Kuhn and 4.747 on Leduc). NashConv is the
run summary's: OpenSpiel's NashConv of the aggregated meta-strategy, computed exactly.
Wall and CPU time include training, exact evaluation and the NashConv computations.
Needs popmarl-tianshou, popmarl-openspiel and popmarl-solvers::

    python benchmarks/psro_rl.py                       # every example (~2 + ~18 + ~16 CPU-minutes)
    python benchmarks/psro_rl.py --runs kuhn --seeds 0 1 2
    python benchmarks/psro_rl.py --runs leduc_half
    python benchmarks/psro_rl.py --runs leduc --set stopping.max_iterations=20
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

import popmarl
import popmarl.config.schema

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUNS = {
    "kuhn": (EXAMPLES / "psro_kuhn_dqn.yaml", 0.1),
    "leduc": (EXAMPLES / "psro_leduc_dqn.yaml", 1.0),
    "leduc_half": (EXAMPLES / "psro_leduc_dqn_half.yaml", 0.5),
}


def run(name: str, seed: int, overrides: list[str], out: Path) -> dict[str, object]:
    path, target = RUNS[name]
    config = popmarl.load_config(str(path), [*overrides, f"seed={seed}", "trackers=[]"])
    wall, cpu = time.perf_counter(), time.process_time()
    summary = popmarl.run(config, out=str(out / f"{name}-{seed}"))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = [json.loads(line) for line in (out / f"{name}-{seed}" / "metrics.jsonl").read_text().splitlines()]
    reached = next((r for r in rows if r["nash_conv"] is not None and r["nash_conv"] <= target), None)
    return {
        "run": name, "seed": seed, "algorithm": _algorithm_name(config), "target": target,
        "curve": [r["nash_conv"] for r in rows], "final": summary["nash_conv"],
        "reached_at": None if reached is None else reached["iteration"],
        "reached_s": None if reached is None else reached["wall_time_s"],
        "iterations": summary["iterations"], "env_steps": summary["env_steps"], "wall_s": wall, "cpu_s": cpu,
    }


def _algorithm_name(config: popmarl.config.schema.RunConfig) -> str:
    spec = config.algorithm
    return spec.name if isinstance(spec, popmarl.config.schema.ComponentConfig) else "/".join(c.name for c in spec.values())


def table(results: list[dict[str, object]]) -> str:
    head = (f"{'run':<6} {'algo':<4} {'seed':>4} {'iters':>5} {'final NashConv':>14} {'target':>6} "
            f"{'reached at':>12} {'wall s':>7} {'cpu s':>7} {'env steps':>10}")
    lines = [head, "-" * len(head)]
    for r in results:
        reached = "-" if r["reached_at"] is None else f"it {r['reached_at']} {r['reached_s']:.0f}s"
        lines.append(f"{r['run']:<6} {r['algorithm']:<4} {r['seed']:>4} {r['iterations']:>5} {r['final']:>14.4f} "
                     f"{r['target']:>6} {reached:>12} {r['wall_s']:>7.0f} {r['cpu_s']:>7.0f} {r['env_steps']:>10}")
    lines.append("")
    for r in results:
        curve = " ".join(f"{v:.3f}" for v in r["curve"])
        lines.append(f"{r['run']} seed {r['seed']} NashConv by iteration: {curve}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every run, e.g. training.max_env_steps=30000")
    parser.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        results = []
        for name in args.runs:
            for seed in args.seeds:
                results.append(run(name, seed, args.overrides, out))
                print(table(results[-1:]).splitlines()[2], flush=True)
        print()
        print(table(results))


if __name__ == "__main__":
    main()
