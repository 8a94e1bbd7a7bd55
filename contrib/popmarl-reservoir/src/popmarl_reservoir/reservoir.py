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

from typing import Any

import attrs
import numpy as np

from popmarl.api import (ConfigError, EvalTask, IterativeScenario, LearnerInit, LearnerSpec, Opponents, PolicySpec,
                         TrainBudget, TrainTask)


@attrs.frozen(kw_only=True)
class ReservoirConfig:
    """``capacity``: most snapshots kept; ``recency``: how much newer ones are drawn more."""

    capacity: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    recency: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))


class ReservoirSelfPlay(IterativeScenario):
    """Self-play of one population against a reservoir of its own past snapshots."""

    Config = ReservoirConfig

    def check(self, *, config: Any, mapping: Any) -> None:
        if len(mapping.populations) != 1:
            raise ConfigError("agents.mapping: scenario reservoir_self_play needs one population playing every "
                              f"seat (set it to shared); got {', '.join(mapping.populations)}")

    def initialise(self) -> dict[str, Any]:
        first = f"{self.ctx.mapping.populations[0]}/0"
        self._publish(first, self.ctx.agents[first[:-2]].initial_policy(seed=self.ctx.config.seed).get_weights())
        state = {"iteration": 0, "policies": [first], "reservoir": [first], "env_steps": 0, "history": [],
                 "learner": None, "init": LearnerInit.start_from(first)}
        self._commit(state)
        return state

    def restore(self) -> dict[str, Any]:
        saved, _ = self.ctx.run_dir.load_state()
        for pid in saved["reservoir"]:
            self.ctx.backend.add_policy(pid, self.ctx.run_dir.load_policy(pid))
        self.resume_history(saved)
        learner = self.ctx.run_dir.load_learners(saved)[self.ctx.mapping.populations[0]] if saved["iteration"] else None
        return {**{k: saved[k] for k in ("iteration", "policies", "reservoir", "env_steps", "history")}, "learner": learner,
                "init": LearnerInit.restore(learner) if learner else LearnerInit.start_from(saved["policies"][0])}

    def loop(self, state: dict[str, Any]) -> tuple[str, str]:
        # The stopping conditions in force: the config's, or the scenario's defaults where it
        # sets none (any of max_iterations and max_wall_time_s may be unset).
        while (stop := self.stop_reason(state["iteration"], state["history"])) is None:
            self._iterate(state)
        return stop

    def _iterate(self, state: dict[str, Any]) -> None:
        ctx, pop, reservoir, t = self.ctx, self.ctx.mapping.populations[0], state["reservoir"], self.ctx.config.training
        iteration, agents = state["iteration"] + 1, ctx.env.agents
        seeds = [int(s) for s in np.random.SeedSequence([ctx.config.seed, iteration]).generate_state(4) >> 1]
        snapshot = PolicySpec(policy_id=f"{pop}/{iteration}", population=pop,
                              algorithm=ctx.agents[pop].algorithm_name, iteration=iteration)
        task = TrainTask(
            learners=(LearnerSpec(key=pop, population=pop, seats=agents, one_seat=True, seed=seeds[0],
                                  init=state["init"], snapshot=snapshot),),
            opponents=tuple(Opponents(agent=a, population=pop, policy_ids=tuple(reservoir),
                                      mixture=self._mixture(reservoir)) for a in agents),
            budget=TrainBudget(**{k: getattr(t, k) for k in ("max_env_steps", "max_episodes", "max_wall_time_s",
                                                              "episodes_per_update")}),
            seed=seeds[1], return_state=True)
        (result,) = ctx.backend.train([task])
        self._publish(snapshot.policy_id, result.policies[0].weights)
        tasks = [EvalTask(index=(k, j), profile={a: snapshot.policy_id if a == seat else old for a in agents},
                          episodes=ctx.config.evaluation.episodes_per_entry, seed=seeds[2])
                 for k, seat in enumerate(agents) for j, old in enumerate(reservoir)]
        if len(reservoir) < self.config.capacity:
            reservoir.append(snapshot.policy_id)
        elif (slot := int(np.random.default_rng(seeds[3]).integers(iteration + 1))) < self.config.capacity:
            reservoir[slot] = snapshot.policy_id  # Algorithm R: each of the iteration + 1 snapshots equally likely
        state.update(iteration=iteration, env_steps=state["env_steps"] + result.env_steps, learner=result.states[pop],
                     init=LearnerInit(kind="continue"), policies=[*state["policies"], snapshot.policy_id])
        metrics = {"iteration": iteration, "reservoir_size": len(reservoir), "mean_return_vs_reservoir":
                   float(np.mean([r.returns[r.index[0]] for r in ctx.backend.evaluate(tasks)])), "env_steps": state["env_steps"], "wall_time_s": self.elapsed(),
                   **{f"train/{k}": v for k, v in result.learner_metrics[pop].items()}}
        state["history"].append(metrics)
        self._commit(state)
        ctx.run_dir.append_metrics(metrics)
        ctx.hooks.iteration_end(ctx.info, iteration, metrics)

    def _mixture(self, reservoir: list[str]) -> np.ndarray:
        """Each member's draw probability: snapshot ``i`` weighs ``(i + 1) ** recency``."""
        weights = np.array([int(pid.rsplit("/", 1)[1]) + 1.0 for pid in reservoir]) ** self.config.recency
        return weights / weights.sum()

    def _publish(self, pid: str, weights: Any) -> None:
        self.ctx.backend.add_policy(pid, weights)
        self.ctx.run_dir.save_policy(pid, weights)
        self.ctx.hooks.policy_added(self.ctx.info, self.ctx.mapping.populations[0], pid)

    def _commit(self, state: dict[str, Any]) -> None:
        saved = {k: state[k] for k in ("iteration", "policies", "reservoir", "env_steps")} | {
            "history_length": len(state["history"]), "wall_time_s": self.elapsed()}
        learners = {state["learner"].key: state["learner"]} if state["learner"] else None
        self.commit(saved, {"reservoir_size": np.array(len(state["reservoir"]))}, state["history"], learners=learners)

    def summary(self, state: dict[str, Any] | None, status: str, reason: str) -> dict[str, Any]:
        summary = self.base_summary(status, reason)
        if state is not None:
            drawn = dict(zip(state["reservoir"], self._mixture(state["reservoir"]).tolist()))
            summary.update(iterations=state["iteration"], env_steps=state["env_steps"], reservoir=state["reservoir"],
                           populations={self.ctx.mapping.populations[0]: {"policies": state["policies"],
                                                                          "meta_strategy": [drawn.get(p, 0.0) for p in state["policies"]]}})
        return summary
