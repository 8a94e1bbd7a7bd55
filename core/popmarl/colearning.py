"""Co-learning: several populations' learners trained together in the same games.

Used by the ``marl`` scenario through :meth:`popmarl.executor.Executor.learn`. The
learners (policy + trainer) persist across calls, so optimiser and replay state carry
over from one iteration to the next within a process.
"""

from __future__ import annotations

import time

import numpy as np

from popmarl.algorithm import Algorithm, PolicySpace
from popmarl.errors import ConfigError
from popmarl.policy import Policy
from popmarl.records import LearnResult, LearnTask
from popmarl.rollout import RolloutWorker
from popmarl.trainer import Trainer


class CoLearners:
    """The learning policies and trainers of one process, by population."""

    def __init__(self, *, algorithm: Algorithm, spaces: dict[str, PolicySpace], rollout: RolloutWorker) -> None:
        self.algorithm = algorithm
        self.spaces = spaces
        self.rollout = rollout
        self.learners: dict[str, tuple[Policy, Trainer]] = {}

    def _learner(self, population: str, task: LearnTask, policy_of: dict[str, Policy]) -> tuple[Policy, Trainer]:
        if population not in self.learners:
            space = self.spaces[population]
            seed = task.seed + 104_729 * (1 + sorted(self.spaces).index(population))
            policy = self.algorithm.make_policy(space=space, seed=seed)
            policy.set_weights(policy_of[task.initial[population]].get_weights())
            trainer = self.algorithm.make_trainer(policy=policy, space=space, seed=seed)
            if trainer is None:
                raise ConfigError(f"algorithm: {type(self.algorithm).__name__} does not learn; "
                                  "the marl scenario needs a learning algorithm (e.g. dqn, ppo, a2c)")
            self.learners[population] = (policy, trainer)
        return self.learners[population]

    def learn(self, task: LearnTask, policy_of: dict[str, Policy]) -> LearnResult:
        """Train every learner of ``task`` in shared games until its budget is spent."""
        budget = task.budget
        learners = {p: self._learner(p, task, policy_of) for p in task.learners}
        order = list(learners)
        profile = {}
        for population, space in self.spaces.items():
            policy = learners[population][0] if population in learners else policy_of[task.fixed[population]]
            for agent in space.agents:
                profile[agent] = policy
        start = time.monotonic()
        env_steps = episodes = rounds = 0
        returns: list[float] = []
        metrics: dict[str, float] = {}
        while True:
            chunk = budget.episodes_per_update
            if budget.max_episodes is not None:
                chunk = min(chunk, budget.max_episodes - episodes)
            started = 0

            def sample(steps: int) -> tuple[dict[str, Policy], None] | None:
                nonlocal started
                over = budget.max_env_steps is not None and env_steps + steps >= budget.max_env_steps
                if started >= chunk or over:
                    return None
                started += 1
                return profile, None

            result = self.rollout.run(sample, seed=task.seed + 7919 * (rounds + 1), explore=True,
                                      learners=[learners[p][0] for p in order])
            rounds += 1
            env_steps += result.env_steps
            episodes += len(result.tags)
            returns.extend(result.returns.sum(axis=1).tolist())
            for population, trajectories in zip(order, result.episodes):
                if trajectories:
                    update = learners[population][1].update(trajectories)
                    metrics.update({f"{population}/{k}": float(v) for k, v in update.items()})
            elapsed = time.monotonic() - start
            if (not result.tags
                    or (budget.max_env_steps is not None and env_steps >= budget.max_env_steps)
                    or (budget.max_episodes is not None and episodes >= budget.max_episodes)
                    or (budget.max_wall_time_s is not None and elapsed >= budget.max_wall_time_s)):
                break
        metrics["train_time_s"] = time.monotonic() - start
        metrics["train_mean_team_return"] = float(np.mean(returns)) if returns else 0.0
        weights = {p: learners[p][0].get_weights() for p in order}
        return LearnResult(weights=weights, env_steps=env_steps, episodes=episodes, metrics=metrics)
