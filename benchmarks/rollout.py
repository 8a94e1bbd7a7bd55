"""Rollout throughput on Leduc poker, evaluate mode, one core, in one process.

Rows (decisions per second, greedy masked play of a fresh 128×128 MLP per player):

* ``popmarl``: ``RolloutWorker`` over the ``openspiel`` env with ``dqn`` policies, 64 games;
* ``hand-written``: the same work as a plain batched loop — pyspiel states, numpy
  buffers, one torch forward per acting player per step, no framework;
* ``tianshou``: Tianshou 2.0's ``Collector`` over ``DummyVectorEnv`` of
  ``PettingZooEnv(shimmy OpenSpiel)``, with masked *random* policies (no network, which
  only flatters it).

Ratios are against the hand-written loop measured in the same run. The headline is
steps per CPU second of this process (other jobs on a shared machine barely move it);
wall-clock rates are printed too.

    python benchmarks/rollout.py [--steps 200000] [--num-envs 64] [--tianshou-steps 5000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import numpy as np
import torch

GAME = "leduc_poker"


def measure(run: Callable[[], int]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    steps = run()
    return steps / (time.process_time() - cpu), steps / (time.perf_counter() - wall)


def popmarl_rollout(steps: int, num_envs: int, hidden: list[int]) -> Callable[[], int]:
    import popmarl
    from popmarl.population import AgentMapping
    from popmarl.rollout import RolloutWorker
    from popmarl.runner import policy_spaces

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
    import pyspiel
    from pettingzoo.utils import BaseWrapper
    from shimmy import OpenSpielCompatibilityV0
    from tianshou.algorithm.multiagent.marl import MultiAgentPolicy
    from tianshou.algorithm.random import MARLRandomDiscreteMaskedOffPolicyAlgorithm
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv, PettingZooEnv

    class MaskInObservation(BaseWrapper):
        """Shimmy puts the action mask in ``infos``; Tianshou reads it only from the
        observation dict."""

        def observe(self, agent: str) -> dict[str, np.ndarray]:
            return {"observation": super().observe(agent), "action_mask": self.infos[agent]["action_mask"]}

    def make() -> PettingZooEnv:
        return PettingZooEnv(MaskInObservation(OpenSpielCompatibilityV0(game_name=GAME)))

    envs = DummyVectorEnv([make for _ in range(num_envs)])
    probe = make()
    policy = MultiAgentPolicy({
        agent: MARLRandomDiscreteMaskedOffPolicyAlgorithm.Policy(probe.action_space) for agent in probe.agents
    })
    n_step = -(-steps // num_envs) * num_envs
    collector = Collector(policy, envs, VectorReplayBuffer(n_step * 2, num_envs))

    def run() -> int:
        collector.reset()
        return int(collector.collect(n_step=n_step).n_collected_steps)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--hidden", default="128,128")
    parser.add_argument("--tianshou-steps", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-tianshou", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
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
