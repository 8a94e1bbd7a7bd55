"""Executes train and evaluate tasks against a local policy store.

The local backend runs one executor in-process; remote backends run one per worker.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from popmarl.agent import AgentInterface
from popmarl.backend import Components, RunSetup
from popmarl.env import ExactEnv
from popmarl.learner import Learners
from popmarl.policy import Policy
from popmarl.records import EvalResult, EvalTask, TrainResult, TrainTask, Weights
from popmarl.rollout import RolloutWorker
from popmarl.training import run_task


def population_of(policy_id: str) -> str:
    """The population part of a policy id (``population/index``)."""
    return policy_id.rsplit("/", 1)[0]


class Executor:
    """Holds the env, each population's algorithm, the frozen policies and the learners
    of one process."""

    def __init__(self, setup: RunSetup, components: Components) -> None:
        self.setup = setup
        self.env = components.env
        self.agents = {population: AgentInterface(space=space, algorithm=components.algorithms[population],
                                                  env=self.env, algorithm_name=setup.algorithms[population][0])
                       for population, space in setup.spaces.items()}
        self.rollout = RolloutWorker(env=self.env, num_envs=setup.num_envs)
        self.train_rollout = RolloutWorker(env=self.env, num_envs=setup.train_num_envs)
        self.policies: dict[str, Policy] = {}
        self.learners = Learners(self.agents)

    def add_policy(self, policy_id: str, weights: Weights) -> None:
        """Rebuild a frozen policy from its weights (with its population's algorithm)."""
        self.policies[policy_id] = self.agents[population_of(policy_id)].frozen(weights)

    def policy(self, policy_id: str) -> Policy:
        return self.policies[policy_id]

    def train(self, task: TrainTask) -> TrainResult:
        """Run ``task`` here: its learners act and update in this process."""
        return run_task(task, learners=self.learners, rollout=self.train_rollout, policy_of=self.policy)

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
