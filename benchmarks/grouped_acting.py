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

The headline is env steps per CPU second of this process (``time.process_time``), with
the ratio against ``per-policy`` measured in the same run; wall-clock rates are printed
too. Both rows play the same games (the same seed; greedy Q-policies draw nothing from
the generator) unless two Q-values tie within float rounding. ``--profile`` prints the
top lines of a cProfile of each row.

    python benchmarks/grouped_acting.py [--opponents 30 100] [--steps 100000] [--num-envs 64]
        [--hidden 128 128] [--algorithm dqn|ppo] [--repeats 1] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Callable

import numpy as np
import torch

import popmarl
from popmarl.policy import ActingAlone, Policy
from popmarl.population import AgentMapping
from popmarl.rollout import OpponentDraw, RolloutWorker, Seating
from popmarl.runner import policy_spaces

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


def measure(run: Callable[[], int], repeats: int) -> tuple[float, float, int]:
    """Best steps per CPU second and per wall second over ``repeats`` runs, and the steps."""
    best_cpu = best_wall = 0.0
    steps = 0
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.perf_counter()
        steps = run()
        best_cpu = max(best_cpu, steps / (time.process_time() - cpu))
        best_wall = max(best_wall, steps / (time.perf_counter() - wall))
    return best_cpu, best_wall, steps


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
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each row")
    args = parser.parse_args()
    torch.set_num_threads(1)

    print(f"{GAME}, {args.algorithm} {args.hidden}, {args.num_envs} games, {args.steps} env steps per run")
    print(f"{'opponents':>9} {'acting':<11} {'steps/cpu-s':>12} {'steps/wall-s':>13} {'ratio (cpu)':>12}")
    for opponents in args.opponents:
        base = None
        for name, grouped in (("per-policy", False), ("grouped", True)):
            run = workload(opponents, args.steps, args.num_envs, args.hidden, args.algorithm, grouped)
            run()  # warm up (imports, allocator)
            cpu, wall, _ = measure(run, args.repeats)
            base = cpu if base is None else base
            print(f"{opponents:>9} {name:<11} {cpu:>12,.0f} {wall:>13,.0f} {cpu / base:>11.2f}x", flush=True)
            if args.profile:
                print(profile(run))


if __name__ == "__main__":
    main()
