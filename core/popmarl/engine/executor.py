"""Executes train and evaluate tasks against a local policy store.

The local backend runs one executor in-process; remote backends run one per worker.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs
import numpy as np

from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.engine.exact_answers import answer
from popmarl.interfaces.backend import Components, RunSetup
from popmarl.interfaces.env import ExactEnv
from popmarl.engine.learners import Learners
from popmarl.data.outcomes import outcome_signs
from popmarl.interfaces.policy import Policy
from popmarl.interfaces.uniform_play import is_uniform_play, uniform_play
from popmarl.data.policies import Weights
from popmarl.data.tasks import (
    BestResponseResult,
    BestResponseTask,
    EvalResult,
    EvalTask,
    TrainResult,
    TrainTask,
)
from popmarl.engine.rollout import ProfileDraw, RolloutWorker
from popmarl.engine.seating import OpponentDraw
from popmarl.engine.learner_loop import run_task

T = TypeVar("T")


def population_of_policy(policy_id: str) -> str:
    """The population part of a policy id (``population/index``)."""
    return policy_id.rsplit("/", 1)[0]


class Executor:
    """Holds the env, each population's algorithm, the frozen policies and the learners
    of one process."""

    def __init__(self, setup: RunSetup, components: Components) -> None:
        self.setup = setup
        self.env = components.env
        self.populations = {population: PopulationAlgorithm(space=space, algorithm=components.algorithms[population],
                                                       env=self.env, algorithm_name=setup.algorithms[population][0])
                            for population, space in setup.spaces.items()}
        self.rollout = RolloutWorker(env=self.env, num_envs=setup.num_envs)
        self.train_rollout = RolloutWorker(env=self.env, num_envs=setup.train_num_envs)
        self.policies: dict[str, Policy] = {}
        self.learners = Learners(self.populations)
        self._agent_set = frozenset(self.env.agents)

    def add_policy(self, policy_id: str, weights: Weights) -> None:
        """Rebuild a frozen policy from its weights (with its population's algorithm; the
        weights of uniformly random play as that, :mod:`popmarl.interfaces.uniform_play`)."""
        agent = self.populations[population_of_policy(policy_id)]
        self.policies[policy_id] = (uniform_play(agent.space.action_space) if is_uniform_play(weights)
                                    else agent.frozen(weights))

    def policy(self, policy_id: str) -> Policy:
        return self.policies[policy_id]

    def train(self, task: TrainTask) -> TrainResult:
        """Run ``task`` here: its learners act and update in this process."""
        return run_task(task, learners=self.learners, rollout=self.train_rollout, policy_of=self.policy)

    def best_respond(self, task: BestResponseTask) -> BestResponseResult:
        """Answer ``task`` with its population's algorithm (no learner is started)."""
        return answer(self.populations[task.population], task, self.policy)

    @property
    def exact(self) -> bool:
        """Whether payoff entries are computed exactly."""
        if self.setup.exact_evaluation == "never":
            return False
        return isinstance(self.env, ExactEnv) and self.env.supports_exact()

    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        """Every task's entry: exact where the env allows (all tasks' profiles in one
        call), else sampled, the tasks of each seed sharing one vector of games."""
        for task in tasks:
            self._check_seats(task)
        results: dict[int, EvalResult] = {}
        if self.exact:
            results.update(self._exact(tasks))
        sampled = [k for k in range(len(tasks)) if k not in results or results[k].wins is None and tasks[k].outcomes]
        by_seed: dict[int, list[int]] = {}
        for k in sampled:
            by_seed.setdefault(tasks[k].seed, []).append(k)
        for seed, group in by_seed.items():
            for k, result in zip(group, self._sampled([tasks[k] for k in group], seed)):
                exact = results.get(k)
                results[k] = result if exact is None else attrs.evolve(
                    result, returns=exact.returns, exact=True)  # exact returns, sampled outcomes
        return [results[k] for k in range(len(tasks))]

    def _check_seats(self, task: EvalTask) -> None:
        seats = task.seats
        if len(seats) == len(self._agent_set) and self._agent_set.issuperset(seats):
            return
        missing = [a for a in self.env.agents if a not in seats]
        unknown = [a for a in seats if a not in self._agent_set]
        if missing or unknown:
            raise ValueError(f"EvalTask {task.index}: every seat of {', '.join(self.env.agents)} is played by one "
                             f"policy, mixture or joint distribution; missing {missing}, unknown {unknown}")

    def _exact(self, tasks: Sequence[EvalTask]) -> dict[int, EvalResult]:
        """The tasks whose mixtures expand to at most :data:`EXACT_PROFILES` pure profiles,
        computed exactly (each distinct profile once, over all tasks), by position."""
        assert isinstance(self.env, ExactEnv)
        agents = self.env.agents
        expanded = {k: pure for k, t in enumerate(tasks) if (pure := pure_profiles(t, agents)) is not None}
        distinct: dict[tuple[str, ...], int] = {}
        for pure in expanded.values():
            for profile, _ in pure:
                distinct.setdefault(profile, len(distinct))
        live = [{a: self.policies[pid] for a, pid in zip(agents, profile)} for profile in distinct]
        values = np.asarray(self.env.exact_returns(live)) if live else np.zeros((0, len(agents)))
        wanted = any(tasks[k].outcomes for k in expanded)
        outcomes = self.env.exact_outcomes(live) if live and wanted else None
        results = {}
        for k, pure in expanded.items():
            rows = [distinct[profile] for profile, _ in pure]
            weights = np.array([w for _, w in pure])
            fields: dict[str, Any] = {}
            if outcomes is not None and tasks[k].outcomes:
                wins, draws, losses = np.tensordot(weights, np.asarray(outcomes)[rows], axes=1)
                fields = {"wins": wins, "draws": draws, "losses": losses, "exact_outcomes": True}
            returns = values[rows[0]] if len(rows) == 1 else weights @ values[rows]  # one profile: as computed
            results[k] = EvalResult(index=tasks[k].index, returns=returns, exact=True, **fields)
        return results

    def _sampled(self, tasks: Sequence[EvalTask], seed: int) -> list[EvalResult]:
        """The tasks' entries over their episodes, in one vector of games seeded ``seed``."""
        entries = [(self._profile_of(t), t.episodes) for t in tasks]
        played = self.rollout.play(entries, seed=seed)
        n = len(self.env.agents)
        tags = np.asarray(played.tags, dtype=int)
        totals = np.zeros((len(tasks), n))
        np.add.at(totals, tags, played.returns)
        signs = outcome_signs(played.returns)
        counts = np.zeros((3, len(tasks), n))
        for row, outcome in enumerate((1, 0, -1)):
            np.add.at(counts[row], tags, signs == outcome)
        episodes = max(sum(t.episodes for t in tasks), 1)
        return [EvalResult(index=t.index, returns=totals[k] / max(t.episodes, 1), episodes=t.episodes,
                           env_steps=played.env_steps * t.episodes // episodes,
                           wins=counts[0, k], draws=counts[1, k], losses=counts[2, k])
                for k, t in enumerate(tasks)]

    def _profile_of(self, task: EvalTask) -> Mapping[str, Policy] | ProfileDraw:
        """The task's fixed profile, or how to draw one per episode."""
        fixed = {agent: self.policies[pid] for agent, pid in task.profile.items()}
        if not task.meta.agents:
            return fixed
        draw = OpponentDraw.of(task.meta, self.policy)
        rest = [a for a in self.env.agents if a not in fixed]
        return lambda rng: {**fixed, **draw.draw(rng, rest)}


#: A task whose mixtures expand to more pure profiles than this is sampled, also on an exact env.
EXACT_PROFILES = 4096


def pure_profiles(task: EvalTask, agents: Sequence[str]) -> list[tuple[tuple[str, ...], float]] | None:
    """The task as (pure profile: one policy id per seat of ``agents``, probability) pairs
    over its mixtures' and joint distribution's supports; None past :data:`EXACT_PROFILES`."""
    meta = task.meta
    if not meta.agents:  # one fixed profile (PSRO's payoff entries)
        return [(tuple(task.profile[a] for a in agents), 1.0)]
    choices: list[list[tuple[dict[str, str], float]]] = [[(dict(task.profile), 1.0)]]
    for agent in meta.alone:
        choices.append([({agent: pid}, p) for pid, p in _normalised(meta.support(agent))])
    if meta.joint_agents:
        choices.append([(dict(zip(meta.joint_agents, profile)), p) for profile, p in _normalised(meta.joint_support())])
    if int(np.prod([len(c) for c in choices])) > EXACT_PROFILES:
        return None
    pure = []
    for combination in itertools.product(*choices):
        profile: dict[str, str] = {}
        weight = 1.0
        for part, p in combination:
            profile.update(part)
            weight *= p
        pure.append((tuple(profile[a] for a in agents), weight))
    return pure


def _normalised(support: Sequence[tuple[T, float]]) -> list[tuple[T, float]]:
    total = sum(p for _, p in support)
    return [(item, p / total) for item, p in support]
