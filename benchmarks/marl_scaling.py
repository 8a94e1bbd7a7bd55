"""``marl`` learning throughput on Ray against ``local``: env steps learned from per second
with 1, 2, 4, ... rollout workers.

Each setting runs ``marl`` (``ppo`` defaults on the CPU, one torch thread per process;
``agents.mapping`` as given) on a PettingZoo env for ``--iterations`` iterations of
``--env-steps`` env steps (agent decisions, popmarl's count) and reads its metrics: per
iteration the env steps played, the games dropped as stale (an on-policy learner on Ray
learns in lock step: none should be), the updates, and the train time. ``learned/s`` is
the env steps of the games learned from (played less dropped) per second of train time,
the median over the iterations after the first (the first includes starting); the ratio
is against ``local`` measured in the same run. Each setting runs in a process of its own
(a Ray of its own, nothing left over from the one before).

    python benchmarks/marl_scaling.py [--workers 1,2,4,8] [--env-steps 60000] [--iterations 3]
        [--module mpe2.simple_spread_v3] [--mapping shared] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import popmarl


def measure(module: str, mapping: str, env_steps: int, iterations: int, workers: int | None) -> dict[str, float]:
    """One setting (``workers`` None: local): its per-iteration figures, medians after the first."""
    backend: dict[str, Any] = ({"name": "local"} if workers is None else
                               {"name": "ray", "params": {"num_rollout_workers": workers}})
    config = popmarl.validate({
        "scenario": "marl", "seed": 0, "agents": {"mapping": mapping},
        "env": {"name": "pettingzoo", "params": {"module": module}},
        "algorithm": {"name": "ppo", "params": {"device": "cpu"}},
        "training": {"max_env_steps": env_steps}, "stopping": {"max_iterations": iterations},
        "evaluation": {"episodes_per_entry": 10}, "backend": backend, "trackers": ["jsonl"]})
    with tempfile.TemporaryDirectory() as out:
        popmarl.run(config, out=str(Path(out) / "run"))
        lines = [json.loads(line) for line in (Path(out) / "run" / "metrics.jsonl").read_text().splitlines()]
    rows = []
    for before, line in zip([{"episodes": 0}, *lines], lines):
        played = float(line["iteration_env_steps"])
        games = max(float(line["episodes"]) - float(before["episodes"]), 1.0)  # the iteration's (cumulative count)
        dropped = float(line.get("train/dropped_episodes", 0.0))
        updates = [v for k, v in line.items() if k.startswith("train/") and k.endswith("/updates")]
        learned = played * max(0.0, 1.0 - dropped / games)
        rows.append({"played_per_s": played / line["train_time_s"], "learned_per_s": learned / line["train_time_s"],
                     "dropped_games": dropped, "updates": float(min(updates)) if updates else 0.0, "played": played})
    rows = rows[1:] or rows
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--env-steps", type=int, default=60_000)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--module", default="mpe2.simple_spread_v3")
    parser.add_argument("--mapping", default="shared")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: one setting (0: local)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # the local learner's process, as a Ray actor's (one reserved CPU or none)
    if args.one is not None:  # one setting, in this process: its figures as JSON
        print(json.dumps(measure(args.module, args.mapping, args.env_steps, args.iterations, args.one or None)))
        return
    settings: list[int | None] = [None, *(int(w) for w in args.workers.split(","))]
    results = {}
    for w in settings:
        own = [sys.executable, __file__, "--one", str(w or 0), "--module", args.module, "--mapping", args.mapping,
               "--env-steps", str(args.env_steps), "--iterations", str(args.iterations)]
        done = subprocess.run(own, capture_output=True, text=True, check=True)
        results["local" if w is None else f"ray x{w}"] = json.loads(done.stdout.strip().splitlines()[-1])
    base = results["local"]["learned_per_s"]
    print(f"marl ppo, {args.module}, mapping {args.mapping}, {args.env_steps:,} env steps per iteration, "
          f"median of iterations 2..{args.iterations}")
    print(f"{'backend':<10}{'learned/s':>12}{'vs local':>10}{'played/s':>12}{'dropped':>9}{'updates':>9}{'played':>10}")
    for name, r in results.items():
        print(f"{name:<10}{r['learned_per_s']:>12,.0f}{r['learned_per_s'] / base:>10.2f}{r['played_per_s']:>12,.0f}"
              f"{r['dropped_games']:>9.0f}{r['updates']:>9.0f}{r['played']:>10,.0f}")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
