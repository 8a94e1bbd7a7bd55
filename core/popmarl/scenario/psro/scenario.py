"""Scenario ``psro``: Policy-Space Response Oracles (Lanctot et al. 2017).

Each iteration: every population best-responds to the current meta-strategy
(all against the same one), the payoff table grows by one policy per population and only
its missing entries are evaluated, the meta-solver solves the new table, metrics go to
the hooks, and the run directory is checkpointed. ``uniform`` gives fictitious
self-play, ``latest`` self-play, an exact oracle with ``nash`` double oracle.

A :class:`~popmarl.interfaces.solver.JointMetaSolver` (``cce``, ``ce``) makes it JPSRO (Marris et
al. 2021): the meta-strategy is a joint distribution over profiles; each seat's learner
meets the other seats drawn together from it, marginalised over its own seat (CCE) or,
once per recommended policy of its seat, conditioned on that recommendation (CE), and
the metrics carry the distribution's CCE and CE gaps in the real game where the env can
compute best responses to it.

Its parts: :mod:`~popmarl.scenario.psro.state` (the state and its codec),
:mod:`~popmarl.scenario.psro.strategies` (how the populations answer: PSRO, JPSRO or
Pipeline PSRO), :mod:`~popmarl.scenario.psro.tasks` (each iteration's best-response tasks),
:mod:`~popmarl.scenario.psro.joint` (a joint meta-strategy) and
:mod:`~popmarl.scenario.psro.metrics` (metrics and summary); here, the checks and an iteration.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from popmarl.config.schema import DEFAULT_MAX_WALL_TIME_S, RunConfig, StoppingConfig
from popmarl.data.policies import Weights
from popmarl.data.population import AgentMapping, policy_id
from popmarl.engine.kept_weights import keep_best_problem
from popmarl.errors import ConfigError
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.interfaces.solver import JointMetaSolver, MetaSolver
from popmarl.scenario.base import Work
from popmarl.scenario.psro.metrics import IterationWork, PSROMetrics
from popmarl.scenario.psro.state import PSROState
from popmarl.scenario.psro.strategies import JointResponses, PerSeatResponses, PipelineResponses
from popmarl.scenario.psro.tasks import PSROTasks

__all__ = ["PSRO", "PSROState"]


class PSRO(PSROTasks, PSROMetrics):
    """The PSRO loop over any env, oracle, solver and backend. With no ``stopping`` set,
    it runs until its meta-game has converged (5 iterations in a row whose new policies
    gain at most 1% of the payoff range against the meta-strategy they answered) or for
    30 minutes."""

    default_stopping = StoppingConfig(patience=5, max_wall_time_s=DEFAULT_MAX_WALL_TIME_S)

    def check(self, *, config: RunConfig, mapping: AgentMapping) -> None:
        if config.evaluation.ratings and len(mapping.population_of) != 2:
            raise ConfigError(f"evaluation.ratings: Elo ratings are for two-player games; this env has "
                              f"{len(mapping.population_of)} seats (set evaluation.ratings: false)")
        training = config.training
        if training.pipeline > 1 and training.init == "previous":
            raise ConfigError("training.init: previous carries one learner on per population; with training.pipeline "
                              "every active learner carries on already: use newest_weights or fresh")
        if training.keep == "best":
            problem = keep_best_problem(window=training.window, episodes_per_update=training.episodes_per_update)
            if problem is not None:
                raise ConfigError(f"training.window: {problem}")

    def check_solver(self, solver: MetaSolver, *, mapping: AgentMapping,
                     populations: Mapping[str, PopulationAlgorithm], config: RunConfig) -> None:
        if config.training.pipeline > 1:
            exact = sorted(a.algorithm_name for a in populations.values() if a.answers)
            if exact:
                raise ConfigError(f"training.pipeline: {exact[0]} answers exactly, at once; a pipeline of best "
                                  "responses is for learning algorithms (set training.pipeline: 1)")
            if isinstance(solver, JointMetaSolver):
                raise ConfigError("training.pipeline: the ce and cce solvers' joint meta-strategies take one best "
                                  "response per recommendation; use a pipeline with a per-seat solver (nash, prd, ...)")
        if not isinstance(solver, JointMetaSolver):
            return
        for population in mapping.populations:
            if len(mapping.agents_of(population)) > 1:
                raise ConfigError(f"agents.mapping: joint meta-solvers (ce, cce) need one population per seat; population "
                                  f"{population} plays {', '.join(mapping.agents_of(population))} (use per_player)")
            agent = populations[population]
            if agent.answers and not agent.algorithm.answers_correlated:
                raise ConfigError(f"algorithm: {agent.algorithm_name} answers exactly against one mixture per seat only, "
                                  "not the correlated opponents of the ce and cce solvers")

    def prepare(self) -> None:
        """The run's response strategy: JPSRO's for a joint meta-solver, Pipeline PSRO's
        for ``training.pipeline`` above 1, else PSRO's."""
        levels = self.ctx.config.training.pipeline
        if isinstance(self.ctx.solver, JointMetaSolver):
            self.strategy = JointResponses()
        elif levels > 1:
            self.strategy = PipelineResponses(levels)
        else:
            self.strategy = PerSeatResponses()

    def newest_policies(self, state: PSROState) -> dict[str, str]:
        return {p: ids[-1] for p, ids in state.policies.items()}

    def finish(self, state: PSROState) -> None:
        self.ctx.env.export_policy(self._mixed_profile(state), self.ctx.run_dir.path)

    # -- an iteration ----------------------------------------------------------------
    def iterate(self, state: PSROState, iteration: int) -> Work:
        t0 = time.monotonic()
        results, answered = self._respond(self.strategy.tasks(self, state, iteration))
        train_time = time.monotonic() - t0
        for result in results:
            for frozen in result.policies:
                population = frozen.spec.population
                if self.strategy.novel_only and self._known(frozen.weights, state.policies[population]):
                    continue
                pid = policy_id(population, len(state.policies[population]))
                self.publish(pid, frozen.weights)
                state.policies[population].append(pid)
            state.learners.update(result.states)
        self.strategy.after(state)
        self._restoring = set()
        t1 = time.monotonic()
        table, eval_steps, exact_entries = self._expand(state.table, state.policies, iteration=iteration)
        eval_time = time.monotonic() - t1
        t2 = time.monotonic()
        solved = self._solve(table)
        solve_time = time.monotonic() - t2
        gains = self._oracle_gains(table, state)
        state.table, state.meta, state.joint = table, solved.mixtures, solved.joint
        state.solver_metrics = dict(solved.metrics)
        steps = sum(r.env_steps for r in results) + eval_steps + self.strategy.extra_eval_steps()
        return Work(env_steps=steps, details=IterationWork(
            results=results, gains=gains, answered=answered, exact_entries=exact_entries,
            times={"train_time": train_time, "eval_time": eval_time, "solve_time": solve_time},
            seconds=time.monotonic() - t0))

    def _known(self, weights: Weights, pids: Sequence[str]) -> bool:
        """Whether one of ``pids`` has exactly these weights."""
        for pid in pids:
            known = self.policies[pid].get_weights()
            if known.keys() == weights.keys() and all(np.array_equal(known[k], weights[k]) for k in weights):
                return True
        return False
