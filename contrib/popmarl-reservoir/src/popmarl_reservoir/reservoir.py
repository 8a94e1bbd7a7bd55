"""Scenario ``reservoir_self_play``: self-play against a reservoir of past snapshots.

One population plays every seat (``agents.mapping: shared``). Each iteration is one
train task: the population's learner (its key is the population; it carries on from
one iteration to the next) plays one seat per episode against opponents drawn per
episode from the reservoir, at most ``capacity`` of its own past snapshots; snapshot
``i`` is drawn with weight ``(i + 1) ** recency`` (0: uniformly). The new snapshot is
evaluated against every reservoir member in every seat, then offered to the reservoir
(reservoir sampling, seeded, once it is full). The learner's whole state is
checkpointed with each iteration, so a resumed run continues exactly. The run stops
by ``stopping.max_iterations`` or ``stopping.max_wall_time_s``, whichever comes first;
a config that sets neither gets the scenario default (10 iterations).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from popmarl.api import (ConfigError, EvalTask, IterationState, IterativeScenario, LearnerInit, LearnerSpec, MetaStrategy,
                         PolicySpec, TrainTask, Work, stream_seed)

#: The ``training`` keys of one budget this scenario uses; the others it refuses.
UNUSED_TRAINING = ("window", "target_return", "target_win_rate", "patience", "min_env_steps", "keep", "self_play",
                   "opponent_epsilon", "init", "pipeline")


@attrs.frozen(kw_only=True)
class ReservoirConfig:
    """``capacity``: most snapshots kept; ``recency``: how much newer ones are drawn more."""

    capacity: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    recency: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))


@attrs.define(kw_only=True)
class ReservoirState(IterationState):
    """The snapshots so far (``policies``), the reservoir's members, and whether the
    learner is to be rebuilt from its checkpointed state (a resumed run's first iteration)."""

    policies: list[str]
    reservoir: list[str]
    restoring: bool = False

    def to_checkpoint(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {"policies": self.policies, "reservoir": self.reservoir}, {}

    @classmethod
    def from_checkpoint(cls, common: dict[str, Any], saved: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                        scenario: Any) -> ReservoirState:
        return cls(**common, policies=list(saved["policies"]), reservoir=list(saved["reservoir"]),
                   restoring=bool(common["learners"]))

    def held_policies(self) -> list[str]:
        return list(self.reservoir)


class ReservoirSelfPlay(IterativeScenario[ReservoirState]):
    """Self-play of one population against a reservoir of its own past snapshots."""

    Config = ReservoirConfig
    State = ReservoirState
    config: ReservoirConfig

    def check(self, *, config: Any, mapping: Any) -> None:
        if len(mapping.populations) != 1:
            raise ConfigError("agents.mapping: scenario reservoir_self_play needs one population playing every "
                              f"seat (set it to shared); got {', '.join(mapping.populations)}")
        unused = config.training.given(UNUSED_TRAINING)
        if unused:
            raise ConfigError(f"training.{unused[0]}: not used by scenario reservoir_self_play (its learner trains "
                              "for max_env_steps, max_episodes or max_wall_time_s each iteration); remove it")

    def check_populations(self, populations: Mapping[str, Any]) -> None:
        for population, agent in populations.items():
            if not agent.learns:
                raise ConfigError(f"algorithm: {agent.algorithm_name} (population {population}) does not learn; "
                                  "scenario reservoir_self_play trains its population (e.g. dqn, ppo, softmax_pg)")

    def start(self) -> ReservoirState:
        population = self.ctx.mapping.populations[0]
        first = f"{population}/0"
        self.publish(first, self.ctx.populations[population].initial_policy(seed=self.ctx.config.seed).get_weights())
        return ReservoirState(policies=[first], reservoir=[first])

    def iterate(self, state: ReservoirState, iteration: int) -> Work:
        ctx, pop, reservoir = self.ctx, self.ctx.mapping.populations[0], state.reservoir
        agents, seed = ctx.env.agents, ctx.config.seed
        snapshot = PolicySpec(policy_id=f"{pop}/{iteration}", population=pop,
                              algorithm=ctx.populations[pop].algorithm_name, iteration=iteration)
        if state.restoring:
            init = LearnerInit.restore(state.learners[pop])
        elif pop in state.learners:
            init = LearnerInit(kind="continue")
        else:
            init = LearnerInit.start_from(state.policies[0])
        task = TrainTask(
            learners=(LearnerSpec(key=pop, population=pop, seats=agents, one_seat=True,
                                  seed=stream_seed(seed, "reservoir.train", iteration, 0), init=init,
                                  snapshot=snapshot),),
            opponents=MetaStrategy.independent({a: (reservoir, self._mixture(reservoir)) for a in agents}),
            budget=ctx.config.training.budget(follows_learning=False), seed=stream_seed(seed, "reservoir.train", iteration, 1),
            return_state=True)
        (result,) = ctx.backend.train([task])
        self.publish(snapshot.policy_id, result.policies[0].weights)
        tasks = [EvalTask(index=(k, j), profile={a: snapshot.policy_id if a == seat else old for a in agents},
                          episodes=ctx.config.evaluation.episodes_per_entry,
                          seed=stream_seed(seed, "reservoir.eval", iteration))
                 for k, seat in enumerate(agents) for j, old in enumerate(reservoir)]
        if len(reservoir) < self.config.capacity:
            reservoir.append(snapshot.policy_id)
        elif (slot := int(np.random.default_rng(stream_seed(seed, "reservoir.draw", iteration)).integers(
                iteration + 1))) < self.config.capacity:
            reservoir[slot] = snapshot.policy_id  # Algorithm R: each of the iteration + 1 snapshots equally likely
        state.learners, state.restoring = {pop: result.states[pop]}, False
        state.policies.append(snapshot.policy_id)
        returns = [r.returns[r.index[0]] for r in ctx.backend.evaluate(tasks)]
        return Work(env_steps=result.env_steps, details=(result.learner_metrics[pop], float(np.mean(returns))))

    def report(self, state: ReservoirState, work: Work) -> dict[str, Any]:
        learned, mean_return = work.details
        return {"reservoir_size": len(state.reservoir), "mean_return_vs_reservoir": mean_return,
                **{f"train/{k}": v for k, v in learned.items()}}

    def _mixture(self, reservoir: list[str]) -> np.ndarray:
        """Each member's draw probability: snapshot ``i`` weighs ``(i + 1) ** recency``."""
        weights = np.array([int(pid.rsplit("/", 1)[1]) + 1.0 for pid in reservoir]) ** self.config.recency
        return weights / weights.sum()

    def details(self, state: ReservoirState) -> dict[str, Any]:
        drawn = dict(zip(state.reservoir, self._mixture(state.reservoir).tolist()))
        return {"reservoir": state.reservoir,
                "populations": {self.ctx.mapping.populations[0]: {
                    "policies": state.policies, "meta_strategy": [drawn.get(p, 0.0) for p in state.policies]}}}
