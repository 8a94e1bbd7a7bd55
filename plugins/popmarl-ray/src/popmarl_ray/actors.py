"""The rollout worker and learner actors.

Each actor rebuilds the run's env and algorithm from the :class:`~popmarl.backend.RunSetup`
(component names and params) and keeps its own copy of the frozen policies in a core
:class:`~popmarl.executor.Executor`, which runs the evaluate and train tasks. A failure
while building is kept and raised by ``ready``, so it reaches the driver as the
component's own error rather than as a dead actor.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import ray

from popmarl.backend import Components, RunSetup
from popmarl.executor import Executor
from popmarl.policy import Policy
from popmarl.records import EvalResult, EvalTask, LearnResult, LearnTask, TrainResult, TrainTask, Weights
from popmarl.registries import Registries
from popmarl_ray.learner import AsyncAgentInterface

#: Components registered in the driver without an entry point (``with_component``),
#: shipped to the actors by value: ``{(kind, name): class}``.
LocalComponents = Mapping[tuple[str, str], Any]
#: How many learning policies (training attempts) a worker keeps a copy of.
ACTING_CACHE = 8


@attrs.frozen(kw_only=True)
class ExploreReport:
    """What one explore call played: env steps, episodes, the weights version, and
    whether the episode server took them (False once the attempt is over)."""

    env_steps: int
    episodes: int
    version: int
    accepted: bool


def build_executor(setup: RunSetup, local: LocalComponents, num_cpus: float) -> Executor:
    """The env, algorithm and policy store of this process: by registered name, or the
    classes the driver registered in its process only (``local``)."""
    found = Registries.current()
    for (kind, name), obj in local.items():
        found = found.with_component(kind, name, obj)
    env = found.component("envs", setup.env_name, setup.env_params)
    algorithm = found.component("algorithms", setup.algorithm_name, setup.algorithm_params)
    torch = sys.modules.get("torch")
    if torch is not None:  # one intra-op thread per reserved CPU, not one per core of the node
        torch.set_num_threads(max(1, int(round(num_cpus))))
    return Executor(setup, Components(env=env, algorithm=algorithm))  # type: ignore[arg-type]


def writable(weights: Weights) -> dict[str, np.ndarray]:
    """Own copies of arrays read from the object store (which are read-only views)."""
    return {name: np.array(value) for name, value in weights.items()}


class _Actor:
    """Builds the executor; ``ready`` reports the process id or the building error."""

    def __init__(self, setup: RunSetup, local: LocalComponents, num_cpus: float) -> None:
        self._error: BaseException | None = None
        try:
            self.executor = build_executor(setup, local, num_cpus)
        except Exception as exc:
            self._error = exc
        self.setup = setup

    def ready(self) -> int:
        if self._error is not None:
            raise self._error
        return os.getpid()

    def pid(self) -> int:
        return os.getpid()

    def add_policies(self, policy_ids: Sequence[str], *weights: Weights) -> None:
        """Rebuild frozen policies (weights arrive resolved from the object store)."""
        for policy_id, w in zip(policy_ids, weights):
            self.executor.add_policy(policy_id, writable(w))


class RolloutWorkerActor(_Actor):
    """Fills payoff entries and plays training episodes for the learners."""

    def __init__(self, setup: RunSetup, local: LocalComponents, num_cpus: float, params: Any, data: Any) -> None:
        super().__init__(setup, local, num_cpus)
        self.params = params
        self.data = data
        self._acting: dict[str, tuple[int, Policy]] = {}

    def use_servers(self, params: Any, data: Any) -> None:
        """Call these servers from now on (they replace dead ones; versions start anew)."""
        self.params, self.data = params, data
        self._acting.clear()

    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        """A batch of payoff entries (exact, or sampled in one shared vector of games)."""
        return self.executor.evaluate(tasks)

    def explore(self, key: str, task: TrainTask, episodes: int, seed: int) -> ExploreReport:
        """Play ``episodes`` episodes of the learner of training attempt ``key`` (with the
        newest weights it has published) against the task's meta-strategy opponents, and
        queue them for the learner."""
        acting = self._acting_policy(key, task)
        if acting is None:
            return ExploreReport(env_steps=0, episodes=0, version=0, accepted=False)
        version, policy = acting
        space = self.setup.spaces[task.spec.population]
        pools = {}
        for seat in task.opponents:
            support = seat.support()
            probs = np.asarray([p for _, p in support], dtype=float)
            pools[seat.agent] = ([self.executor.policy(pid) for pid, _ in support], probs / probs.sum())
        played, steps = self.executor.train_rollout.explore(
            learner=policy, learner_agents=space.agents, opponents=pools, max_episodes=episodes, max_steps=None,
            seed=seed, self_play=task.budget.self_play, opponent_epsilon=task.budget.opponent_epsilon,
        )
        accepted = bool(ray.get(self.data.put.remote(key, version, played, steps)))
        return ExploreReport(env_steps=steps, episodes=len(played), version=version, accepted=accepted)

    def _acting_policy(self, key: str, task: TrainTask) -> tuple[int, Policy] | None:
        """The learner's newest weights, pulled only when newer than the copy held."""
        have, policy = self._acting.get(key, (0, None))
        pulled = ray.get(self.params.pull.remote(key, have))
        if pulled is not None:
            version, (ref,) = pulled
            if policy is None:
                policy = self.executor.algorithm.make_policy(space=self.setup.spaces[task.spec.population],
                                                             seed=task.seed)
            policy.set_weights(writable(ray.get(ref)))
            self._acting.pop(key, None)
            self._acting[key] = (version, policy)
            while len(self._acting) > ACTING_CACHE:
                self._acting.pop(next(iter(self._acting)))
            have = version
        return None if policy is None else (have, policy)


class LearnerActor(_Actor):
    """One population's learner: runs its oracle, or trains on the workers' episodes."""

    def __init__(self, setup: RunSetup, local: LocalComponents, num_cpus: float, population: str,
                 params: Any, data: Any, max_staleness: int) -> None:
        super().__init__(setup, local, num_cpus)
        if self._error is None:
            self.agent = AsyncAgentInterface(
                space=setup.spaces[population], algorithm=self.executor.algorithm, env=self.executor.env,
                rollout=self.executor.train_rollout, params=params, data=data, max_staleness=max_staleness,
            )

    def use_servers(self, params: Any, data: Any) -> None:
        """Call these servers from now on (they replace dead ones)."""
        if self._error is None:
            self.agent.params_actor, self.agent.data_actor = params, data

    def train(self, task: TrainTask, key: str) -> TrainResult:
        """Produce the task's policy; training episodes and weights go under ``key``."""
        return self.agent.train_attempt(task, key, self.executor.policy)

    def learn(self, task: LearnTask) -> LearnResult:
        """Co-train the task's learners in this process (the ``marl`` scenario's step)."""
        return self.executor.learn(task)
