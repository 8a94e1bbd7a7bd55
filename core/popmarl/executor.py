"""Executes train and evaluate tasks against a local policy store.

The local backend runs one executor in-process; remote backends run one per worker.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from popmarl.agent import AgentInterface
from popmarl.backend import Components, RunSetup
from popmarl.env import ExactEnv
from popmarl.policy import Policy
from popmarl.colearning import CoLearners
from popmarl.records import EvalResult, EvalTask, LearnResult, LearnTask, TrainResult, TrainTask, Weights
from popmarl.rollout import RolloutWorker


def population_of(policy_id: str) -> str:
    """The population part of a policy id (``population/index``)."""
    return policy_id.rsplit("/", 1)[0]


class Executor:
    """Holds the env, the algorithm and the frozen policies of one process."""

    def __init__(self, setup: RunSetup, components: Components) -> None:
        self.setup = setup
        self.env = components.env
        self.algorithm = components.algorithm
        self.rollout = RolloutWorker(env=self.env, num_envs=setup.num_envs)
        self.train_rollout = RolloutWorker(env=self.env, num_envs=setup.train_num_envs)
        self.policies: dict[str, Policy] = {}
        self.colearners = CoLearners(algorithm=self.algorithm, spaces=dict(setup.spaces), rollout=self.train_rollout)

    def add_policy(self, policy_id: str, weights: Weights) -> None:
        """Rebuild a frozen policy from its weights."""
        space = self.setup.spaces[population_of(policy_id)]
        policy = self.algorithm.make_policy(space=space, seed=0)
        policy.set_weights(weights)
        self.policies[policy_id] = policy

    def policy(self, policy_id: str) -> Policy:
        return self.policies[policy_id]

    def train(self, task: TrainTask) -> TrainResult:
        space = self.setup.spaces[task.spec.population]
        agent = AgentInterface(space=space, algorithm=self.algorithm, env=self.env, rollout=self.train_rollout)
        return agent.train(task, self.policy)

    def learn(self, task: LearnTask) -> LearnResult:
        return self.colearners.learn(task, self.policies)

    @property
    def exact(self) -> bool:
        """Whether payoff entries are computed exactly."""
        if self.setup.exact_evaluation == "never":
            return False
        return isinstance(self.env, ExactEnv) and self.env.supports_exact()

    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        """All ``tasks`` at once: one exact call, or one shared vector of games."""
        if not tasks:
            return []
        profiles = [{agent: self.policies[pid] for agent, pid in t.profile.items()} for t in tasks]
        if self.exact:
            assert isinstance(self.env, ExactEnv)
            values = self.env.exact_returns(profiles)
            return [EvalResult(index=t.index, returns=np.asarray(v), exact=True) for t, v in zip(tasks, values)]
        episodes = tasks[0].episodes
        values, steps = self.rollout.evaluate(profiles, episodes=episodes, seed=tasks[0].seed)
        share = steps // len(tasks)
        return [
            EvalResult(index=t.index, returns=v, episodes=episodes, env_steps=share)
            for t, v in zip(tasks, values)
        ]
