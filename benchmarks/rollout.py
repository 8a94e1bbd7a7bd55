"""Rollout throughput, evaluate mode, one core, in one process: Leduc poker (OpenSpiel)
and PettingZoo classic games.

``--suite leduc`` (the first table) rows, decisions per second of greedy masked play of
a fresh 128×128 MLP per player:

* ``popmarl``: ``RolloutWorker`` over the ``openspiel`` env with ``dqn`` policies, 64 games;
* ``hand-written``: the same work as a plain batched loop — pyspiel states, numpy
  buffers, one torch forward per acting player per step, no framework;
* ``tianshou``: Tianshou 2.0's ``Collector`` over ``DummyVectorEnv`` of
  ``PettingZooEnv(shimmy OpenSpiel)``, with masked *random* policies (no network, which
  only flatters it).

Ratios are against the hand-written loop measured in the same run. The headline is
steps per CPU second of this process (other jobs on a shared machine barely move it);
wall-clock rates are printed too.

``--suite pettingzoo`` (the second table) is ``benchmarks/rollout_pettingzoo.py``:
popmarl against raw PettingZoo stepping and Tianshou's ``Collector`` on tic-tac-toe and
connect four; options after ``--`` go to it. ``--suite all`` (the default) prints both.

    python benchmarks/rollout.py [--suite leduc|pettingzoo|all] [--steps 200000] [--num-envs 64]
        [--tianshou-steps 5000] [--repeats 3] [--no-tianshou] [-- PETTINGZOO OPTIONS]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

import numpy as np
import torch

import rollout_pettingzoo
from rollout_pettingzoo import measure, random_collector

GAME = "leduc_poker"


def popmarl_rollout(steps: int, num_envs: int, hidden: list[int]) -> Callable[[], int]:
    import popmarl
    from popmarl.data.population import AgentMapping
    from popmarl.engine.rollout import RolloutWorker
    from popmarl.runs.runner import policy_spaces

    env = popmarl.envs.load("openspiel")(game=GAME)
    algorithm = popmarl.algorithms.load("dqn")(hidden=hidden)
    spaces = policy_spaces(env, AgentMapping.resolve("per_player", env.agents))
    profile = {a: algorithm.make_policy(space=spaces[a], seed=k) for k, a in enumerate(env.agents)}
    worker = RolloutWorker(env=env, num_envs=num_envs)

    def run() -> int:
        return worker.run(lambda taken: None if taken >= steps else (profile, None), seed=0, explore=False).env_steps

    return run


def mlp(inputs: int, hidden: list[int], outputs: int) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for width in hidden:
        layers += [torch.nn.Linear(inputs, width), torch.nn.ReLU()]
        inputs = width
    return torch.nn.Sequential(*layers, torch.nn.Linear(inputs, outputs))


def hand_written(steps: int, num_envs: int, hidden: list[int]) -> Callable[[], int]:
    import pyspiel

    game = pyspiel.load_game(GAME)
    n_actions = game.num_distinct_actions()
    size = game.information_state_tensor_size()
    nets = [mlp(size, hidden, n_actions) for _ in range(game.num_players())]
    rng = random.Random(0)

    def deal(state: pyspiel.State) -> pyspiel.State:
        while state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes())
            state.apply_action(rng.choices(outcomes, probs)[0])
        return state

    def fresh() -> pyspiel.State:
        return deal(game.new_initial_state())

    def run() -> int:
        states = [fresh() for _ in range(num_envs)]
        obs = np.zeros((num_envs, size), np.float32)
        mask = np.zeros((num_envs, n_actions), bool)
        done = 0
        with torch.no_grad():
            while done < steps:
                players = np.array([s.current_player() for s in states])
                for player, net in enumerate(nets):
                    rows = np.flatnonzero(players == player)
                    if not len(rows):
                        continue
                    mask[rows] = False
                    for r in rows:
                        obs[r] = states[r].information_state_tensor(player)
                        mask[r, states[r].legal_actions()] = True
                    q = net(torch.from_numpy(obs[rows])).numpy()
                    actions = np.where(mask[rows], q, -np.inf).argmax(axis=1)
                    for r, a in zip(rows, actions):
                        state = states[r]
                        state.apply_action(int(a))
                        deal(state)
                        if state.is_terminal():
                            state.returns()
                            states[r] = fresh()
                    done += len(rows)
        return done

    return run


def tianshou_collector(steps: int, num_envs: int) -> Callable[[], int]:
    from pettingzoo.utils import BaseWrapper
    from shimmy import OpenSpielCompatibilityV0
    from tianshou.env import PettingZooEnv

    class MaskInObservation(BaseWrapper):
        """Shimmy puts the action mask in ``infos``; Tianshou reads it only from the
        observation dict."""

        def observe(self, agent: str) -> dict[str, np.ndarray]:
            return {"observation": super().observe(agent), "action_mask": self.infos[agent]["action_mask"]}

    def make() -> PettingZooEnv:
        return PettingZooEnv(MaskInObservation(OpenSpielCompatibilityV0(game_name=GAME)))

    return random_collector(make, steps, num_envs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=("leduc", "pettingzoo", "all"), default="all")
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--hidden", default="128,128")
    parser.add_argument("--tianshou-steps", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-tianshou", action="store_true")
    parser.add_argument("pettingzoo_options", nargs="*", help="after --: options of rollout_pettingzoo.py")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.suite != "pettingzoo":
        leduc(args)
    if args.suite != "leduc":
        print()
        extra = ["--no-tianshou"] if args.no_tianshou else []
        rollout_pettingzoo.main([*extra, *args.pettingzoo_options])


def leduc(args: argparse.Namespace) -> None:
    hidden = [int(h) for h in args.hidden.split(",")]
    methods = [("hand-written loop", hand_written(args.steps, args.num_envs, hidden)),
               ("popmarl RolloutWorker", popmarl_rollout(args.steps, args.num_envs, hidden))]
    if not args.no_tianshou:
        methods.append(("tianshou Collector (random)", tianshou_collector(args.tianshou_steps, args.num_envs)))
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeats):  # interleaved, so drifting load hits every row alike
        for name, run in methods:
            cpu, wall = measure(run)
            if name not in best or cpu > best[name][0]:
                best[name] = (cpu, wall)
    baseline = best["hand-written loop"][0]
    print(f"Leduc poker, {args.num_envs} games, MLP {args.hidden} per player, 1 torch thread, "
          f"best of {args.repeats}")
    print(f"{'method':<30}{'steps/cpu-s':>14}{'vs hand-written':>17}{'steps/wall-s':>15}")
    for name, (cpu, wall) in best.items():
        print(f"{name:<30}{cpu:>14,.0f}{cpu / baseline:>17.2f}{wall:>15,.0f}")
    if "tianshou Collector (random)" in best:
        print(f"popmarl / tianshou: {best['popmarl RolloutWorker'][0] / best['tianshou Collector (random)'][0]:.1f}x")


if __name__ == "__main__":
    main()
