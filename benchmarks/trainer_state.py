"""Size and speed of a learner's trainer state: the default ``dqn`` on Leduc poker with
a full replay buffer (the largest state popmarl-tianshou makes on the poker examples).

Fills the default 50k buffer with player_0's episodes against a uniform player_1 (the
trainer updates as in a run), then prints each file's size, the time of ``state()`` and
of ``load_state()`` into a rebuilt trainer. Run: ``python benchmarks/trainer_state.py``.
"""

from __future__ import annotations

import time

import numpy as np
import torch

import popmarl
from popmarl.interfaces.algorithm import PolicySpace, TrainerContext
from popmarl.builtin.random_policy import UniformRandomPolicy
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating


def main() -> None:
    torch.set_num_threads(1)
    env = popmarl.envs.load("openspiel")(game="leduc_poker")
    space = PolicySpace(population="player_0", agents=("player_0",),
                        observation_space=env.observation_space("player_0"), action_space=env.action_space("player_0"))
    algorithm = popmarl.algorithms.load("dqn")()
    policy = algorithm.make_policy(space=space, seed=0)
    trainer = algorithm.make_trainer(policy=policy, space=space, seed=0,
                                     context=TrainerContext.alone(policy=policy, space=space))
    worker = RolloutWorker(env=env, num_envs=64)
    n_actions = env.action_space("player_1").n
    opponents = OpponentDraw({"player_1": ([UniformRandomPolicy(n_actions)], np.ones(1))})
    start, seed, filled = time.perf_counter(), 0, 0.0
    while filled < algorithm.config.buffer_size:
        played = worker.explore(learners=[Seating(policy=policy, seats=("player_0",))], opponents=opponents,
                                max_episodes=None, max_steps=5000, seed=seed)
        filled = trainer.update(played.episodes[0])["buffer_size"]
        seed += 1
    print(f"buffer filled ({filled:.0f} transitions) in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    state = trainer.state()
    saved = time.perf_counter() - start
    for name, data in sorted(state.items()):
        print(f"  {name:14s} {len(data):>10,d} bytes")
    print(f"  {'total':14s} {sum(map(len, state.values())):>10,d} bytes; state() {saved:.2f} s")
    rebuilt = algorithm.make_policy(space=space, seed=1)
    rebuilt.set_weights(policy.get_weights())
    resumed = algorithm.make_trainer(policy=rebuilt, space=space, seed=1,
                                     context=TrainerContext.alone(policy=rebuilt, space=space))
    start = time.perf_counter()
    resumed.load_state(state)
    print(f"load_state() {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
