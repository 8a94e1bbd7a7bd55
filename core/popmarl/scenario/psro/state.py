"""PSRO's state: what a checkpoint holds, and the scenario's start, checkpoint and restore.

:class:`PSROBase` is the part of :class:`~popmarl.scenario.psro.scenario.PSRO` that the
others build on: the policies it holds, its payoff table (grown and solved) and the state
it writes to and reads from the run directory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from popmarl.data.policies import Weights
from popmarl.data.population import policy_id
from popmarl.data.seeds import derive_seed
from popmarl.engine.executor import population_of
from popmarl.gametheory.payoffs import PayoffTable, evaluate_missing
from popmarl.interfaces.policy import Policy
from popmarl.interfaces.solver import SolverResult, solve_checked
from popmarl.scenario.base import IterationState, IterativeScenario, RunContext
from popmarl.scenario.meta_game import meta_arrays, read_table, table_arrays


@attrs.define(kw_only=True)
class PSROState(IterationState):
    """Everything a checkpoint holds; enough to continue bit-identically."""

    policies: dict[str, list[str]]
    table: PayoffTable
    meta: tuple[np.ndarray, ...]
    solver_metrics: dict[str, Any]
    #: A joint solver's distribution over profiles (``meta`` holds its marginals).
    joint: np.ndarray | None = None


class PSROBase(IterativeScenario):
    """PSRO's policies, payoff table and checkpointed state."""

    ctx: RunContext

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pipeline = 1
        self._pipeline_eval_steps = 0  # the active learners' payoff entries of this iteration (pipeline)
        self.policies: dict[str, Policy] = {}
        self._restoring: set[str] = set()
        self._outcomes: dict[tuple[int, ...], np.ndarray] = {}  # seat 0's win/draw/loss counts per entry

    def initialise(self) -> PSROState:
        ctx = self.ctx
        policies: dict[str, list[str]] = {}
        for k, population in enumerate(ctx.mapping.populations):
            policy = ctx.agents[population].initial_policy(seed=derive_seed(ctx.config.seed, 0, k))
            pid = policy_id(population, 0)
            self._add(pid, policy.get_weights())
            policies[population] = [pid]
        table, steps, _ = self._expand(PayoffTable.empty(ctx.env.agents), policies, iteration=0)
        result = self._solve(table)
        state = PSROState(iteration=0, policies=policies, table=table, meta=result.mixtures,
                          solver_metrics=dict(result.metrics), history=[], env_steps=steps, joint=result.joint)
        state.wall_time_s = self.elapsed()
        self._commit(state)
        return state

    def _commit(self, state: PSROState) -> None:
        ctx = self.ctx
        arrays = {**table_arrays(state.table), **meta_arrays(state.meta)}
        if state.joint is not None:
            arrays["joint"] = state.joint
        saved = {"iteration": state.iteration, "policies": state.policies, "history_length": len(state.history),
                 "solver_metrics": state.solver_metrics, "env_steps": state.env_steps,
                 "wall_time_s": state.wall_time_s}
        self.commit(saved, arrays, state.history, learners=state.learners, after=lambda: state.table.save(
            ctx.run_dir.payoffs_file, self._axis_ids(state.policies)))

    def restore(self) -> PSROState:
        ctx = self.ctx
        saved, arrays = ctx.run_dir.load_state()
        policies = {p: list(ids) for p, ids in saved["policies"].items()}
        for ids in policies.values():
            for pid in ids:
                self._add(pid, ctx.run_dir.load_policy(pid), announce=False)
        table, meta = read_table(arrays, ctx.env.agents)
        state = PSROState(**self.resumed(saved), policies=policies, table=table, meta=meta,
                          solver_metrics=saved["solver_metrics"], joint=arrays.get("joint"))
        table.save(ctx.run_dir.payoffs_file, self._axis_ids(policies))  # a kill may have left it behind
        self._restoring = set(state.learners)
        return state

    def _add(self, pid: str, weights: Weights, *, announce: bool = True) -> None:
        self.policies[pid] = self.ctx.agents[population_of(pid)].frozen(weights)
        self.publish(pid, weights, announce=announce)

    def _axis_ids(self, policies: Mapping[str, Sequence[str]]) -> list[list[str]]:
        return [list(policies[self.ctx.mapping.population_of[a]]) for a in self.ctx.env.agents]

    def _expand(self, table: PayoffTable, policies: Mapping[str, Sequence[str]], *,
                iteration: int) -> tuple[PayoffTable, int, int]:
        """Grow the table to the pools' sizes and evaluate only the new entries; return it,
        the env steps sampled and how many entries were evaluated exactly."""
        ctx = self.ctx
        return evaluate_missing(table, self._axis_ids(policies), backend=ctx.backend, agents=ctx.env.agents,
                                episodes=ctx.config.evaluation.episodes_per_entry,
                                seed=derive_seed(ctx.config.seed, iteration, 1_000_003))

    def _solve(self, table: PayoffTable) -> SolverResult:
        """The meta-solver's answer for ``table``, checked (a wrong one fails the run, naming the solver)."""
        return self._solve_values(table.values)

    def _solve_values(self, values: np.ndarray) -> SolverResult:
        ctx = self.ctx
        return solve_checked(ctx.solver, values, name=ctx.config.solver.name, seats=ctx.env.agents)
