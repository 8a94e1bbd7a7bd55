"""Where a train task runs in-process: its learners act, record and update here.

:func:`run_task` starts the task's learners (:class:`~popmarl.learner.Learners`), then
repeats: play ``episodes_per_update`` games with the learners' current policies against
opponents drawn per episode (:meth:`~popmarl.rollout.RolloutWorker.explore`), and update
each learner on the episodes it played; until the budget is spent. A learner whose
algorithm answers exactly is not started: its answer is computed instead, and no games
are played (scenarios ask such questions with ``Backend.best_respond``:
:mod:`popmarl.answering`). The local backend calls it directly (the ray backend too, in
a learner actor, for co-learning tasks: see ``popmarl_ray``).
"""

from __future__ import annotations

import time
import numpy as np

from popmarl.answering import PolicyOf, exact_answer
from popmarl.keep import KeptWeights
from popmarl.learner import LearnerError, Learners
from popmarl.progress import TrainingProgress
from popmarl.records import FrozenPolicy, LearnerState, TrainResult, TrainTask, Weights
from popmarl.rollout import OpponentDraw, RolloutWorker, Seating


def run_task(task: TrainTask, *, learners: Learners, rollout: RolloutWorker, policy_of: PolicyOf) -> TrainResult:
    """Run ``task``: train its learners for its budget; return what it asks for. A
    learner whose algorithm answers exactly is not started: its answer is its snapshot
    (:func:`~popmarl.answering.exact_answer`)."""
    start = time.monotonic()
    answered = _exact_answers(task, learners, policy_of)
    prepared = {spec.key: learners.prepare(spec, policy_of) for spec in task.learners if spec.key not in answered}
    training = [(spec, prepared[spec.key]) for spec in task.learners
                if spec.key in prepared and prepared[spec.key].trainer is not None]
    kept = {spec.key: KeptWeights(task.budget) for spec, _ in training}
    progress = TrainingProgress(task.budget, [spec.key for spec, _ in training])
    learner_metrics: dict[str, dict[str, float]] = {spec.key: {} for spec in task.learners}
    env_steps = episodes = rounds = 0
    updates = dict.fromkeys(kept, 0)
    team_returns: list[float] = []
    if training:
        draw = OpponentDraw.of(task.opponents, task.joint, policy_of)
        budget = task.budget
        version = 1
        for spec, learner in training:
            if kept[spec.key].best:
                kept[spec.key].published(version, learner.policy.get_weights())
        while True:
            chunk = budget.episodes_per_update
            if budget.max_episodes is not None:
                chunk = min(chunk, budget.max_episodes - episodes)
            played = rollout.explore(
                learners=[Seating(policy=learner.policy, seats=spec.seats, one_seat=spec.one_seat)
                          for spec, learner in training],
                opponents=draw, max_episodes=chunk,
                max_steps=None if budget.max_env_steps is None else budget.max_env_steps - env_steps,
                seed=task.seed + 7919 * (rounds + 1), self_play=budget.self_play,
                opponent_epsilon=budget.opponent_epsilon)
            env_steps += played.env_steps
            episodes += len(played.tags)
            team_returns.extend(played.returns.sum(axis=1).tolist())
            for (spec, learner), trajectories in zip(training, played.episodes):
                returns = trajectories.returns.tolist()
                progress.played(spec.key, returns)
                kept[spec.key].played(version, returns)
                if trajectories:
                    assert learner.trainer is not None
                    update = learner.trainer.update(trajectories)
                    learner_metrics[spec.key].update({k: float(v) for k, v in update.items()})
                    updates[spec.key] += 1
            rounds += 1
            progress.round_done()
            version += 1
            for spec, learner in training:
                if kept[spec.key].best:
                    kept[spec.key].published(version, learner.policy.get_weights())
            elapsed = time.monotonic() - start
            if not played.tags or progress.spent(env_steps, episodes, elapsed):
                break
    for spec, _ in training:
        learner_metrics[spec.key].update({"updates": float(updates[spec.key]),
                                          **progress.learners[spec.key].metrics(), **kept[spec.key].metrics()})
    policies = []
    for spec in task.learners:
        if spec.snapshot is None:
            continue
        weights = answered[spec.key] if spec.key in answered else prepared[spec.key].policy.get_weights()
        if spec.key in kept:
            weights = kept[spec.key].final(weights)
        policies.append(FrozenPolicy(spec=spec.snapshot, weights=weights))
    metrics = {"train_time_s": time.monotonic() - start}
    if team_returns:
        metrics["train_mean_team_return"] = float(np.mean(team_returns))
    states = {}
    if task.return_state:  # an exact answer's state is its weights: it has no trainer
        states = {spec.key: prepared[spec.key].state() if spec.key in prepared else
                  LearnerState(key=spec.key, population=spec.population, seed=spec.seed, weights=answered[spec.key])
                  for spec in task.learners}
    return TrainResult(policies=tuple(policies), states=states, learner_metrics=learner_metrics, metrics=metrics,
                       env_steps=env_steps, episodes=episodes)


def _exact_answers(task: TrainTask, learners: Learners, policy_of: PolicyOf) -> dict[str, Weights]:
    """The exact answer of each learner whose algorithm answers, by key (one that
    declines, returning None, trains instead)."""
    answers: dict[str, Weights] = {}
    for spec in task.learners:
        agent = learners.agents[spec.population]
        if not agent.answers:
            continue
        if len(task.learners) > 1:
            raise LearnerError(f"learner {spec.key}: algorithm {agent.algorithm_name} answers exactly and "
                               "cannot co-learn; give it a train task of its own")
        weights = exact_answer(agent, task.opponents, task.joint, seed=spec.seed, policy_of=policy_of)
        if weights is not None:
            answers[spec.key] = weights
    return answers
