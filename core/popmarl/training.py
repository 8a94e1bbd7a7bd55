"""Where a train task runs in-process: its learners act, record and update here.

:func:`run_task` starts the task's learners (:class:`~popmarl.learner.Learners`), then
repeats: play ``episodes_per_update`` games with the learners' current policies against
opponents drawn per episode (:meth:`~popmarl.rollout.RolloutWorker.explore`), and update
each learner on the episodes it played; until the budget is spent. An exact algorithm
answers instead (its learner is the best response, no games are played). The local
backend calls it directly (the ray backend too, in a learner actor, for co-learning
tasks: see ``popmarl_ray``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from popmarl.env import CorrelatedProfile, MixedProfile
from popmarl.keep import KeptWeights
from popmarl.learner import Learner, LearnerError, Learners
from popmarl.policy import Policy
from popmarl.progress import TrainingProgress
from popmarl.records import FrozenPolicy, TrainResult, TrainTask, Weights
from popmarl.rollout import OpponentDraw, RolloutWorker, Seating

PolicyOf = Callable[[str], Policy]


def run_task(task: TrainTask, *, learners: Learners, rollout: RolloutWorker, policy_of: PolicyOf) -> TrainResult:
    """Run ``task``: train its learners for its budget; return what it asks for."""
    prepared = [learners.prepare(spec, policy_of) for spec in task.learners]
    start = time.monotonic()
    answered = _exact_answers(task, prepared, policy_of)
    training = [(spec, learner) for spec, learner in zip(task.learners, prepared)
                if learner.trainer is not None and spec.key not in answered]
    kept = {spec.key: KeptWeights(task.budget) for spec, _ in training}
    progress = TrainingProgress(task.budget, [spec.key for spec, _ in training])
    learner_metrics: dict[str, dict[str, float]] = {spec.key: {} for spec in task.learners}
    env_steps = episodes = rounds = 0
    updates = dict.fromkeys(kept, 0)
    team_returns: list[float] = []
    if training:
        draw = opponent_draw(task, policy_of)
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
    for spec, learner in zip(task.learners, prepared):
        if spec.snapshot is None:
            continue
        weights = answered[spec.key] if spec.key in answered else learner.policy.get_weights()
        if spec.key in kept:
            weights = kept[spec.key].final(weights)
        policies.append(FrozenPolicy(spec=spec.snapshot, weights=weights))
    metrics = {"train_time_s": time.monotonic() - start}
    if team_returns:
        metrics["train_mean_team_return"] = float(np.mean(team_returns))
    states = {learner.key: learner.state() for learner in prepared} if task.return_state else {}
    return TrainResult(policies=tuple(policies), states=states, learner_metrics=learner_metrics, metrics=metrics,
                       env_steps=env_steps, episodes=episodes)


def _exact_answers(task: TrainTask, prepared: Sequence[Learner], policy_of: PolicyOf) -> dict[str, Weights]:
    """The weights of each learner whose algorithm answers exactly, by key (its policy
    becomes that answer; an algorithm may decline, returning None, and train instead)."""
    answers: dict[str, Weights] = {}
    for spec, learner in zip(task.learners, prepared):
        if not learner.agent.answers:
            continue
        if len(task.learners) > 1:
            raise LearnerError(f"learner {spec.key}: algorithm {learner.agent.algorithm_name} answers exactly and "
                               "cannot co-learn; give it a train task of its own")
        answer = learner.agent.best_response(mixed_profile(task, policy_of), seed=spec.seed,
                                             correlated=correlated_profile(task, policy_of))
        if answer is not None:
            answers[spec.key] = answer.get_weights()
            learner.policy.set_weights(answers[spec.key])
    return answers


def mixed_profile(task: TrainTask, policy_of: PolicyOf) -> MixedProfile:
    """Each seat's opponents as (policy, probability) pairs (an exact oracle's view)."""
    return {o.agent: [(policy_of(pid), p) for pid, p in o.support()] for o in task.opponents}


def correlated_profile(task: TrainTask, policy_of: PolicyOf) -> CorrelatedProfile | None:
    """The task's joint distribution over its seats' profiles as live policies (None without one)."""
    if task.joint is None:
        return None
    agents = task.joint.agents
    return [({a: policy_of(pid) for a, pid in zip(agents, profile, strict=True)}, p) for profile, p in task.joint.support()]


def opponent_draw(task: TrainTask, policy_of: PolicyOf) -> OpponentDraw:
    """The task's opponents as live policies, ready to draw per episode."""
    seats = {}
    for seat in task.opponents:
        support = seat.support()
        probs = np.asarray([p for _, p in support], dtype=float)
        seats[seat.agent] = ([policy_of(pid) for pid, _ in support], probs / probs.sum())
    joint = None
    if task.joint is not None:
        profiles = task.joint.support()
        probs = np.asarray([p for _, p in profiles], dtype=float)
        joint = (task.joint.agents, [[policy_of(pid) for pid in prof] for prof, _ in profiles], probs / probs.sum())
    return OpponentDraw(seats, joint)
