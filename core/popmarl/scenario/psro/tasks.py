"""What PSRO's populations answer each iteration: one best-response task per population
(per level with ``training.pipeline``, per recommendation with a joint meta-strategy), and
each task answered exactly where its algorithm can, else trained."""

from __future__ import annotations

from collections.abc import Sequence

from popmarl.data.learners import LearnerInit, LearnerSpec
from popmarl.data.policies import PolicySpec
from popmarl.data.population import policy_id
from popmarl.data.seeds import derive_seed
from popmarl.data.tasks import BestResponseTask, Opponents, TrainResult, TrainTask
from popmarl.gametheory.payoffs import evaluate_missing
from popmarl.interfaces.algorithm import default_self_play, opponent_exploration
from popmarl.interfaces.env_traits import traits_of
from popmarl.scenario.psro.joint import PSROJoint
from popmarl.scenario.psro.pipeline import active_keys, active_policy_id, level_opponents, restricted
from popmarl.scenario.psro.state import PSROState


class PSROTasks(PSROJoint):
    """The best-response tasks of an iteration, and their answers."""

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
