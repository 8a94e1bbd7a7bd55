"""Grouped acting of frozen opponents: rollout throughput of PSRO's best-response step,
one exploring learner against opponents drawn once per episode from a uniform mixture
of many frozen policies (Leduc poker, OpenSpiel, ``dqn`` or ``ppo`` policies with a
random 128×128 MLP each, 64 games, one torch thread, one core).

With many opponents, each vector step meets dozens of distinct opponents on a row or
two each. Rows of the table:

* ``per-policy``: each opponent wrapped so it declares no group key, so the rollout
  engine calls ``act`` once per distinct opponent per decision (the engine without
  grouping; the wrapper's call is all it adds);
* ``grouped``: the opponents as they are: those of one network layout act in one
  ``act_grouped`` call (their weights stacked, one batched product per layer).

The headline is env steps per CPU second of this process (``time.process_time``), the
median over ``--repeats`` rounds that run the two rows in turn, with the ratio against
``per-policy`` measured in the same run; wall-clock rates (medians too) are printed. Both
rows play the same games (the same seed; greedy Q-policies draw nothing from the
generator) unless two Q-values tie within float rounding. ``--profile`` prints the
top lines of a cProfile of each row.

    python benchmarks/grouped_acting.py [--opponents 30 100] [--steps 100000] [--num-envs 64]
        [--hidden 128 128] [--algorithm dqn|ppo] [--repeats 5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

import popmarl
from popmarl.interfaces.policy import ActingAlone, Policy
from popmarl.data.population import AgentMapping
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.runs.runner import policy_spaces

GAME = "leduc_poker"
LEARNER_SEAT = "player_0"


def workload(opponents: int, steps: int, num_envs: int, hidden: list[int], algorithm: str,
             grouped: bool) -> Callable[[], int]:
    """A run of ``explore`` to ``steps`` env steps; returns the steps taken."""
    env = popmarl.envs.load("openspiel")(game=GAME)
    algo = popmarl.algorithms.load(algorithm)(hidden=hidden)
    spaces = policy_spaces(env, AgentMapping.resolve("per_player", env.agents))
    learner = algo.make_policy(space=spaces[LEARNER_SEAT], seed=0)
    seat = next(a for a in env.agents if a != LEARNER_SEAT)
    pool: list[Policy] = [algo.make_policy(space=spaces[seat], seed=1 + k) for k in range(opponents)]
    if not grouped:
        pool = [ActingAlone(p) for p in pool]
    draw = OpponentDraw({seat: (pool, np.full(opponents, 1.0 / opponents))})
    worker = RolloutWorker(env=env, num_envs=num_envs)

    def run() -> int:
        return worker.explore(learners=[Seating(policy=learner, seats=(LEARNER_SEAT,))], opponents=draw,
                              max_episodes=None, max_steps=steps, seed=0).env_steps

    return run


def measure(runs: Sequence[Callable[[], int]], repeats: int) -> list[tuple[float, float]]:
    """Per workload, the median steps per CPU second and per wall second over ``repeats``
    rounds, each round running every workload once in turn (alternating, so that a busy
    spell of the machine falls on all of them alike)."""
    rates: list[list[tuple[float, float]]] = [[] for _ in runs]
    for _ in range(repeats):
        for k, run in enumerate(runs):
            cpu, wall = time.process_time(), time.perf_counter()
            steps = run()
            rates[k].append((steps / (time.process_time() - cpu), steps / (time.perf_counter() - wall)))
    return [(float(np.median([r[0] for r in rs])), float(np.median([r[1] for r in rs]))) for rs in rates]


def profile(run: Callable[[], int], lines: int = 14) -> str:
    profiler = cProfile.Profile()
    profiler.runcall(run)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(lines)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opponents", type=int, nargs="+", default=[30, 100])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--hidden", type=int, nargs="+", default=[128, 128])
    parser.add_argument("--algorithm", default="dqn", choices=["dqn", "ppo"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each row")
    args = parser.parse_args()
    torch.set_num_threads(1)

    print(f"{GAME}, {args.algorithm} {args.hidden}, {args.num_envs} games, {args.steps} env steps per run")
    print(f"{'opponents':>9} {'acting':<11} {'steps/cpu-s':>12} {'steps/wall-s':>13} {'ratio (cpu)':>12}")
    for opponents in args.opponents:
        modes = (("per-policy", False), ("grouped", True))
        runs = [workload(opponents, args.steps, args.num_envs, args.hidden, args.algorithm, grouped)
                for _, grouped in modes]
        for run in runs:
            run()  # warm up (imports, allocator)
        rates = measure(runs, args.repeats)
        for (name, _), (cpu, wall), run in zip(modes, rates, runs):
            print(f"{opponents:>9} {name:<11} {cpu:>12,.0f} {wall:>13,.0f} {cpu / rates[0][0]:>11.2f}x", flush=True)
            if args.profile:
                print(profile(run))


if __name__ == "__main__":
    main()
