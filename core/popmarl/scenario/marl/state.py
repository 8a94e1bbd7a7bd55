"""A marl run's state: what a checkpoint holds, and the scenario's start (its frozen
populations copied in), checkpoint and restore.

:class:`MARLBase` is the part of :class:`~popmarl.scenario.marl.scenario.MARL` that the
loop builds on: its learners (one per learning population, or one team) and the state
it writes to and reads from the run directory.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from popmarl.data.seeds import derive_seed
from popmarl.errors import CheckpointError
from popmarl.scenario.base import IterationState, IterativeScenario, RunContext
from popmarl.scenario.marl.evaluation import evaluate
from popmarl.scenario.marl.frozen_runs import RunSource, load_frozen, read_sources


@attrs.frozen(kw_only=True)
class MARLConfig:
    """``frozen``: population -> ``initial`` (its untrained policy), a ``.npz`` policy
    file, an earlier run's directory, or ``{run: DIR, population: NAME, iteration: N,
    main: BOOL}`` (:class:`~popmarl.scenario.marl.frozen_runs.FrozenRun`); those populations do not learn."""

    frozen: dict[str, str | dict[str, Any]] = attrs.field(factory=dict)


@attrs.define(kw_only=True)
class MARLState(IterationState):
    """Everything a checkpoint holds; enough to continue bit-identically."""

    policies: dict[str, list[str]]
    initial_returns: dict[str, float]
    #: Whether the learners are to be rebuilt from ``learners`` (a resumed run's first iteration).
    restoring: bool = False
    #: The populations frozen as a mixture (another run's,
    #: :class:`~popmarl.scenario.marl.frozen_runs.FrozenRun`): the probabilities of their
    #: policies (``policies``), and where they came from.
    mixtures: dict[str, list[float]] = attrs.field(factory=dict)
    sources: dict[str, dict[str, Any]] = attrs.field(factory=dict)


class MARLBase(IterativeScenario):
    """The learners and checkpointed state of a marl run."""

    config: MARLConfig
    ctx: RunContext
    #: The frozen populations read from other runs (by :meth:`check_agents`, or at the start).
    _sources: dict[str, RunSource] | None = None

    def _learners(self) -> tuple[str, ...]:
        return tuple(p for p in self.ctx.mapping.populations if p not in self.config.frozen)

    def _teams(self) -> tuple[tuple[str, ...], ...]:
        """The learners, each as its populations (its key, the lead, first): one team of
        every learning population where they all use one algorithm that trains teams
        (:attr:`~popmarl.interfaces.algorithm.Algorithm.trains_team`), else one learner each."""
        learning = self._learners()
        agents = [self.ctx.agents[p] for p in learning]
        if len(learning) > 1 and len({a.algorithm_name for a in agents}) == 1 and agents[0].algorithm.trains_team:
            return (learning,)
        return tuple((p,) for p in learning)

    def initialise(self) -> MARLState:
        ctx = self.ctx
        if self._sources is None:
            self._sources = read_sources(self.config.frozen, ctx.agents)
        policies: dict[str, list[str]] = {}
        mixtures: dict[str, list[float]] = {}
        for k, population in enumerate(ctx.mapping.populations):
            if population in self._sources:
                # Copied, so that the run, its resume and `popmarl eval` of it never read the other run again.
                copied = self._sources[population]
                policies[population] = [f"{population}/{j}" for j in range(len(copied.weights))]
                for pid, weights in zip(policies[population], copied.weights):
                    self.publish(pid, weights)
                mixtures[population] = copied.mixture.tolist()
                continue
            policy = ctx.agents[population].make_policy(seed=derive_seed(ctx.config.seed, 0, k))
            weights = policy.get_weights()
            source = self.config.frozen.get(population, "initial")
            if isinstance(source, str) and source != "initial":
                weights = load_frozen(source, population)
                policy.set_weights(weights)  # fails early if the file does not fit the algorithm
            pid = f"{population}/0"
            self.publish(pid, weights)
            policies[population] = [pid]
        returns, _ = evaluate(ctx, policies, mixtures, iteration=0)
        state = MARLState(iteration=0, policies=policies, history=[], initial_returns=returns, mixtures=mixtures,
                          sources={p: s.describe() for p, s in self._sources.items()})
        self._commit(state)
        return state

    def _commit(self, state: MARLState) -> None:
        ctx = self.ctx
        saved = {"iteration": state.iteration, "policies": state.policies, "history_length": len(state.history),
                 "initial_returns": state.initial_returns, "env_steps": state.env_steps,
                 "wall_time_s": state.wall_time_s}
        if state.mixtures:  # only then: the checkpoint of any other run is as it was
            saved.update({"frozen_mixtures": state.mixtures, "frozen_sources": state.sources})
        last = state.history[-1] if state.history else {}
        returns = np.array([last.get(f"mean_return/{p}", np.nan) for p in ctx.mapping.populations])
        self.commit(saved, {"mean_returns": returns}, state.history, learners=state.learners)

    def restore(self) -> MARLState:
        ctx = self.ctx
        saved, _ = ctx.run_dir.load_state()
        policies = {p: list(ids) for p, ids in saved["policies"].items()}
        mixtures = {p: [float(w) for w in m] for p, m in saved.get("frozen_mixtures", {}).items()}
        for population, ids in policies.items():
            for pid in ids if population in mixtures else ids[-1:]:
                self.publish(pid, ctx.run_dir.load_policy(pid), announce=False)
        resumed = self.resumed(saved)
        missing = [team[0] for team in self._teams() if team[0] not in resumed["learners"]]
        if resumed["iteration"] > 0 and missing:
            raise CheckpointError(f"{ctx.run_dir.state_file}: no learner state for {', '.join(missing)} (a checkpoint "
                                  "of an older popmarl, or damaged); the run cannot continue identically")
        return MARLState(**resumed, policies=policies, initial_returns=saved["initial_returns"],
                         restoring=bool(resumed["learners"]), mixtures=mixtures,
                         sources=dict(saved.get("frozen_sources", {})))
