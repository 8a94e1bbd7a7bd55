"""A marl run's state (the record a checkpoint holds, written and read by its codec) and
the scenario's start (its frozen populations copied in).

:class:`MARLBase` is the part of :class:`~popmarl.scenario.marl.scenario.MARL` that the
loop builds on: its learners (one per learning population, or one team) and its start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from popmarl.data.seeds import stream_seed
from popmarl.errors import CheckpointError
from popmarl.scenario.base import IterationState, IterativeScenario
from popmarl.scenario.marl.evaluation import evaluate
from popmarl.scenario.marl.frozen_runs import load_frozen, read_sources


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

    def to_checkpoint(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        saved: dict[str, Any] = {"policies": self.policies, "initial_returns": self.initial_returns}
        if self.mixtures:  # only then: the checkpoint of any other run is as it was
            saved.update({"frozen_mixtures": self.mixtures, "frozen_sources": self.sources})
        return saved, {}

    @classmethod
    def from_checkpoint(cls, common: dict[str, Any], saved: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                        scenario: Any) -> MARLState:
        return cls(**common, policies={p: list(ids) for p, ids in saved["policies"].items()},
                   initial_returns=saved["initial_returns"], restoring=bool(common["learners"]),
                   mixtures={p: [float(w) for w in m] for p, m in saved.get("frozen_mixtures", {}).items()},
                   sources=dict(saved.get("frozen_sources", {})))

    def held_policies(self) -> list[str]:
        """Each population's newest policy, and every policy of a mixture."""
        return [pid for p, ids in self.policies.items() for pid in (ids if p in self.mixtures else ids[-1:])]


class MARLBase(IterativeScenario[MARLState]):
    """The learners and the start of a marl run."""

    State = MARLState
    config: MARLConfig

    def _learners(self) -> tuple[str, ...]:
        return tuple(p for p in self.ctx.mapping.populations if p not in self.config.frozen)

    def _teams(self) -> tuple[tuple[str, ...], ...]:
        """The learners, each as its populations (its key, the lead, first): one team of
        every learning population where they all use one algorithm that trains teams
        (:attr:`~popmarl.interfaces.algorithm.Algorithm.trains_team`), else one learner each."""
        learning = self._learners()
        agents = [self.ctx.populations[p] for p in learning]
        if len(learning) > 1 and len({a.algorithm_name for a in agents}) == 1 and agents[0].algorithm.trains_team:
            return (learning,)
        return tuple((p,) for p in learning)

    def start(self) -> MARLState:
        ctx = self.ctx
        sources = read_sources(self.config.frozen, ctx.populations)
        policies: dict[str, list[str]] = {}
        mixtures: dict[str, list[float]] = {}
        for k, population in enumerate(ctx.mapping.populations):
            if population in sources:
                # Copied, so that the run, its resume and `popmarl eval` of it never read the other run again.
                copied = sources[population]
                policies[population] = [f"{population}/{j}" for j in range(len(copied.weights))]
                for pid, weights in zip(policies[population], copied.weights):
                    self.publish(pid, weights)
                mixtures[population] = copied.mixture.tolist()
                continue
            policy = ctx.populations[population].make_policy(seed=stream_seed(ctx.config.seed, "marl.initial", k))
            weights = policy.get_weights()
            source = self.config.frozen.get(population, "initial")
            if isinstance(source, str) and source != "initial":
                weights = load_frozen(source, population)
                policy.set_weights(weights)  # fails early if the file does not fit the algorithm
            pid = f"{population}/0"
            self.publish(pid, weights)
            policies[population] = [pid]
        returns, _ = evaluate(ctx, policies, mixtures, iteration=0)
        return MARLState(iteration=0, policies=policies, history=[], initial_returns=returns, mixtures=mixtures,
                         sources={p: s.describe() for p, s in sources.items()})

    def restored(self, state: MARLState) -> None:
        missing = [team[0] for team in self._teams() if team[0] not in state.learners]
        if state.iteration > 0 and missing:
            raise CheckpointError(f"{self.ctx.run_dir.state_file}: no learner state for {', '.join(missing)} (a "
                                  "checkpoint of an older popmarl, or damaged); the run cannot continue identically")
