"""Scenario ``psro``: Policy-Space Response Oracles (Lanctot et al. 2017).

Each iteration (DESIGN §4): every population best-responds to the current meta-strategy
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
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from popmarl.interfaces.agent import AgentInterface
from popmarl.interfaces.algorithm import default_self_play, opponent_exploration
from popmarl.config.schema import DEFAULT_MAX_WALL_TIME_S, RunConfig, StoppingConfig
from popmarl.interfaces.env import ExactEnv, MixedProfile
from popmarl.errors import ConfigError
from popmarl.engine.executor import population_of
from popmarl.engine.kept_weights import keep_best_problem
from popmarl.interfaces.env_traits import traits_of
from popmarl.gametheory.metagame import entropy, expected_payoffs, joint_values, new_strategy_gains
from popmarl.gametheory.payoffs import PayoffTable, evaluate_missing
from popmarl.scenario.psro.pipeline import active_keys, active_policy_id, level_opponents, restricted
from popmarl.interfaces.policy import Policy
from popmarl.data.population import AgentMapping, policy_id
from popmarl.data.records import (
    BestResponseTask,
    EvalTask,
    JointOpponents,
    LearnerInit,
    LearnerSpec,
    LearnerState,
    Opponents,
    PolicySpec,
    TrainResult,
    TrainTask,
    Weights,
)
from popmarl.scenario.base import IterativeScenario, RunContext
from popmarl.data.seeds import derive_seed
from popmarl.interfaces.solver import JointMetaSolver, MetaSolver, SolverResult, solve_checked


#: Joint probabilities at or below this are dropped when drawing opponents (as OpenSpiel's
#: jpsro ``DIST_TOL``).
_JOINT_TOL = 1e-8


@attrs.define
class PSROState:
    """Everything a checkpoint holds; enough to continue bit-identically."""

    iteration: int
    policies: dict[str, list[str]]
    table: PayoffTable
    meta: tuple[np.ndarray, ...]
    solver_metrics: dict[str, Any]
    history: list[dict[str, Any]]
    env_steps: int = 0
    wall_time_s: float = 0.0
    #: The learners' states after the last iteration (``training.init: previous``).
    learners: dict[str, LearnerState] = attrs.field(factory=dict)
    #: A joint solver's distribution over profiles (``meta`` holds its marginals).
    joint: np.ndarray | None = None


class PSRO(IterativeScenario):
    """The PSRO loop over any env, oracle, solver and backend. With no ``stopping`` set,
    it runs until its meta-game has converged (5 iterations in a row whose new policies
    gain at most 1% of the payoff range against the meta-strategy they answered) or for
    30 minutes."""

    ctx: RunContext
    default_stopping = StoppingConfig(patience=5, max_wall_time_s=DEFAULT_MAX_WALL_TIME_S)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pipeline = 1
        self._pipeline_eval_steps = 0  # the active learners' payoff entries of this iteration (pipeline)
        self.policies: dict[str, Policy] = {}
        self._restoring: set[str] = set()
        self._outcomes: dict[tuple[int, ...], np.ndarray] = {}  # seat 0's win/draw/loss counts per entry

    def check(self, *, config: RunConfig, mapping: AgentMapping) -> None:
        if config.evaluation.ratings and len(mapping.population_of) != 2:
            raise ConfigError(f"evaluation.ratings: Elo ratings are for two-player games; this env has "
                              f"{len(mapping.population_of)} seats (set evaluation.ratings: false)")
        training = config.training
        self._pipeline = training.pipeline
        if training.pipeline > 1 and training.init == "previous":
            raise ConfigError("training.init: previous carries one learner on per population; with training.pipeline "
                              "every active learner carries on already: use newest_weights or fresh")
        if training.keep == "best":
            problem = keep_best_problem(window=training.window, episodes_per_update=training.episodes_per_update)
            if problem is not None:
                raise ConfigError(f"training.window: {problem}")

    def check_solver(self, solver: MetaSolver, *, mapping: AgentMapping,
                     agents: Mapping[str, AgentInterface]) -> None:
        if self._pipeline > 1:
            exact = sorted(a.algorithm_name for a in agents.values() if a.answers)
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
            agent = agents[population]
            if agent.answers and not agent.algorithm.answers_correlated:
                raise ConfigError(f"algorithm: {agent.algorithm_name} answers exactly against one mixture per seat only, "
                                  "not the correlated opponents of the ce and cce solvers")

    def finish(self, state: PSROState) -> None:
        self.ctx.env.export_policy(self._mixed_profile(state), self.ctx.run_dir.path)

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

    def restore(self) -> PSROState:
        ctx = self.ctx
        saved, arrays = ctx.run_dir.load_state()
        policies = {p: list(ids) for p, ids in saved["policies"].items()}
        for ids in policies.values():
            for pid in ids:
                self._add(pid, ctx.run_dir.load_policy(pid), announce=False)
        table = PayoffTable(agents=ctx.env.agents, values=arrays["payoffs"], filled=arrays["filled"].astype(bool))
        meta = tuple(arrays[f"meta_{k}"] for k in range(len(ctx.env.agents)))
        self.resume_history(saved)
        table.save(ctx.run_dir.payoffs_file, self._axis_ids(policies))  # a kill may have left it behind
        state = PSROState(iteration=int(saved["iteration"]), policies=policies, table=table, meta=meta,
                          solver_metrics=saved["solver_metrics"], history=saved["history"],
                          env_steps=int(saved["env_steps"]), wall_time_s=float(saved["wall_time_s"]),
                          learners=ctx.run_dir.load_learners(saved), joint=arrays.get("joint"))
        self._restoring = set(state.learners)
        return state

    def _add(self, pid: str, weights: Weights, *, announce: bool = True) -> None:
        ctx = self.ctx
        self.policies[pid] = ctx.agents[population_of(pid)].frozen(weights)
        ctx.backend.add_policy(pid, weights)
        if announce:
            ctx.run_dir.save_policy(pid, weights)
            ctx.hooks.policy_added(ctx.info, population_of(pid), pid)

    def _commit(self, state: PSROState) -> None:
        ctx = self.ctx
        arrays = {"payoffs": state.table.values, "filled": state.table.filled}
        arrays.update({f"meta_{k}": m for k, m in enumerate(state.meta)})
        if state.joint is not None:
            arrays["joint"] = state.joint
        saved = {"iteration": state.iteration, "policies": state.policies, "history_length": len(state.history),
                 "solver_metrics": state.solver_metrics, "env_steps": state.env_steps,
                 "wall_time_s": state.wall_time_s}
        self.commit(saved, arrays, state.history, learners=state.learners, after=lambda: state.table.save(
            ctx.run_dir.payoffs_file, self._axis_ids(state.policies)))

    # -- the loop -------------------------------------------------------------------
    def loop(self, state: PSROState) -> tuple[str, str]:
        while (stop := self.stop_reason(state.iteration, state.history)) is None:
            self._iterate(state)
        return stop

    def _iterate(self, state: PSROState) -> None:
        ctx = self.ctx
        iteration = state.iteration + 1
        t0 = time.monotonic()
        results, answered = self._respond(self._train_tasks(state, iteration))
        train_time = time.monotonic() - t0
        for result in results:
            for frozen in result.policies:
                population = frozen.spec.population
                # A joint meta-strategy's several answers per population (CE) often
                # coincide: only novel ones join (OpenSpiel jpsro's "all_novel").
                if state.joint is not None and self._known(frozen.weights, state.policies[population]):
                    continue
                pid = policy_id(population, len(state.policies[population]))
                self._add(pid, frozen.weights)
                state.policies[population].append(pid)
            state.learners.update(result.states)
        if self._pipeline > 1:  # the lowest learners are frozen now: no longer active
            for population, ids in state.policies.items():
                state.learners = {k: v for k, v in state.learners.items()
                                  if k not in active_keys(population, len(ids) - 1, 1)}
        self._restoring = set()
        t1 = time.monotonic()
        table, eval_steps, exact_entries = self._expand(state.table, state.policies, iteration=iteration)
        eval_time = time.monotonic() - t1
        t2 = time.monotonic()
        solved = self._solve(table)
        solve_time = time.monotonic() - t2
        train_steps = sum(r.env_steps for r in results)
        eval_steps += self._pipeline_eval_steps
        gains = self._oracle_gains(table, state)
        state.iteration, state.table, state.meta, state.joint = iteration, table, solved.mixtures, solved.joint
        state.solver_metrics = dict(solved.metrics)
        state.env_steps += train_steps + eval_steps
        iteration_time = time.monotonic() - t0
        metrics = self._metrics(state, results, train_steps + eval_steps, iteration_time,
                                exact=(answered, exact_entries), train_time=train_time, eval_time=eval_time,
                                solve_time=solve_time)
        metrics.update(gains)
        metrics.update(self.approx_nash_conv(state))
        metrics.update(self.ratings(state))
        state.history.append(metrics)
        state.wall_time_s = self.elapsed()
        self._commit(state)
        ctx.run_dir.append_metrics(metrics)
        ctx.hooks.iteration_end(ctx.info, iteration, metrics)

    def _oracle_gains(self, table: PayoffTable, state: PSROState) -> dict[str, float | None]:
        """What the iteration's new policies gain against the meta-strategy they answered
        (``state``'s, over the policies before them), summed over seats
        (``oracle_gain``: PSRO's own estimate of that meta-strategy's NashConv), and as a
        share of the payoff table's range (``oracle_gain_share``: what ``stopping.patience``
        reads); None under a joint meta-strategy."""
        if state.joint is not None:
            return {"oracle_gain": None, "oracle_gain_share": None}
        gain = float(new_strategy_gains(table.values, state.meta).sum())
        spread = float(np.ptp(table.values))
        return {"oracle_gain": gain, "oracle_gain_share": gain / spread if spread > 0 else 0.0}

    def _solve(self, table: PayoffTable) -> SolverResult:
        """The meta-solver's answer for ``table``, checked (a wrong one fails the run, naming the solver)."""
        return self._solve_values(table.values)

    def _solve_values(self, values: np.ndarray) -> SolverResult:
        ctx = self.ctx
        return solve_checked(ctx.solver, values, name=ctx.config.solver.name, seats=ctx.env.agents)

    def _train_tasks(self, state: PSROState, iteration: int) -> list[TrainTask]:
        """One task per population: its learner best-responds, in its seats, to the
        meta-strategy of every seat, with its algorithm's opponent exploration unless the
        config sets one or the game has chance (:func:`popmarl.interfaces.algorithm.opponent_exploration`);
        it starts as ``training.init`` says (see :meth:`_init`). With a joint
        meta-strategy, one per population and recommendation (:meth:`_joint_opponents`):
        the first's learner is the population's (its key the population's name, its state
        checkpointed), each further one a new learner under a key of its own."""
        ctx = self.ctx
        training = ctx.config.training
        if training.pipeline > 1:
            return self._pipeline_tasks(state, iteration)
        opponents = tuple(
            Opponents(agent=agent, population=ctx.mapping.population_of[agent],
                      policy_ids=tuple(state.policies[ctx.mapping.population_of[agent]]), mixture=state.meta[k])
            for k, agent in enumerate(ctx.env.agents)
        )
        warm = training.init == "previous"
        from_newest = training.init == "newest_weights"
        tasks = []
        for k, population in enumerate(ctx.mapping.populations):
            budget = training.budget(opponent_exploration(ctx.agents[population].algorithm, ctx.env),
                                     episode_steps=traits_of(ctx.env).episode_steps,
                                     self_play=0.0 if state.joint is not None else self._self_play())
            seat = ctx.env.agents.index(ctx.mapping.agents_of(population)[0])
            jobs = [(opponents, None)] if state.joint is None else [((), j) for j in self._joint_opponents(state, seat)]
            for j, (seats, joint) in enumerate(jobs):
                spec = PolicySpec(policy_id=policy_id(population, len(state.policies[population]) + j),
                                  population=population, algorithm=ctx.agents[population].algorithm_name,
                                  iteration=iteration)
                seed = derive_seed(ctx.config.seed, iteration, k) if j == 0 else derive_seed(ctx.config.seed, iteration, k, j)
                # Further recommendations (CE) start like a new learner: the population's
                # one carried-on learner is the first's. Each has a key of its own (no
                # population name has a "/"), so none replaces that learner where it is held.
                init = self._init(state, population, warm and j == 0, from_newest)
                key = population if j == 0 else f"{population}/recommendation{j}"
                learner = LearnerSpec(key=key, population=population, seats=ctx.mapping.agents_of(population),
                                      one_seat=True, seed=seed, init=init, snapshot=spec)
                tasks.append(TrainTask(learners=(learner,), seed=seed, opponents=seats, joint=joint, budget=budget,
                                       return_state=warm and j == 0))
        return tasks

    def _pipeline_tasks(self, state: PSROState, iteration: int) -> list[TrainTask]:
        """Pipeline PSRO (:mod:`popmarl.scenario.psro.pipeline`): one task per population and level; the
        lowest against the meta-strategy (and frozen after the iteration), each higher one
        against the restricted game's over the frozen policies and the active learners below
        it that have trained (their current weights, evaluated now)."""
        ctx = self.ctx
        training = ctx.config.training
        agents, population_of = ctx.env.agents, ctx.mapping.population_of
        levels = training.pipeline
        actives = {p: active_keys(p, len(ids), levels) for p, ids in state.policies.items()}
        for keys in actives.values():
            for key in keys:
                if key in state.learners:
                    ctx.backend.add_policy(active_policy_id(key), state.learners[key].weights)
        trained = {p: [key for key in keys if key in state.learners] for p, keys in actives.items()}
        axis_ids = [list(state.policies[population_of[a]]) + [active_policy_id(key) for key in trained[population_of[a]]]
                    for a in agents]
        table, self._pipeline_eval_steps, _ = evaluate_missing(
            state.table, axis_ids, backend=ctx.backend, agents=agents,
            episodes=ctx.config.evaluation.episodes_per_entry, seed=derive_seed(ctx.config.seed, iteration, 1_000_033))
        tasks = []
        for k, population in enumerate(ctx.mapping.populations):
            budget = training.budget(opponent_exploration(ctx.agents[population].algorithm, ctx.env),
                                     episode_steps=traits_of(ctx.env).episode_steps, self_play=self._self_play())
            for level, key in enumerate(actives[population]):
                sizes = [len(state.policies[population_of[a]])
                         + len([t for t in actives[population_of[a]][:level] if t in state.learners]) for a in agents]
                mixtures = state.meta if level == 0 else self._solve_values(restricted(table, sizes)).mixtures
                opponents = level_opponents(agents, population_of, [ids[:n] for ids, n in zip(axis_ids, sizes)],
                                            mixtures)
                if key in self._restoring:
                    init = LearnerInit.restore(state.learners[key])
                elif key in state.learners:
                    init = LearnerInit(kind="continue")
                else:
                    init = self._init(state, population, False, training.init == "newest_weights")
                snapshot = None if level else PolicySpec(
                    policy_id=policy_id(population, len(state.policies[population])), population=population,
                    algorithm=ctx.agents[population].algorithm_name, iteration=iteration)
                seed = derive_seed(ctx.config.seed, iteration, k) if level == 0 else \
                    derive_seed(ctx.config.seed, iteration, k, 5_000 + level)
                learner = LearnerSpec(key=key, population=population, seats=ctx.mapping.agents_of(population),
                                      one_seat=True, seed=seed, init=init, snapshot=snapshot)
                tasks.append(TrainTask(learners=(learner,), seed=seed, opponents=opponents, budget=budget,
                                       return_state=True))
        return tasks

    def _respond(self, tasks: Sequence[TrainTask]) -> tuple[list[TrainResult], int]:
        """Each task's result, in order, and how many were answered exactly: the populations
        whose algorithm answers exactly are asked their best response (``Backend.best_respond``,
        no learner); the others, and those that decline, train."""
        ctx = self.ctx
        asked = {k: BestResponseTask(population=spec.population, seed=spec.seed, snapshot=spec.snapshot,
                                     opponents=task.opponents, joint=task.joint)
                 for k, task in enumerate(tasks) for spec in task.learners
                 if len(task.learners) == 1 and spec.snapshot is not None and ctx.agents[spec.population].answers}
        answers = dict(zip(asked, ctx.backend.best_respond(list(asked.values())))) if asked else {}
        results = {k: TrainResult(policies=(answer.policy,), learner_metrics={tasks[k].learners[0].key: {}},
                                  metrics={"train_time_s": answer.seconds})
                   for k, answer in answers.items() if answer.policy is not None}
        training = [k for k in range(len(tasks)) if k not in results]
        if training:
            results.update(zip(training, ctx.backend.train([tasks[k] for k in training])))
        return [results[k] for k in range(len(tasks))], len(tasks) - len(training)

    def _joint_opponents(self, state: PSROState, seat: int) -> list[JointOpponents]:
        """The other seats' profiles drawn together from the joint meta-strategy:
        marginalised over ``seat`` (CCE), or one distribution per policy of ``seat`` it
        recommends, conditioned on that recommendation (CE)."""
        solver = self.ctx.solver
        conditional = isinstance(solver, JointMetaSolver) and solver.conditional
        return [opponents for _, opponents, _ in self._joint_slices(state, seat, conditional=conditional)]

    def _joint_slices(self, state: PSROState, seat: int, *,
                      conditional: bool) -> list[tuple[float, JointOpponents, float]]:
        """(weight, the other seats' distribution, ``seat``'s on-policy value under it):
        the joint marginalised over ``seat`` (weight 1), or conditioned on each policy of
        ``seat`` it recommends (weight: that policy's marginal probability)."""
        assert state.joint is not None
        agents = self.ctx.env.agents
        others = tuple(a for k, a in enumerate(agents) if k != seat)
        axis_ids = [ids for k, ids in enumerate(self._axis_ids(state.policies)) if k != seat]
        joint, values = np.moveaxis(state.joint, seat, 0), np.moveaxis(state.table.values[seat], seat, 0)
        if conditional:
            slices = [(float(joint[i].sum()), joint[i], values[i]) for i in range(joint.shape[0])]
        else:
            slices = [(1.0, joint.sum(axis=0), (joint * values).sum(axis=0) / np.maximum(joint.sum(axis=0), 1e-300))]
        result = []
        for weight, dist, value in slices:
            index = np.argwhere(dist > _JOINT_TOL)
            if weight <= _JOINT_TOL or len(index) == 0:
                continue
            probabilities = dist[tuple(index.T)] / dist[tuple(index.T)].sum()
            profiles = tuple(tuple(axis_ids[j][i] for j, i in enumerate(row)) for row in index)
            on_policy = float(probabilities @ value[tuple(index.T)])
            result.append((weight, JointOpponents(agents=others, profiles=profiles, probabilities=probabilities),
                           on_policy))
        return result

    def correlated_gaps(self, state: PSROState) -> dict[str, float]:
        """The joint meta-strategy's CCE and CE gaps in the real game, as OpenSpiel's
        ``jpsro.py`` reports them: per seat, the value of a best response to the other
        seats drawn from the joint (CCE: marginalised over the seat; CE: conditioned on
        each recommendation, weighted by its probability) minus the on-policy value,
        floored at 0, summed over seats; the CE gap only for CE solvers (it takes a best
        response per recommendation). Empty without a joint meta-strategy or where the env
        cannot compute such best responses."""
        env, solver = self.ctx.env, self.ctx.solver
        if state.joint is None or not (isinstance(env, ExactEnv) and env.supports_exact()):
            return {}
        gaps = {}
        # The CE gap needs a best response per recommendation: for CE solvers only.
        conditional = isinstance(solver, JointMetaSolver) and solver.conditional
        for name, conditional in (("cce_gap", False), ("ce_gap", True))[:2 if conditional else 1]:
            total = 0.0
            for seat, agent in enumerate(env.agents):
                for weight, opponents, on_policy in self._joint_slices(state, seat, conditional=conditional):
                    profiles = [({a: self.policies[pid] for a, pid in zip(opponents.agents, profile, strict=True)}, p)
                                for profile, p in opponents.support()]
                    value = env.correlated_best_response_value(agent, profiles)
                    if value is None:
                        return {}
                    total += weight * max(value - on_policy, 0.0)
            gaps[name] = total
        return gaps

    def _self_play(self) -> float:
        """A best response's share of self-play episodes when ``training.self_play`` is unset
        (:func:`popmarl.interfaces.algorithm.default_self_play`)."""
        return default_self_play(self.ctx.env, [agent.space for agent in self.ctx.agents.values()])

    def _init(self, state: PSROState, population: str, warm: bool, from_newest: bool) -> LearnerInit:
        """A new learner on the population's newest weights (``newest_weights``; fresh while
        the population holds only its initial policy); a fresh learner; or, warm
        (``previous``), the population's learner carrying on from its newest policy
        (restored from the checkpoint after a resume; fresh at iteration 1)."""
        if from_newest and len(state.policies[population]) > 1:
            return LearnerInit.start_from(state.policies[population][-1])
        if not warm or population not in state.learners:
            return LearnerInit()
        newest = state.policies[population][-1]
        if population in self._restoring:
            return LearnerInit.restore(state.learners[population], policy_id=newest)
        return LearnerInit(kind="continue", policy_id=newest)

    def _known(self, weights: Weights, pids: Sequence[str]) -> bool:
        """Whether one of ``pids`` has exactly these weights."""
        for pid in pids:
            known = self.policies[pid].get_weights()
            if known.keys() == weights.keys() and all(np.array_equal(known[k], weights[k]) for k in weights):
                return True
        return False

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

    # -- metrics and summary ----------------------------------------------------------
    def _mixed_profile(self, state: PSROState) -> MixedProfile:
        axis_ids = self._axis_ids(state.policies)
        return {
            agent: [(self.policies[pid], float(w)) for pid, w in zip(axis_ids[k], state.meta[k]) if w > 0]
            for k, agent in enumerate(self.ctx.env.agents)
        }

    def nash_conv(self, state: PSROState) -> float | None:
        """NashConv of the meta-strategy in the real game, where the env can compute it."""
        env = self.ctx.env
        if isinstance(env, ExactEnv) and env.supports_exact():
            return float(env.nash_conv(self._mixed_profile(state)))
        return None

    def approx_nash_conv(self, state: PSROState) -> dict[str, float]:
        """Every ``evaluation.approx_nash_conv_every`` iterations: the meta-strategy's
        approximate NashConv (CCE gap for a joint one) from fresh RL best responses
        (:mod:`popmarl.tools.exploit`), trained on a local backend of their own from seeds of
        their own, so the run's streams, and a resumed run, stay as they would be."""
        ctx = self.ctx
        evaluation = ctx.config.evaluation
        every = evaluation.approx_nash_conv_every
        if every is None or state.iteration % every:
            return {}
        from popmarl.config.schema import ComponentConfig, population_algorithms
        from popmarl.tools.exploit import DEFAULT_ENV_STEPS, MetaStrategy, exploit, response_algorithms
        from popmarl.plugins.registries import Registries

        found = Registries.current()
        specs = population_algorithms(ctx.config, ctx.mapping.populations)
        axis_ids = self._axis_ids(state.policies)
        supports = [[(pid, w) for pid, w in zip(axis_ids[k], state.meta[k]) if w > 0] for k in range(len(axis_ids))]
        mixtures = tuple(Opponents(agent=a, population=ctx.mapping.population_of[a],
                                   policy_ids=tuple(pid for pid, _ in supports[k]),
                                   mixture=np.array([w for _, w in supports[k]]))
                         for k, a in enumerate(ctx.env.agents))
        joint = None
        if state.joint is not None:
            support = self.joint_meta_strategy(state)
            joint = JointOpponents(agents=tuple(support["agents"]), profiles=tuple(map(tuple, support["profiles"])),
                                   probabilities=np.asarray(support["probabilities"]))
        used = sorted({pid for m in mixtures for pid in m.policy_ids})
        meta = MetaStrategy(mixtures=mixtures, joint=joint, spaces=ctx.spaces, algorithms=specs,
                            weights={pid: self.policies[pid].get_weights() for pid in used})
        algorithms = response_algorithms(ctx.env.agents, ctx.mapping.population_of, specs, None, found)
        report = exploit(ctx.config, ctx.env, meta, algorithms=algorithms,
                         env_steps=evaluation.approx_nash_conv_env_steps or DEFAULT_ENV_STEPS,
                         seed=derive_seed(ctx.config.seed, state.iteration, 7_919_000),
                         backend=ComponentConfig(name="local"), registries=found)
        return report.metrics()

    def ratings(self, state: PSROState) -> dict[str, float]:
        """With ``evaluation.ratings``: ``elo/<population>``, the Elo of each population's
        newest policy (:func:`popmarl.gametheory.ratings.elo`, the first seat's initial policy at 0)
        from every payoff entry's win/draw/loss (exact probabilities count as
        ``episodes_per_entry`` games). Each entry is played once, on the run's backend from a
        seed of its own, and kept in memory (a resumed run plays them again, identically):
        the run's own streams and env steps are untouched."""
        ctx = self.ctx
        evaluation = ctx.config.evaluation
        if not evaluation.ratings:
            return {}
        from popmarl.gametheory.ratings import elo, head_to_head

        agents = ctx.env.agents
        axis_ids = self._axis_ids(state.policies)
        shape = tuple(len(ids) for ids in axis_ids)
        tasks = [EvalTask(index=index, profile={a: axis_ids[k][i] for k, (a, i) in enumerate(zip(agents, index))},
                          episodes=evaluation.episodes_per_entry, seed=derive_seed(ctx.config.seed, 5_003_011, *index))
                 for index in np.ndindex(*shape) if index not in self._outcomes]
        for result in ctx.backend.evaluate(tasks):
            self._outcomes[result.index] = result.outcome_rates()[:, 0] * evaluation.episodes_per_entry
        counts = np.zeros((3, *shape))
        for index in np.ndindex(*shape):
            counts[(slice(None), *index)] = self._outcomes[index]
        shared = len(ctx.mapping.populations) == 1
        ratings = elo(*head_to_head(*counts, shared=shared), anchor=0)
        newest = [shape[0] - 1] if shared else [shape[0] - 1, shape[0] + shape[1] - 1]
        return {f"elo/{ctx.mapping.population_of[agents[k]]}": float(ratings[n]) for k, n in enumerate(newest)}

    def population_meta(self, state: PSROState, population: str) -> np.ndarray:
        """A population's meta-strategy: the mean of its seats' mixtures."""
        axes = [k for k, a in enumerate(self.ctx.env.agents) if self.ctx.mapping.population_of[a] == population]
        return np.mean([state.meta[k] for k in axes], axis=0)

    def _metrics(self, state: PSROState, results: Sequence[TrainResult], steps: int, seconds: float, *,
                 exact: tuple[int, int] = (0, 0), **times: float) -> dict[str, Any]:
        """The iteration's metrics line; ``exact``: the best responses computed and payoff
        entries evaluated exactly (the work of an iteration that took no env steps)."""
        nash = self.nash_conv(state)
        metrics: dict[str, Any] = {
            "iteration": state.iteration,
            "nash_conv": nash,
            "exploitability": self._exploitability(nash),
        }
        for population in self.ctx.mapping.populations:
            metrics[f"population_size/{population}"] = len(state.policies[population])
            meta = self.population_meta(state, population)
            metrics[f"meta_entropy/{population}"] = entropy(meta)
            metrics[f"meta_strategy/{population}"] = meta.tolist()
        metrics.update({"env_steps": state.env_steps, "iteration_env_steps": steps,
                        "train_env_steps": sum(r.env_steps for r in results),
                        "exact_best_responses": exact[0], "exact_entries": exact[1],
                        "steps_per_s": steps / seconds if seconds > 0 else 0.0,
                        **{f"{k}_s": v for k, v in times.items()},
                        "wall_time_s": self.elapsed()})
        metrics.update(self.correlated_gaps(state))
        metrics.update({f"solver/{k}": v for k, v in state.solver_metrics.items()})
        for result in results:
            for key, learned in result.learner_metrics.items():
                name = self._metrics_name(state, key)
                metrics.update({f"train/{name}/{k}": v for k, v in {**result.metrics, **learned}.items()})
                if result.stop_reason:  # trained (not answered exactly): its budget's outcome
                    metrics.update({f"train/{name}/env_steps": result.env_steps,
                                    f"train/{name}/stop_reason": result.stop_reason})
        return metrics

    def _metrics_name(self, state: PSROState, key: str) -> str:
        """A learner's name in the metrics: its key; a pipeline's active learners by level
        (the lowest, just frozen, under its population's name, as PSRO's one learner)."""
        if self._pipeline == 1:
            return key
        population, name = key.rsplit(".", 1)
        level = int(name.removeprefix("br")) - (len(state.policies[population]) - 1)
        return population if level == 0 else f"{population}/level{level}"

    def _exploitability(self, nash: float | None) -> float | None:
        env = self.ctx.env
        if nash is None or len(env.agents) != 2 or not getattr(env, "zero_sum", False):
            return None
        return nash / 2

    def summary(self, state: PSROState | None, status: str, reason: str) -> dict[str, Any]:  # type: ignore[override]
        """The content of ``summary.json``."""
        ctx = self.ctx
        summary = self.base_summary(status, reason)
        if state is None:
            return summary
        nash = state.history[-1]["nash_conv"] if state.history else self.nash_conv(state)
        summary.update({
            "iterations": state.iteration,
            "populations": {
                p: {"policies": list(state.policies[p]), "meta_strategy": self.population_meta(state, p).tolist()}
                for p in ctx.mapping.populations
            },
            "meta_strategies": {a: state.meta[k].tolist() for k, a in enumerate(ctx.env.agents)},
            "meta_game_values": dict(zip(ctx.env.agents, self._meta_values(state).tolist())),
            "nash_conv": nash, "exploitability": self._exploitability(nash),
            "env_steps": state.env_steps,
            **{k: sum(int(m.get(k, 0)) for m in state.history) for k in ("exact_best_responses", "exact_entries")},
            "solver": state.solver_metrics,
        })
        if state.joint is not None:
            summary["joint_meta_strategy"] = self.joint_meta_strategy(state)
            summary.update({k: state.history[-1][k] for k in ("cce_gap", "ce_gap") if state.history and k in state.history[-1]})
        return summary

    def _meta_values(self, state: PSROState) -> np.ndarray:
        """Each seat's expected meta-game payoff under the (joint) meta-strategy."""
        if state.joint is not None:
            return joint_values(state.table.values, state.joint)
        return expected_payoffs(state.table.values, state.meta)

    def joint_meta_strategy(self, state: PSROState) -> dict[str, Any]:
        """The joint meta-strategy's support: the seats, one policy id per seat for each
        profile, and the profiles' probabilities (``popmarl eval`` draws from it)."""
        assert state.joint is not None
        axis_ids = self._axis_ids(state.policies)
        index = np.argwhere(state.joint > _JOINT_TOL)
        return {"agents": list(self.ctx.env.agents),
                "profiles": [[axis_ids[k][i] for k, i in enumerate(row)] for row in index],
                "probabilities": state.joint[tuple(index.T)].tolist()}
