"""Rollout throughput on PettingZoo classic games: popmarl vs raw PettingZoo vs Tianshou.

Three ways to play uniformly random legal moves in the same env
(``pettingzoo.classic.<game>.env()``, with its standard wrappers):

* ``raw``: a plain PettingZoo loop (``agent_iter`` / ``last`` / ``step``), one game;
* ``popmarl``: ``RolloutWorker.evaluate`` (evaluate mode) with the core ``random``
  algorithm's policy in every seat, over the plugin's ``pettingzoo`` env vector;
* ``tianshou``: Tianshou 2.0's ``Collector`` over ``DummyVectorEnv`` of
  ``tianshou.env.PettingZooEnv`` with a ``MultiAgentPolicy`` of masked random policies.

``vector only`` steps the plugin's vector with numpy-picked random legal actions (no
policies, no rollout engine): the adapter's own cost. Steps are agent moves (dead-agent
``None`` steps are not counted). Rates are per CPU second of this process (and per wall
second, for reference), the best of ``--repeats`` round-robin runs; ratios are against
``raw`` measured in the same process, so noise on a shared machine mostly cancels out.

    python benchmarks/rollout_pettingzoo.py [--steps 20000] [--tianshou-steps 4000] [--repeats 3]
        [--num-envs 1 16 64] [--games tictactoe_v3 connect_four_v3] [--no-tianshou]
"""

from __future__ import annotations

import argparse
import importlib
import logging
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

GAMES = ("tictactoe_v3", "connect_four_v3")


def measure(run: Callable[[], int]) -> tuple[float, float]:
    """Steps per CPU second and per wall second of one ``run`` (which returns its steps).
    CPU time (this process only) is the headline: other jobs on a shared machine barely
    move it, while they can halve the wall-clock rate."""
    cpu, wall = time.process_time(), time.perf_counter()
    steps = run()
    return steps / (time.process_time() - cpu), steps / (time.perf_counter() - wall)


def env_module(game: str) -> Any:
    """``pettingzoo.classic.<game>``, without PettingZoo 1.27's deprecation warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(f"pettingzoo.classic.{game}")


def raw_pettingzoo(game: str, steps: int) -> Callable[[], int]:
    module = env_module(game)
    env = module.env()

    def run() -> int:
        rng = np.random.default_rng(0)
        done, episode = 0, 0
        while done < steps:
            env.reset(seed=episode)
            episode += 1
            for _agent in env.agent_iter():
                obs, _reward, termination, truncation, _info = env.last()
                if termination or truncation:
                    env.step(None)
                    continue
                legal = np.flatnonzero(obs["action_mask"])
                env.step(int(legal[rng.integers(len(legal))]))
                done += 1
        return done

    return run


def popmarl_rollout(game: str, steps: int, num_envs: int) -> Callable[[], int]:
    import popmarl
    from popmarl.interfaces.algorithm import PolicySpace
    from popmarl.engine.rollout import RolloutWorker
    from popmarl_pettingzoo import PettingZooEnv

    env_module(game)
    env = PettingZooEnv(module=f"pettingzoo.classic.{game}")
    random = popmarl.algorithms.load("random")()
    profile = {
        agent: random.make_policy(space=PolicySpace(population=agent, agents=(agent,),
                                                    observation_space=env.observation_space(agent),
                                                    action_space=env.action_space(agent)), seed=0)
        for agent in env.agents
    }
    worker = RolloutWorker(env=env, num_envs=num_envs)
    mean_length = {"tictactoe_v3": 7.6, "connect_four_v3": 21.0}.get(game, 10.0)
    episodes = max(num_envs, int(steps / mean_length))

    def run() -> int:
        _, env_steps = worker.evaluate([profile], episodes=episodes, seed=0)
        return env_steps

    return run


def popmarl_vector(game: str, steps: int, num_envs: int) -> Callable[[], int]:
    """The plugin's vector alone: random legal actions picked with numpy, no policies."""
    from popmarl_pettingzoo import PettingZooEnv

    env_module(game)
    env = PettingZooEnv(module=f"pettingzoo.classic.{game}")

    def run() -> int:
        rng = np.random.default_rng(0)
        vec = env.vector(num_envs=num_envs, seed=0)
        step, done = vec.reset(), 0
        while done < steps:
            actions = {}
            for agent, (ids, batch) in step.decisions.items():
                actions[agent] = (rng.random(batch.mask.shape) * batch.mask).argmax(axis=1)
                done += len(ids)
            step = vec.step(actions)
        vec.close()
        return done

    return run


def tianshou_collector(game: str, steps: int, num_envs: int) -> Callable[[], int]:
    from tianshou.env import PettingZooEnv

    module = env_module(game)
    return random_collector(lambda: PettingZooEnv(module.env()), steps, num_envs)


def random_collector(make: Callable[[], Any], steps: int, num_envs: int) -> Callable[[], int]:
    """Tianshou's ``Collector`` over ``DummyVectorEnv`` of ``num_envs`` Tianshou
    ``PettingZooEnv``s from ``make``, with masked uniformly random policies."""
    from tianshou.algorithm.multiagent.marl import MultiAgentPolicy
    from tianshou.algorithm.random import MARLRandomDiscreteMaskedOffPolicyAlgorithm
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv

    envs = DummyVectorEnv([make for _ in range(num_envs)])
    probe = make()
    policy = MultiAgentPolicy({
        agent: MARLRandomDiscreteMaskedOffPolicyAlgorithm.Policy(probe.action_space) for agent in probe.agents
    })
    n_step = -(-steps // num_envs) * num_envs  # a multiple of num_envs, as the Collector wants
    collector = Collector(policy, envs, VectorReplayBuffer(n_step * 2, num_envs))

    def run() -> int:
        collector.reset()
        return int(collector.collect(n_step=n_step).n_collected_steps)

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000, help="agent moves per measurement")
    parser.add_argument("--tianshou-steps", type=int, default=4_000, help="agent moves per Tianshou measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--games", nargs="+", default=list(GAMES))
    parser.add_argument("--no-tianshou", action="store_true", help="skip the Tianshou Collector rows")
    args = parser.parse_args(argv)
    logging.getLogger("tianshou").setLevel(logging.ERROR)  # per-collect stats chatter

    methods: list[tuple[str, str, str, Callable[[], int]]] = []
    for game in args.games:
        methods.append((game, "raw pettingzoo loop", "1", raw_pettingzoo(game, args.steps)))
        for n in args.num_envs:
            methods.append((game, "popmarl RolloutWorker.evaluate", str(n), popmarl_rollout(game, args.steps, n)))
        for n in args.num_envs:
            methods.append((game, "popmarl_pettingzoo vector only", str(n), popmarl_vector(game, args.steps, n)))
        if not args.no_tianshou:
            for n in args.num_envs:
                methods.append((game, "tianshou Collector", str(n), tianshou_collector(game, args.tianshou_steps, n)))
    best: dict[int, tuple[float, float]] = {}
    for _ in range(args.repeats):  # round-robin, so load changes hit every method alike
        for k, (*_, run) in enumerate(methods):
            cpu, wall = measure(run)
            best[k] = (max(cpu, best.get(k, (0.0, 0.0))[0]), max(wall, best.get(k, (0.0, 0.0))[1]))
    raw = {game: best[k][0] for k, (game, method, *_) in enumerate(methods) if method.startswith("raw")}

    header = ("game", "method", "num_envs", "steps/cpu-s", "vs raw", "cpu us/step", "steps/wall-s")
    table = [header]
    for k, (game, method, n, _) in enumerate(methods):
        cpu, wall = best[k]
        table.append((game, method, n, f"{cpu:,.0f}", f"{cpu / raw[game]:.2f}", f"{1e6 / cpu:.1f}", f"{wall:,.0f}"))
    widths = [max(len(row[k]) for row in table) for k in range(len(header))]
    for k, row in enumerate(table):
        print("  ".join(cell.rjust(w) if i >= 2 else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
