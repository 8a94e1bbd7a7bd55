"""Scenario ``best_response_dynamics``: every population answers the others' newest policy.

Each iteration, every population asks its algorithm for the exact best response to the
profile of every population's newest policy, and the answers become the newest
policies. The newest profile is then played, and each seat's return reported. It needs
algorithms that answer exactly (``exact_matrix_br`` on the ``matrix`` env); in
rock-paper-scissors its policies cycle, which is why PSRO mixes over the population
instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from popmarl.api import (BestResponseTask, ConfigError, EvalTask, IterationState, IterativeScenario, MetaStrategy,
                         PolicySpec, Work, stream_seed)


@attrs.define(kw_only=True)
class DynamicsState(IterationState):
    """Every population's policies, oldest first (the newest is the one played)."""

    policies: dict[str, list[str]]

    def to_checkpoint(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {"policies": self.policies}, {}

    @classmethod
    def from_checkpoint(cls, common: dict[str, Any], saved: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                        scenario: Any) -> DynamicsState:
        return cls(**common, policies={pop: list(ids) for pop, ids in saved["policies"].items()})

    def held_policies(self) -> list[str]:
        return [ids[-1] for ids in self.policies.values()]


class BestResponseDynamics(IterativeScenario[DynamicsState]):
    """Simultaneous best-response dynamics over the populations' newest policies."""

    State = DynamicsState

    def check_populations(self, populations: Mapping[str, Any]) -> None:
        for population, agent in populations.items():
            if not agent.answers:
                raise ConfigError(f"algorithm: {agent.algorithm_name} (population {population}) gives no exact best "
                                  "response; scenario best_response_dynamics needs one, e.g. exact_matrix_br")

    def start(self) -> DynamicsState:
        policies = {}
        for population, agent in self.ctx.populations.items():
            pid = f"{population}/0"
            self.publish(pid, agent.initial_policy(seed=self.ctx.config.seed).get_weights())
            policies[population] = [pid]
        return DynamicsState(policies=policies)

    def iterate(self, state: DynamicsState, iteration: int) -> Work:
        ctx, seed = self.ctx, self.ctx.config.seed
        newest = {seat: state.policies[ctx.mapping.population_of[seat]][-1] for seat in ctx.env.agents}
        tasks = [BestResponseTask(population=pop, seed=stream_seed(seed, "dynamics.respond", iteration, k),
                                  snapshot=PolicySpec(policy_id=f"{pop}/{iteration}", population=pop,
                                                      algorithm=agent.algorithm_name, iteration=iteration),
                                  opponents=MetaStrategy.pure(newest))
                 for k, (pop, agent) in enumerate(ctx.populations.items())]
        for task, answer in zip(tasks, ctx.backend.best_respond(tasks)):
            if answer.policy is None:
                raise ConfigError(f"algorithm of population {task.population}: declined to answer")
            self.publish(task.snapshot.policy_id, answer.policy.weights)
            state.policies[task.population].append(task.snapshot.policy_id)
        played = {seat: state.policies[ctx.mapping.population_of[seat]][-1] for seat in ctx.env.agents}
        (result,) = ctx.backend.evaluate([EvalTask(index=(0,), profile=played,
                                                   episodes=ctx.config.evaluation.episodes_per_entry,
                                                   seed=stream_seed(seed, "dynamics.eval", iteration))])
        return Work(env_steps=result.env_steps, details=result.returns)

    def report(self, state: DynamicsState, work: Work) -> dict[str, Any]:
        return {f"return/{seat}": float(value) for seat, value in zip(self.ctx.env.agents, work.details)}

    def details(self, state: DynamicsState) -> dict[str, Any]:
        return {"populations": {pop: {"policies": ids, "meta_strategy": [0.0] * (len(ids) - 1) + [1.0]}
                                for pop, ids in state.policies.items()}}
