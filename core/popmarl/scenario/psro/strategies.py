"""How PSRO's populations answer its meta-strategy: the strategy a PSRO run is given.

* :class:`PerSeatResponses` (PSRO): one best response per population, against every
  seat's mixture.
* :class:`JointResponses` (JPSRO, Marris et al. 2021; the ``ce`` and ``cce`` solvers):
  the other seats drawn together from a joint distribution over profiles, marginalised
  over the learner's seat (CCE) or conditioned on each policy it recommends (CE); only
  novel answers join.
* :class:`PipelineResponses` (Pipeline PSRO, McAleer et al. 2020; ``training.pipeline``):
  several learners per population at once, by level (:mod:`popmarl.scenario.psro.pipeline`).

A strategy builds an iteration's train tasks, says which answers join the populations,
tidies the learners after an iteration, names learners in the metrics, and says whether
the oracle's gain is measured against per-seat mixtures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from popmarl.data.seeds import stream_seed
from popmarl.data.tasks import TrainTask
from popmarl.gametheory.payoffs import evaluate_missing
from popmarl.scenario.meta_game import seat_meta_strategy
from popmarl.scenario.psro.pipeline import active_keys, active_policy_id, restricted
from popmarl.scenario.psro.state import PSROState

if TYPE_CHECKING:
    from popmarl.scenario.psro.tasks import PSROTasks


class ResponseStrategy:
    """PSRO's per-seat answers (:class:`PerSeatResponses`) and the hooks the others change."""

    #: Whether the oracle's gain against per-seat mixtures is measured (``oracle_gain``).
    per_seat_gains: bool = True
    #: Whether an answer equal to a policy its population holds is dropped.
    novel_only: bool = False

    def tasks(self, psro: PSROTasks, state: PSROState, iteration: int) -> list[TrainTask]:
        """One task per population: its learner best-responds, in its seats, to every
        seat's mixture over its population's policies."""
        ctx = psro.ctx
        agents = ctx.env.agents
        opponents = seat_meta_strategy(agents, [state.policies[ctx.mapping.population_of[a]] for a in agents],
                                       state.meta)
        return [psro.answer_task(state, iteration, k, population, opponents=opponents)
                for k, population in enumerate(ctx.mapping.populations)]

    def extra_eval_steps(self) -> int:
        """Env steps this iteration's tasks took to evaluate before training (pipeline)."""
        return 0

    def after(self, state: PSROState) -> None:
        """Tidy ``state.learners`` once the iteration's answers joined."""

    def metrics_name(self, state: PSROState, key: str) -> str:
        """A learner's name in the metrics: its key."""
        return key


class PerSeatResponses(ResponseStrategy):
    """PSRO: one best response per population to every seat's mixture."""


class JointResponses(ResponseStrategy):
    """JPSRO: each population's learner meets the other seats drawn together from the
    joint meta-strategy; with a CE solver, one learner per recommended policy."""

    per_seat_gains = False
    novel_only = True  # several answers per population (CE) often coincide (OpenSpiel jpsro's "all_novel")

    def tasks(self, psro: PSROTasks, state: PSROState, iteration: int) -> list[TrainTask]:
        """One task per population and recommendation: the first's learner is the
        population's (its key the population's name, its state checkpointed), each further
        one a new learner under a key of its own."""
        ctx = psro.ctx
        tasks = []
        for k, population in enumerate(ctx.mapping.populations):
            seat = ctx.env.agents.index(ctx.mapping.agents_of(population)[0])
            for j, joint in enumerate(psro.joint_opponents(state, seat)):
                tasks.append(psro.answer_task(state, iteration, k, population, opponents=joint, recommendation=j))
        return tasks


@attrs.define
class PipelineResponses(ResponseStrategy):
    """Pipeline PSRO with ``levels`` active learners per population."""

    levels: int
    _eval_steps: int = 0

    def tasks(self, psro: PSROTasks, state: PSROState, iteration: int) -> list[TrainTask]:
        """One task per population and level; the lowest against the meta-strategy (and
        frozen after the iteration), each higher one against the restricted game's over
        the frozen policies and the active learners below it that have trained (their
        current weights, evaluated now)."""
        ctx = psro.ctx
        agents, population_of = ctx.env.agents, ctx.mapping.population_of
        actives = {p: active_keys(p, len(ids), self.levels) for p, ids in state.policies.items()}
        for keys in actives.values():
            for key in keys:
                if key in state.learners:
                    ctx.backend.add_policy(active_policy_id(key), state.learners[key].weights)
        trained = {p: [key for key in keys if key in state.learners] for p, keys in actives.items()}
        axis_ids = [list(state.policies[population_of[a]]) + [active_policy_id(key) for key in trained[population_of[a]]]
                    for a in agents]
        table, self._eval_steps, _ = evaluate_missing(
            state.table, axis_ids, backend=ctx.backend, agents=agents,
            episodes=ctx.config.evaluation.episodes_per_entry,
            seed=stream_seed(ctx.config.seed, "psro.pipeline", iteration))
        tasks = []
        for k, population in enumerate(ctx.mapping.populations):
            for level, key in enumerate(actives[population]):
                sizes = [len(state.policies[population_of[a]])
                         + len([t for t in actives[population_of[a]][:level] if t in state.learners]) for a in agents]
                mixtures = state.meta if level == 0 else psro.solve_values(restricted(table, sizes)).mixtures
                opponents = seat_meta_strategy(agents, [ids[:n] for ids, n in zip(axis_ids, sizes)], mixtures)
                tasks.append(psro.answer_task(state, iteration, k, population, opponents=opponents, level=level,
                                              key=key))
        return tasks

    def extra_eval_steps(self) -> int:
        return self._eval_steps

    def after(self, state: PSROState) -> None:
        """The lowest learners are frozen now: not active any more."""
        for population, ids in state.policies.items():
            state.learners = {k: v for k, v in state.learners.items()
                              if k not in active_keys(population, len(ids) - 1, 1)}

    def metrics_name(self, state: PSROState, key: str) -> str:
        """The active learners by level (the lowest, just frozen, under its population's
        name, as PSRO's one learner)."""
        population, name = key.rsplit(".", 1)
        level = int(name.removeprefix("br")) - (len(state.policies[population]) - 1)
        return population if level == 0 else f"{population}/level{level}"
