"""PSRO's best-response tasks (one per population; per level with ``training.pipeline``,
per recommendation with a joint meta-strategy, as the run's response strategy builds
them), each answered exactly where its algorithm can, else trained."""

from __future__ import annotations

from collections.abc import Sequence

from popmarl.data.learners import LearnerInit, LearnerSpec
from popmarl.data.policies import PolicySpec
from popmarl.data.population import policy_id
from popmarl.data.seeds import stream_seed
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import BestResponseTask, TrainResult, TrainTask
from popmarl.interfaces.algorithm import default_self_play, opponent_exploration
from popmarl.interfaces.env_traits import traits_of
from popmarl.scenario.psro.joint import PSROJoint
from popmarl.scenario.psro.state import PSROState


class PSROTasks(PSROJoint):
    """The best-response tasks of an iteration (built by the run's response strategy,
    :mod:`popmarl.scenario.psro.strategies`), and their answers."""

    def answer_task(self, state: PSROState, iteration: int, k: int, population: str, *,
                    opponents: MetaStrategy, recommendation: int = 0, level: int = 0, key: str | None = None) -> TrainTask:
        """Population ``population`` (the ``k``-th) best-responding in its seats to
        ``opponents`` (each seat's mixture, or the other seats drawn together from a joint),
        with its algorithm's opponent exploration unless the config sets one or the game
        has chance (:func:`popmarl.interfaces.algorithm.opponent_exploration`).

        PSRO's one learner per population (``recommendation`` 0, no ``key``) starts as
        ``training.init`` says (:meth:`_init`); a further recommendation of a joint
        meta-strategy (CE) starts like a new learner under a key of its own (no population
        name has a "/", so none replaces the population's learner where it is held); a
        pipeline's learner (``key``, at ``level``) carries on from one iteration to the
        next, and only the lowest level's becomes the population's next policy."""
        ctx = self.ctx
        training = ctx.config.training
        warm = training.init == "previous" and recommendation == 0 and key is None
        from_newest = training.init == "newest_weights"
        budget = training.budget(opponent_exploration(ctx.populations[population].algorithm, ctx.env),
                                 episode_steps=traits_of(ctx.env).episode_steps,
                                 self_play=0.0 if opponents.joint_agents else self._self_play())
        spec = None if level else PolicySpec(
            policy_id=policy_id(population, len(state.policies[population]) + recommendation), population=population,
            algorithm=ctx.populations[population].algorithm_name, iteration=iteration)
        seed = stream_seed(ctx.config.seed, "psro.train", iteration, k, recommendation + level)
        pipelined = key is not None
        if key is not None:
            if key in self._restoring:
                init = LearnerInit.restore(state.learners[key])
            elif key in state.learners:
                init = LearnerInit(kind="continue")
            else:
                init = self._init(state, population, False, from_newest)
        else:
            init = self._init(state, population, warm, from_newest)
            key = population if recommendation == 0 else f"{population}/recommendation{recommendation}"
        learner = LearnerSpec(key=key, population=population, seats=ctx.mapping.agents_of(population),
                              one_seat=True, seed=seed, init=init, snapshot=spec)
        return TrainTask(learners=(learner,), seed=seed, opponents=opponents, budget=budget,
                         return_state=warm or pipelined)

    def _respond(self, tasks: Sequence[TrainTask]) -> tuple[list[TrainResult], int]:
        """Each task's result, in order, and how many were answered exactly: the populations
        whose algorithm answers exactly are asked their best response (``Backend.best_respond``,
        no learner); the others, and those that decline, train."""
        ctx = self.ctx
        asked = {k: BestResponseTask(population=spec.population, seed=spec.seed, snapshot=spec.snapshot,
                                     opponents=task.opponents)
                 for k, task in enumerate(tasks) for spec in task.learners
                 if len(task.learners) == 1 and spec.snapshot is not None and ctx.populations[spec.population].answers}
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
        return default_self_play(self.ctx.env, [agent.space for agent in self.ctx.populations.values()])

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
