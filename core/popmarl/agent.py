"""AgentInterface: one per population; makes, trains and freezes its new policy."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from popmarl.algorithm import Algorithm, BestResponseProblem, PolicySpace
from popmarl.env import Env, MixedProfile
from popmarl.policy import Policy
from popmarl.records import TrainResult, TrainTask
from popmarl.rollout import RolloutWorker


class AgentInterface:
    """Produces a population's next policy: the algorithm's exact best response, or a
    fresh policy trained by rollouts against the meta-strategy, or (for algorithms that
    neither answer nor train, like ``random``) the fresh policy itself."""

    def __init__(self, *, space: PolicySpace, algorithm: Algorithm, env: Env, rollout: RolloutWorker) -> None:
        self.space = space
        self.algorithm = algorithm
        self.env = env
        self.rollout = rollout

    def train(self, task: TrainTask, policy_of: Callable[[str], Policy]) -> TrainResult:
        """Run ``task``; ``policy_of`` resolves the opponents' frozen policy ids."""
        opponents: MixedProfile = {
            o.agent: [(policy_of(pid), p) for pid, p in o.support()] for o in task.opponents
        }
        problem = BestResponseProblem(env=self.env, space=self.space, opponents=opponents, seed=task.seed)
        answer = self.algorithm.best_response(problem)
        if answer is not None:
            return TrainResult(spec=task.spec, weights=answer.get_weights())
        policy = self.algorithm.make_policy(space=self.space, seed=task.seed)
        trainer = self.algorithm.make_trainer(policy=policy, space=self.space, seed=task.seed)
        if trainer is None:
            return TrainResult(spec=task.spec, weights=policy.get_weights())
        return self._train_by_rollouts(task, policy, trainer, opponents)

    def _train_by_rollouts(self, task, policy, trainer, opponents: MixedProfile) -> TrainResult:  # type: ignore[no-untyped-def]
        budget = task.budget
        pools = {
            agent: ([p for p, _ in mix], np.array([w for _, w in mix]) / sum(w for _, w in mix))
            for agent, mix in opponents.items()
        }
        start = time.monotonic()
        env_steps = episodes = 0
        metrics: dict[str, float] = {}
        round_ = 0
        while True:
            remaining_steps = None if budget.max_env_steps is None else budget.max_env_steps - env_steps
            remaining_eps = None if budget.max_episodes is None else budget.max_episodes - episodes
            chunk = budget.episodes_per_update if remaining_eps is None else min(budget.episodes_per_update, remaining_eps)
            batch, steps = self.rollout.explore(
                learner=policy,
                learner_agents=self.space.agents,
                opponents=pools,
                max_episodes=chunk,
                max_steps=remaining_steps,
                seed=task.seed + 7919 * (round_ + 1),
            )
            env_steps += steps
            episodes += len(batch)
            if batch:
                metrics = {k: float(v) for k, v in trainer.update(batch).items()}
            round_ += 1
            if _exhausted(budget, env_steps, episodes, time.monotonic() - start) or not batch:
                break
        metrics["train_time_s"] = time.monotonic() - start
        return TrainResult(spec=task.spec, weights=policy.get_weights(), env_steps=env_steps, episodes=episodes, metrics=metrics)


def _exhausted(budget, env_steps: int, episodes: int, elapsed: float) -> bool:  # type: ignore[no-untyped-def]
    if budget.max_env_steps is not None and env_steps >= budget.max_env_steps:
        return True
    if budget.max_episodes is not None and episodes >= budget.max_episodes:
        return True
    if budget.max_wall_time_s is not None and elapsed >= budget.max_wall_time_s:
        return True
    return budget.max_env_steps is None and budget.max_episodes is None and budget.max_wall_time_s is None
