"""AgentInterface: one per population; makes, trains and freezes its new policy."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import numpy as np

from popmarl.algorithm import Algorithm, BestResponseProblem, PolicySpace
from popmarl.env import Env, MixedProfile
from popmarl.keep import KeptWeights
from popmarl.policy import Policy
from popmarl.records import TrainBudget, TrainResult, TrainTask, Weights
from popmarl.rollout import RolloutWorker
from popmarl.servers import EpisodeServer, ParameterServer
from popmarl.trainer import Trainer


class AgentInterface:
    """Produces a population's next policy: the algorithm's exact best response, or a
    fresh policy trained by rollouts against the meta-strategy, or (for algorithms that
    neither answer nor train, like ``random``) the fresh policy itself."""

    #: How many versions older than the newest may still reach the trainer: none here,
    #: where the actor pulls the newest weights before each collection.
    max_staleness: int = 0

    def __init__(
        self,
        *,
        space: PolicySpace,
        algorithm: Algorithm,
        env: Env,
        rollout: RolloutWorker,
        params: ParameterServer | None = None,
        data: EpisodeServer | None = None,
    ) -> None:
        self.space = space
        self.algorithm = algorithm
        self.env = env
        self.rollout = rollout
        self.params = params if params is not None else ParameterServer()
        self.data = data if data is not None else EpisodeServer()

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
        return self.train_by_rollouts(task, policy, trainer, opponents)

    def train_by_rollouts(self, task: TrainTask, learner: Policy, trainer: Trainer,
                           opponents: MixedProfile) -> TrainResult:
        """Collect with the newest published weights, update, publish; until the budget
        or the windowed target is reached. The trainer updates ``learner``; the rollouts
        act with a separate copy that pulls new versions from the parameter server.
        Each version plays one batch of episodes; :class:`~popmarl.keep.KeptWeights`
        picks the weights returned."""
        budget = task.budget
        key = task.spec.policy_id
        pools = {agent: ([p for p, _ in mix], _normalised([w for _, w in mix])) for agent, mix in opponents.items()}
        kept = KeptWeights(budget)
        self._publish(key, learner, kept)
        actor = self.algorithm.make_policy(space=self.space, seed=task.seed)
        version = 0
        window: deque[float] = deque(maxlen=budget.window)
        start = time.monotonic()
        env_steps = episodes = updates = 0
        metrics: dict[str, float] = {}
        while True:
            pulled = self.params.pull(key, version)
            if pulled is not None:
                version, weights = pulled
                actor.set_weights(weights)
            chunk = budget.episodes_per_update
            if budget.max_episodes is not None:
                chunk = min(chunk, budget.max_episodes - episodes)
            collected, steps = self.rollout.explore(
                learner=actor, learner_agents=self.space.agents, opponents=pools, max_episodes=chunk,
                max_steps=None if budget.max_env_steps is None else budget.max_env_steps - env_steps,
                seed=task.seed + 7919 * (updates + 1), self_play=budget.self_play,
                opponent_epsilon=budget.opponent_epsilon,
            )
            env_steps += steps
            episodes += len(collected)
            window.extend(e.episode_return for e in collected)
            kept.played(version, [e.episode_return for e in collected])
            self.data.put(collected)
            batch = self.data.take()
            if batch:
                metrics = {k: float(v) for k, v in trainer.update(batch).items()}
                updates += 1
                self._publish(key, learner, kept)
            if budget_spent(budget, env_steps, episodes, time.monotonic() - start, window) or not collected:
                break
        metrics.update({
            "train_time_s": time.monotonic() - start, "updates": float(updates),
            "window_return": float(np.mean(window)) if window else 0.0,
            "window_win_rate": float(np.mean(np.asarray(window) > 0)) if window else 0.0,
            **kept.metrics(),
        })
        return TrainResult(spec=task.spec, weights=kept.final(learner.get_weights()), env_steps=env_steps,
                           episodes=episodes, metrics=metrics)

    def _publish(self, key: str, learner: Policy, kept: KeptWeights) -> int:
        """Make the learner's weights its next version (returned); forget, for ``keep``,
        the versions whose episodes can no longer reach the trainer."""
        weights = learner.get_weights()
        version = self._push(key, weights)
        kept.published(version, weights)
        kept.forget_older(version - self.max_staleness)
        return version

    def _push(self, key: str, weights: Weights) -> int:
        return self.params.push(key, weights)


def _normalised(weights: list[float]) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    return w / w.sum()


def budget_spent(budget: TrainBudget, env_steps: int, episodes: int, elapsed: float, window: deque[float]) -> bool:
    """Whether any stopping condition of ``budget`` holds."""
    if budget.max_env_steps is not None and env_steps >= budget.max_env_steps:
        return True
    if budget.max_episodes is not None and episodes >= budget.max_episodes:
        return True
    if budget.max_wall_time_s is not None and elapsed >= budget.max_wall_time_s:
        return True
    if len(window) == window.maxlen:
        if budget.target_return is not None and np.mean(window) >= budget.target_return:
            return True
        if budget.target_win_rate is not None and np.mean(np.asarray(window) > 0) >= budget.target_win_rate:
            return True
    return False
