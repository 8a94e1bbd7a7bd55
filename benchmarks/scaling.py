"""How payoff-table evaluation and RL-PSRO scale with Ray rollout workers (and pipelines).

Fills a ``P x P`` payoff table of a two-player game by sampling (``--episodes`` per
entry; default: 20 x 20 Leduc poker, 1000 episodes each) with the ``local`` backend and
with the ``ray`` backend for each worker count of ``--workers``; prints the time to fill
the table, env steps per second, and the speed-ups against one Ray worker and against
``local`` (same process, same policies, so machine noise partly cancels out).

The policies are freshly initialised policies of ``--algorithm`` (``dqn``: random MLPs,
greedy; falls back to ``random``, uniform, when popmarl-tianshou is missing). The game
is OpenSpiel's when popmarl-openspiel is installed, else a random matrix game (said in
the output).

    python benchmarks/scaling.py                       # 1 and 2 workers, on this machine
    python benchmarks/scaling.py --workers 1,2,4,8,16  # a bigger machine
    python benchmarks/scaling.py --address auto        # a running cluster

With ``--rl``: RL-PSRO instead (``dqn`` defaults, ``per_player``, ``nash``, on ``--game``
evaluated exactly) for each ``--pipelines`` value (``training.pipeline``) and each worker
count (and ``local``, unless ``--no-local``), each for ``--seconds`` of wall time: the env
steps learned from per second (training games only) and the NashConv reached after each
minute and at the end, the seed the same everywhere. ``--target X``: each run also stops
once its NashConv is at most X, and a column gives the wall seconds it took (``-``: not
within ``--seconds``).

    python benchmarks/scaling.py --rl --pipelines 1,2,4 --workers 1,2,4,8 --seconds 300
    python benchmarks/scaling.py --rl --pipelines 4,1 --workers 8 --no-local --target 0.5
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

import popmarl
from popmarl.plugins import registry as registries
from popmarl.interfaces.backend import Backend, Components, RunSetup
from popmarl.builtin.local_backend import LocalBackend
from popmarl.data.population import AgentMapping, policy_id
from popmarl.data.tasks import EvalTask
from popmarl.runs.runner import policy_spaces


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated Ray worker counts (default 1,2)")
    parser.add_argument("--game", default="leduc_poker", help="OpenSpiel game (default leduc_poker)")
    parser.add_argument("--policies", type=int, default=20, help="policies per player (default 20)")
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per entry (default 1000)")
    parser.add_argument("--algorithm", default="dqn", help="policies of this algorithm (default dqn)")
    parser.add_argument("--hidden", default="128,128", help="MLP layers of dqn policies (default 128,128)")
    parser.add_argument("--num-envs", type=int, default=64, help="games per worker vector (default 64)")
    parser.add_argument("--chunks-per-worker", type=int, default=4, help="batches per worker (default 4)")
    parser.add_argument("--address", default=None, help="Ray address (default: a local Ray)")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over all configs; each keeps its best time")
    parser.add_argument("--no-local", action="store_true", help="skip the local backend")
    parser.add_argument("--rl", action="store_true", help="RL-PSRO rows instead of the payoff table")
    parser.add_argument("--pipelines", default="1,2,4", help="--rl: training.pipeline values (default 1,2,4)")
    parser.add_argument("--seconds", type=float, default=300, help="--rl: wall time of each run (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="--rl: the runs' seed (default 0)")
    parser.add_argument("--target", type=float, default=None,
                        help="--rl: also stop at this NashConv and print the seconds it took")
    return parser.parse_args(argv)


def rl_config(args: argparse.Namespace, pipeline: int, workers: int) -> dict[str, Any]:
    """RL-PSRO with ``pipeline`` best responses per population, on ``workers`` Ray rollout
    workers (0: the local backend), for ``--seconds``."""
    backend: dict[str, Any] = {"name": "local"}
    if workers:
        backend = {"name": "ray", "params": {"num_rollout_workers": workers, "num_learners": 2 * pipeline,
                                             "address": args.address}}
    return {"scenario": "psro", "seed": args.seed, "env": {"name": "openspiel", "params": {"game": args.game}},
            "agents": {"mapping": "per_player"}, "algorithm": {"name": "dqn"}, "solver": {"name": "nash"},
            "training": {"pipeline": pipeline}, "backend": backend, "trackers": [],
            "stopping": {"max_iterations": 100_000, "max_wall_time_s": args.seconds,
                         "target_nash_conv": args.target}}


def rl_main(args: argparse.Namespace) -> int:
    """One RL-PSRO run per pipeline and backend; a row each."""
    import json
    import tempfile
    from pathlib import Path

    from popmarl.config.schema import validate

    counts = ([0] if not args.no_local else []) + [int(w) for w in args.workers.split(",")]
    pipelines = [int(p) for p in args.pipelines.split(",")]
    minutes = max(1, int(args.seconds // 60))
    print(f"# RL-PSRO (dqn defaults, per_player, nash) on {args.game}, {args.seconds:.0f} s per run, seed {args.seed}; "
          f"{os.cpu_count()} CPUs here, load average {os.getloadavg()[0]:.1f}")
    header = " ".join(f"{f'NashConv {m} min':>14}" for m in range(1, minutes + 1))
    if args.target is not None:
        header += f" {f's to {args.target:g}':>10}"
    print(f"{'pipeline':>8} {'backend':<8} {'iterations':>10} {'learned steps/s':>16} {header} {'NashConv end':>13}")
    with tempfile.TemporaryDirectory() as scratch:
        for pipeline in pipelines:
            for workers in counts:
                out = Path(scratch) / f"p{pipeline}-w{workers}"
                summary = popmarl.run(validate(rl_config(args, pipeline, workers)), out=str(out))
                lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
                learned = sum(line["train_env_steps"] for line in lines)
                at = [next((line["nash_conv"] for line in lines if line["wall_time_s"] >= 60 * m), None)
                      for m in range(1, minutes + 1)]
                shown = " ".join(f"{v:>14.3f}" if v is not None else f"{'-':>14}" for v in at)
                if args.target is not None:
                    reached = next((line["wall_time_s"] for line in lines if line["nash_conv"] <= args.target), None)
                    shown += f" {reached:>10.1f}" if reached is not None else f" {'-':>10}"
                name = f"ray x{workers}" if workers else "local"
                print(f"{pipeline:>8} {name:<8} {len(lines):>10} {learned / summary['wall_time_s']:>16,.0f} {shown} "
                      f"{summary['nash_conv']:>13.3f}", flush=True)
    return 0


def components(args: argparse.Namespace) -> tuple[RunSetup, Components, list[str]]:
    notes = []
    if args.algorithm not in popmarl.algorithms:
        notes.append(f"algorithm {args.algorithm!r} is not installed: using 'random' (uniform) policies")
        args.algorithm = "random"
    algorithm_params: dict[str, Any] = {}
    if args.algorithm == "dqn":
        algorithm_params = {"hidden": [int(h) for h in args.hidden.split(",")]}
    if "openspiel" in popmarl.envs:
        env_name, env_params = "openspiel", {"game": args.game}
    else:
        notes.append("popmarl-openspiel is not installed: a random 3x3 matrix game stands in for the game")
        env_name, env_params = "matrix", {"game": "random_zero_sum", "size": 3}
    env = registries.component("envs", env_name, env_params)
    algorithm = registries.component("algorithms", args.algorithm, algorithm_params)
    mapping = AgentMapping.resolve("per_player", env.agents)  # type: ignore[attr-defined]
    spaces = policy_spaces(env, mapping)  # type: ignore[arg-type]
    setup = RunSetup(env_name=env_name, env_params=env_params,
                     algorithms={p: (args.algorithm, algorithm_params) for p in mapping.populations},
                     mapping=mapping, spaces=spaces, seed=0,
                     num_envs=args.num_envs, train_num_envs=args.num_envs, exact_evaluation="never")
    algorithms = {p: algorithm for p in mapping.populations}
    return setup, Components(env=env, algorithms=algorithms), notes  # type: ignore[arg-type]


def policies(setup: RunSetup, comps: Components, count: int) -> dict[str, Any]:
    weights = {}
    for k, population in enumerate(setup.mapping.populations):
        for i in range(count):
            policy = comps.algorithms[population].make_policy(space=setup.spaces[population], seed=1000 * k + i + 1)
            weights[policy_id(population, i)] = policy.get_weights()
    return weights


def table_tasks(setup: RunSetup, count: int, episodes: int) -> list[EvalTask]:
    agents = list(setup.mapping.population_of)
    return [
        EvalTask(index=(i, j), profile={agents[0]: policy_id(agents[0], i), agents[1]: policy_id(agents[1], j)},
                 episodes=episodes, seed=12345)
        for i in range(count) for j in range(count)
    ]


def measure(backend: Backend, setup: RunSetup, comps: Components, weights: dict[str, Any],
            tasks: list[EvalTask], warmup: list[EvalTask]) -> tuple[float, int]:
    """Seconds to fill the table and the env steps played (after a warm-up call)."""
    backend.start(setup, comps)
    try:
        for pid, w in weights.items():
            backend.add_policy(pid, w)
        backend.evaluate(warmup)
        start = time.perf_counter()
        results = backend.evaluate(tasks)
        seconds = time.perf_counter() - start
    finally:
        backend.close()
    assert len(results) == len(tasks) and all(r.episodes == tasks[0].episodes for r in results)
    return seconds, sum(r.env_steps for r in results)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.rl:
        return rl_main(args)
    counts = [int(w) for w in args.workers.split(",")]
    setup, comps, notes = components(args)
    weights = policies(setup, comps, args.policies)
    tasks = table_tasks(setup, args.policies, args.episodes)
    import ray

    from popmarl_ray import RayBackend

    if not ray.is_initialized():
        if args.address is None:
            ray.init(num_cpus=max(max(counts), os.cpu_count() or 1), include_dashboard=False, logging_level="warning")
        else:
            ray.init(address=args.address, logging_level="warning")
    print(f"# {args.policies}x{args.policies} payoff table of {setup.env_params.get('game')} ({setup.env_name}), "
          f"{args.episodes} episodes per entry, {args.algorithm} policies, {args.num_envs} games per vector; "
          f"{os.cpu_count()} CPUs here, load average {os.getloadavg()[0]:.1f}")
    for note in notes:
        print(f"# note: {note}")
    configs: list[tuple[str, Callable[[], Backend], list[EvalTask]]] = []
    if not args.no_local:
        configs.append(("local", LocalBackend, tasks[:2]))
    for count in counts:
        make = functools.partial(RayBackend, num_rollout_workers=count, num_cpus_per_worker=1,
                                 chunks_per_worker=args.chunks_per_worker, address=args.address)
        # A warm-up call in which every worker plays (first calls are slower).
        configs.append((f"ray x{count}", make, [attrs.evolve(t, episodes=8) for t in tasks[: 2 * count]]))
    best: dict[str, tuple[float, int]] = {}
    for repeat in range(args.repeats):  # round-robin, so a change of load hits every config alike
        for name, make_backend, warmup in configs:
            seconds, steps = measure(make_backend(), setup, comps, weights, tasks, warmup)
            print(f"  {name}, round {repeat + 1}: {seconds:.1f} s", file=sys.stderr, flush=True)
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, steps)
    rows = [(name, *best[name]) for name, _, _ in configs]
    one = next((s for name, s, _ in rows if name == "ray x1"), None)
    local = next((s for name, s, _ in rows if name == "local"), None)
    print(f"# load average after: {os.getloadavg()[0]:.1f}")
    print(f"{'backend':<10} {'table (s)':>10} {'env steps/s':>12} {'vs 1 worker':>12} {'vs local':>9}")
    for name, seconds, steps in rows:
        vs_one = f"{one / seconds:.2f}x" if one else "-"
        vs_local = f"{local / seconds:.2f}x" if local else "-"
        print(f"{name:<10} {seconds:>10.1f} {steps / seconds:>12,.0f} {vs_one:>12} {vs_local:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
