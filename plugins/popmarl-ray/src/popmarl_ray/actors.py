"""The rollout worker and learner actors.

Each actor rebuilds the run's env and each population's algorithm from the
:class:`~popmarl.api.RunSetup` (component names and params) and keeps its own copy
of the frozen policies in a core :class:`~popmarl.api.engine.Executor`, which runs the
evaluate tasks and holds the learner actor's learners by key. A failure
while building is kept and raised by ``ready``, so it reaches the driver as the
component's own error rather than as a dead actor.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import ray

from popmarl.api import (BestResponseResult, BestResponseTask, Components, EvalResult, EvalTask,
                         LearnerSpec, Policy, Registries, RunSetup, TrainResult, TrainTask, Weights, stream_seed)
from popmarl.api.engine import Executor, Group, OpponentDraw, Seating, run_task
from popmarl_ray.feed import RayFeed, stream_of

#: Components registered in the driver without an entry point (``with_component``),
#: shipped to the actors by value: ``{(kind, name): class}``.
LocalComponents = Mapping[tuple[str, str], Any]
#: How many learning policies (training attempts) a worker keeps a copy of.
ACTING_CACHE = 8
#: How long a worker waits for an on-policy learner to want games again (it is updating).
RESERVE_WAIT_S = 1.0


def lockstep_seed(seed: int, version: int, chunk: int) -> int:
    """The seed of the ``chunk``-th reservation of weights ``version`` of a train task
    seeded ``seed``: part ``chunk`` of that version's round (stream ``learner.round``), so
    the first is the local backend's seed of the round played with that version
    (:class:`popmarl.engine.learner_loop.LocalFeed`) and a run with one worker plays the
    same games as a local one."""
    return stream_seed(seed, "learner.round", version, chunk)


@attrs.frozen(kw_only=True)
class ExploreReport:
    """What one explore call played: env steps, episodes, the weights version, and
    whether the episode server took them (False once the attempt is over)."""

    env_steps: int
    episodes: int
    version: int
    accepted: bool


def build_executor(setup: RunSetup, local: LocalComponents, num_cpus: float) -> Executor:
    """The env, each population's algorithm and the policy store of this process: by
    registered name, or the classes the driver registered in its process only (``local``)."""
    found = Registries.current()
    for (kind, name), obj in local.items():
        found = found.with_component(kind, name, obj)
    env = found.component("envs", setup.env_name, setup.env_params)
    algorithms = {population: found.component("algorithms", name, params)
                  for population, (name, params) in setup.algorithms.items()}
    torch = sys.modules.get("torch")
    if torch is not None:  # one intra-op thread per reserved CPU, not one per core of the node
        torch.set_num_threads(max(1, int(round(num_cpus))))
    return Executor(setup, Components(env=env, algorithms=algorithms))  # type: ignore[arg-type]


def writable(weights: Weights) -> dict[str, np.ndarray]:
    """Own copies of arrays read from the object store (which are read-only views)."""
    return {name: np.array(value) for name, value in weights.items()}


class _Actor:
    """Builds the executor; ``ready`` reports the process id or the building error."""

    def __init__(self, setup: RunSetup, local: LocalComponents, num_cpus: float) -> None:
        self._error: BaseException | None = None
        try:
            self.executor = build_executor(setup, local, num_cpus)
        except Exception as exc:
            self._error = exc
        self.setup = setup

    def ready(self) -> int:
        if self._error is not None:
            raise self._error
        return os.getpid()

    def pid(self) -> int:
        return os.getpid()

    def add_policies(self, policy_ids: Sequence[str], *weights: Weights) -> None:
        """Rebuild frozen policies (weights arrive resolved from the object store)."""
        for policy_id, w in zip(policy_ids, weights):
            self.executor.add_policy(policy_id, writable(w))


class RolloutWorkerActor(_Actor):
    """Fills payoff entries and plays training episodes for the learners."""

    def __init__(self, setup: RunSetup, local: LocalComponents, num_cpus: float, params: Any, data: Any) -> None:
        super().__init__(setup, local, num_cpus)
        self.params = params
        self.data = data
        self._acting: dict[str, tuple[int, dict[str, Policy]]] = {}

    def use_servers(self, params: Any, data: Any) -> None:
        """Call these servers from now on (they replace dead ones; versions start anew)."""
        self.params, self.data = params, data
        self._acting.clear()

    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        """A batch of payoff entries (exact, or sampled in one shared vector of games)."""
        return self.executor.evaluate(tasks)

    def best_respond(self, tasks: Sequence[BestResponseTask]) -> list[BestResponseResult]:
        """A batch of exact best responses."""
        return [self.executor.best_respond(task) for task in tasks]

    def explore(self, key: str, task: TrainTask, episodes: int, seed: int) -> ExploreReport:
        """Play ``episodes`` games of every learner of training attempt ``key`` (each with
        the newest weights it has published, in its seats) against the task's opponents,
        and queue each learner's share on its stream."""
        acting = [self._acting_policies(stream_of(key, spec.key), spec, task) for spec in task.learners]
        if any(a is None for a in acting):
            return ExploreReport(env_steps=0, episodes=0, version=0, accepted=False)
        held = [(stream_of(key, spec.key), entry[0]) for spec, entry in zip(task.learners, acting) if entry is not None]
        episodes, chunk = ray.get(self.data.reserve.remote(held, episodes, RESERVE_WAIT_S))
        if not episodes:  # an on-policy learner is updating, or has newer weights: nothing to play now
            return ExploreReport(env_steps=0, episodes=0, version=held[0][1], accepted=True)
        if chunk >= 0:  # lock step: seeded by version, as the local backend's round of that version
            seed = lockstep_seed(task.seed, held[0][1], chunk)
        agents, population_of = self.executor.populations, self.executor.learners.population_of
        seatings = []
        for spec, entry in zip(task.learners, acting):
            assert entry is not None
            members = entry[1]
            seatings.append(Seating(policy=members[spec.population], seats=spec.seats, one_seat=spec.one_seat,
                                    name=spec.key, joint=agents[spec.population].algorithm.joint_view,
                                    seat_policies={seat: members[population_of[seat]] for seat in spec.seats
                                                   if seat not in agents[spec.population].space.agents}))
        played = self.executor.train_rollout.explore(
            learners=seatings, opponents=OpponentDraw.of(task.opponents, self.executor.policy),
            max_episodes=episodes, max_steps=None, seed=seed, self_play=task.budget.self_play,
            opponent_epsilon=task.budget.opponent_epsilon,
        )
        items = [(stream_of(key, spec.key), entry[0], trajectories)
                 for spec, entry, trajectories in zip(task.learners, acting, played.episodes) if entry is not None]
        accepted = bool(ray.get(self.data.put_many.remote(items, len(played.tags), played.env_steps, played.games())))
        return ExploreReport(env_steps=played.env_steps, episodes=len(played.tags), version=items[0][1],
                             accepted=accepted)

    def _acting_policies(self, stream: str, spec: LearnerSpec, task: TrainTask) -> tuple[int, dict[str, Policy]] | None:
        """The learner's newest weights (a policy per member population), pulled only
        when newer than the copy held."""
        have, members = self._acting.get(stream, (0, None))
        pulled = ray.get(self.params.pull.remote(stream, have))
        if pulled is not None:
            version, (ref,) = pulled
            weights = ray.get(ref)
            if members is None:
                members = {p: self.executor.populations[p].make_policy(seed=task.seed) for p in weights}
            for population, policy in members.items():
                policy.set_weights(writable(weights[population]))
            self._acting.pop(stream, None)
            self._acting[stream] = (version, members)
            while len(self._acting) > ACTING_CACHE:
                self._acting.pop(next(iter(self._acting)))
            have = version
        return None if members is None else (have, members)


class LearnerActor(_Actor):
    """The learners of the keys routed to it (held by key between tasks, in the core
    :class:`~popmarl.engine.learners.Learners` of its executor). Every train task runs the core
    learner loop (:func:`~popmarl.api.engine.run_task`) fed by the rollout workers
    (:class:`~popmarl_ray.feed.RayFeed`); a learner that does not learn needs no feed."""

    def __init__(self, setup: RunSetup, local: LocalComponents, num_cpus: float, params: Any, data: Any,
                 max_staleness: int) -> None:
        super().__init__(setup, local, num_cpus)
        self.params, self.data = params, data
        self.max_staleness = max_staleness

    def use_servers(self, params: Any, data: Any) -> None:
        """Call these servers from now on (they replace dead ones)."""
        self.params, self.data = params, data

    def train(self, task: TrainTask, key: str) -> TrainResult:
        """Run ``task``; its learners' episodes and weights go under attempt ``key``."""
        executor = self.executor

        def feed(task: TrainTask, group: Group, policy_of: Any, population_of: Any) -> RayFeed:
            return RayFeed(params=self.params, data=self.data, attempt=key, task=task, group=group,
                           max_staleness=self.max_staleness)

        return run_task(task, learners=executor.learners, policy_of=executor.policy, feed=feed)

    def holds(self) -> list[str]:
        """The keys of the learners held here."""
        return list(self.executor.learners.held)
