"""Scenario ``reservoir_self_play``: self-play against a reservoir of past snapshots.

One population plays every seat (``agents.mapping: shared``). Each iteration is one
train task: the population's learner (its key is the population; it carries on from
one iteration to the next) plays one seat per episode against opponents drawn per
episode from the reservoir, at most ``capacity`` of its own past snapshots; snapshot
``i`` is drawn with weight ``(i + 1) ** recency`` (0: uniformly). The new snapshot is
evaluated against every reservoir member in every seat, then offered to the reservoir
(reservoir sampling, seeded, once it is full). The learner's whole state is
checkpointed with each iteration, so a resumed run continues exactly.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from popmarl import (ConfigError, EvalTask, IterativeScenario, LearnerInit, LearnerSpec, Opponents, PolicySpec,
                     RunContext, TrainBudget, TrainTask)


@attrs.frozen(kw_only=True)
class ReservoirConfig:
    """``capacity``: most snapshots kept; ``recency``: how much newer ones are drawn more."""

    capacity: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    recency: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))


class ReservoirSelfPlay(IterativeScenario):
    Config = ReservoirConfig
    config: ReservoirConfig
    ctx: RunContext

    def check(self, *, config: Any, mapping: Any) -> None:
        if len(mapping.populations) != 1:
            raise ConfigError("agents.mapping: scenario reservoir_self_play needs one population playing every "
                              f"seat (set it to shared); got {', '.join(mapping.populations)}")

    def initialise(self) -> dict[str, Any]:
        pop = self.ctx.mapping.populations[0]
        self._publish(f"{pop}/0", self.ctx.agents[pop].initial_policy(seed=self.ctx.config.seed).get_weights())
        state = {"iteration": 0, "policies": [f"{pop}/0"], "reservoir": [f"{pop}/0"], "env_steps": 0,
                 "history": [], "learner": None, "init": LearnerInit.start_from(f"{pop}/0")}
        self._commit(state)
        return state

    def restore(self) -> dict[str, Any]:
        run_dir = self.ctx.run_dir
        saved, _ = run_dir.load_state()
        for pid in saved["reservoir"]:
            self.ctx.backend.add_policy(pid, run_dir.load_policy(pid))
        self.resume_history(saved)
        learner = run_dir.load_learners(saved)[self.ctx.mapping.populations[0]] if saved["iteration"] else None
        init = LearnerInit.restore(learner) if learner else LearnerInit.start_from(saved["reservoir"][0])
        return {**{k: saved[k] for k in ("iteration", "policies", "reservoir", "env_steps", "history")},
                "learner": learner, "init": init}

    def loop(self, state: dict[str, Any]) -> tuple[str, str]:
        stopping = self.ctx.config.stopping
        while state["iteration"] < stopping.max_iterations:
            if stopping.max_wall_time_s is not None and self.elapsed() >= stopping.max_wall_time_s:
                return "stopped", "max_wall_time_s"
            self._iterate(state)
        return "completed", "max_iterations"

    def _iterate(self, state: dict[str, Any]) -> None:
        ctx, pop, reservoir = self.ctx, self.ctx.mapping.populations[0], state["reservoir"]
        iteration, agents, training = state["iteration"] + 1, ctx.env.agents, ctx.config.training
        seeds = [int(s) for s in np.random.SeedSequence([ctx.config.seed, iteration]).generate_state(4) >> 1]
        budget = TrainBudget(max_env_steps=training.max_env_steps, max_episodes=training.max_episodes,
                             max_wall_time_s=training.max_wall_time_s, episodes_per_update=training.episodes_per_update)
        opponents = tuple(Opponents(agent=a, population=pop, policy_ids=tuple(reservoir),
                                    mixture=self._mixture(reservoir)) for a in agents)
        snapshot = PolicySpec(policy_id=f"{pop}/{iteration}", population=pop,
                              algorithm=ctx.agents[pop].algorithm_name, iteration=iteration)
        learner = LearnerSpec(key=pop, population=pop, seats=ctx.mapping.agents_of(pop), one_seat=True,
                              seed=seeds[0], init=state["init"], snapshot=snapshot)
        (result,) = ctx.backend.train([TrainTask(learners=(learner,), seed=seeds[1], budget=budget,
                                                 opponents=opponents, return_state=True)])
        new = result.policies[0].spec.policy_id
        self._publish(new, result.policies[0].weights)
        tasks = [EvalTask(index=(k, j), profile={a: new if a == seat else old for a in agents},
                          episodes=ctx.config.evaluation.episodes_per_entry, seed=seeds[2])
                 for k, seat in enumerate(agents) for j, old in enumerate(reservoir)]
        returns = [r.returns[r.index[0]] for r in ctx.backend.evaluate(tasks)]
        if len(reservoir) < self.config.capacity:
            reservoir.append(new)
        elif (slot := int(np.random.default_rng(seeds[3]).integers(iteration + 1))) < self.config.capacity:
            reservoir[slot] = new  # Algorithm R: each of the iteration + 1 snapshots is kept equally likely
        state.update(iteration=iteration, env_steps=state["env_steps"] + result.env_steps,
                     learner=result.states[pop], init=LearnerInit(kind="continue"))
        state["policies"].append(new)
        metrics = {"iteration": iteration, "reservoir_size": len(reservoir), "mean_return_vs_reservoir":
                   float(np.mean(returns)), "min_return_vs_reservoir": float(np.min(returns)),
                   "env_steps": state["env_steps"], "episodes": result.episodes, "wall_time_s": self.elapsed(),
                   **{f"train/{k}": v for k, v in result.learner_metrics.get(pop, {}).items()}}
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
        saved = {k: state[k] for k in ("iteration", "policies", "reservoir", "env_steps")}
        saved.update(history_length=len(state["history"]), wall_time_s=self.elapsed())
        learners = {state["learner"].key: state["learner"]} if state["learner"] else None
        self.commit(saved, {"reservoir_size": np.array(len(state["reservoir"]))}, state["history"], learners=learners)

    def summary(self, state: dict[str, Any] | None, status: str, reason: str) -> dict[str, Any]:
        summary = self.base_summary(status, reason)
        if state is not None:
            drawn = dict(zip(state["reservoir"], self._mixture(state["reservoir"]).tolist()))
            summary.update(iterations=state["iteration"], env_steps=state["env_steps"], reservoir=state["reservoir"],
                           populations={self.ctx.mapping.populations[0]: {
                               "policies": state["policies"], "meta_strategy": [drawn.get(p, 0.0) for p in state["policies"]]}})
        return summary
