"""PSRO's state (the record a checkpoint holds, written and read by its codec) and the
scenario's start.

:class:`PSROBase` is the part of :class:`~popmarl.scenario.psro.scenario.PSRO` that the
others build on: its payoff table (grown and solved), its first policies and the files
derived from its state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from popmarl.data.population import policy_id
from popmarl.data.seeds import stream_seed
from popmarl.gametheory.payoffs import PayoffTable, evaluate_missing
from popmarl.interfaces.solver import SolverResult, solve_checked
from popmarl.scenario.base import IterationState, IterativeScenario
from popmarl.scenario.meta_game import meta_arrays, read_table, table_arrays

if TYPE_CHECKING:
    from popmarl.scenario.psro.strategies import ResponseStrategy


@attrs.define(kw_only=True)
class PSROState(IterationState):
    """Everything a checkpoint holds; enough to continue bit-identically."""

    policies: dict[str, list[str]]
    table: PayoffTable
    meta: tuple[np.ndarray, ...]
    solver_metrics: dict[str, Any]
    #: A joint solver's distribution over profiles (``meta`` holds its marginals).
    joint: np.ndarray | None = None

    def to_checkpoint(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        arrays = {**table_arrays(self.table), **meta_arrays(self.meta)}
        if self.joint is not None:
            arrays["joint"] = self.joint
        return {"policies": self.policies, "solver_metrics": self.solver_metrics}, arrays

    @classmethod
    def from_checkpoint(cls, common: dict[str, Any], saved: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                        scenario: Any) -> PSROState:
        table, meta = read_table(arrays, scenario.ctx.env.agents)
        return cls(**common, policies={p: list(ids) for p, ids in saved["policies"].items()}, table=table, meta=meta,
                   solver_metrics=saved["solver_metrics"], joint=arrays.get("joint"))

    def held_policies(self) -> list[str]:
        return [pid for ids in self.policies.values() for pid in ids]


class PSROBase(IterativeScenario[PSROState]):
    """PSRO's policies, payoff table and checkpointed state."""

    State = PSROState
    #: How the populations answer the meta-strategy (set when the run starts).
    strategy: ResponseStrategy

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._restoring: set[str] = set()
        self._outcomes: dict[tuple[int, ...], np.ndarray] = {}  # seat 0's win/draw/loss counts per entry

    def start(self) -> PSROState:
        ctx = self.ctx
        policies: dict[str, list[str]] = {}
        for k, population in enumerate(ctx.mapping.populations):
            policy = ctx.populations[population].initial_policy(seed=stream_seed(ctx.config.seed, "psro.initial", k))
            pid = policy_id(population, 0)
            self.publish(pid, policy.get_weights())
            policies[population] = [pid]
        table, steps, _ = self._expand(PayoffTable.empty(ctx.env.agents), policies, iteration=0)
        result = self._solve(table)
        return PSROState(iteration=0, policies=policies, table=table, meta=result.mixtures,
                         solver_metrics=dict(result.metrics), history=[], env_steps=steps, joint=result.joint)

    def restored(self, state: PSROState) -> None:
        self._restoring = set(state.learners)

    def write_outputs(self, state: PSROState) -> None:
        state.table.save(self.ctx.run_dir.payoffs_file, self._axis_ids(state.policies))

    def _axis_ids(self, policies: Mapping[str, Sequence[str]]) -> list[list[str]]:
        return [list(policies[self.ctx.mapping.population_of[a]]) for a in self.ctx.env.agents]

    def _expand(self, table: PayoffTable, policies: Mapping[str, Sequence[str]], *,
                iteration: int) -> tuple[PayoffTable, int, int]:
        """Grow the table to the pools' sizes and evaluate only the new entries; return it,
        the env steps sampled and how many entries were evaluated exactly."""
        ctx = self.ctx
        return evaluate_missing(table, self._axis_ids(policies), backend=ctx.backend, agents=ctx.env.agents,
                                episodes=ctx.config.evaluation.episodes_per_entry,
                                seed=stream_seed(ctx.config.seed, "psro.eval", iteration))

    def _solve(self, table: PayoffTable) -> SolverResult:
        """The meta-solver's answer for ``table``, checked (a wrong one fails the run, naming the solver)."""
        return self.solve_values(table.values)

    def solve_values(self, values: np.ndarray) -> SolverResult:
        ctx = self.ctx
        return solve_checked(ctx.solver, values, name=ctx.config.solver.name, seats=ctx.env.agents)
