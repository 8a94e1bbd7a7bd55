"""Scenario ``marl``: independent or parameter-shared multi-agent learning.

Every population maps to one learning policy (``agents.mapping: shared`` gives
parameter sharing, ``per_player`` independent learners); populations listed in
``frozen`` keep a fixed policy (their initial one, or weights from a ``.npz`` file of an
earlier run), or a fixed mixture: an earlier run's population and its meta-strategy
(:class:`FrozenRun`), copied into this run at its start and drawn from once per episode.
Each iteration co-trains the learners for the ``training`` budget, then
plays ``evaluation.episodes_per_entry`` evaluation episodes; the run directory,
checkpoints, resume and trackers are those of ``psro``. A config setting what only
``psro`` uses (``solver``, ``stopping.target_nash_conv``, the best-response ``training``
keys) is rejected rather than silently ignored.

Its parts: :mod:`~popmarl.scenario.marl.state` (the state and its codec, and the start),
:mod:`~popmarl.scenario.marl.frozen_runs` (frozen populations taken from other runs) and
:mod:`~popmarl.scenario.marl.evaluation` (evaluation and NashConv); here, the checks, an
iteration and the summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from popmarl.config.schema import RunConfig
from popmarl.data.learners import LearnerInit, LearnerSpec
from popmarl.data.policies import PolicySpec
from popmarl.data.population import AgentMapping, policy_id
from popmarl.data.seeds import stream_seed
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import TrainResult, TrainTask
from popmarl.errors import ConfigError
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.scenario.base import Work
from popmarl.scenario.marl.evaluation import evaluate, frozen_plays, nash_conv, seat_mixtures
from popmarl.scenario.marl.frozen_runs import frozen_runs, read_sources
from popmarl.scenario.progress import one_team
from popmarl.scenario.marl.state import MARLBase, MARLConfig, MARLState

__all__ = ["MARL", "MARLConfig", "MARLState"]

#: ``training`` keys about one best response against frozen opponents: ``psro`` only.
PSRO_ONLY_TRAINING = ("window", "target_return", "target_win_rate", "patience", "min_env_steps", "keep", "self_play",
                      "opponent_epsilon", "init", "pipeline")


@attrs.frozen(kw_only=True)
class MARLWork:
    """What an iteration did, for its metrics line: the train result, the evaluation's
    mean returns and win rates, and its timings."""

    result: TrainResult
    returns: Mapping[str, float]
    win_rates: Mapping[str, float]
    train_time_s: float
    eval_time_s: float


class MARL(MARLBase):
    """Co-training of every non-frozen population, evaluated each iteration."""

    Config = MARLConfig

    def check(self, *, config: RunConfig, mapping: AgentMapping) -> None:
        unknown = sorted(set(self.config.frozen) - set(mapping.populations))
        if unknown:
            raise ConfigError(f"scenario.params.frozen: unknown population(s) {', '.join(unknown)}; "
                              f"populations: {', '.join(mapping.populations)}")
        if set(mapping.populations) <= set(self.config.frozen):
            raise ConfigError("scenario.params.frozen: every population is frozen; nothing would learn")
        frozen_runs(self.config.frozen)  # their form; what they name is read by check_populations
        # Set in a marl run, these would be silently ignored; a value equal to the default
        # cannot be told from an unset one, and changes nothing either.
        psro_only = config.training.given(PSRO_ONLY_TRAINING)
        if psro_only:
            raise _psro_only(f"training.{psro_only[0]}", "marl co-trains every learner for the training budget: "
                             "max_env_steps, max_episodes, max_wall_time_s")
        for name in ("target_nash_conv", "patience"):
            if getattr(config.stopping, name) is not None:
                raise _psro_only(f"stopping.{name}", "marl stops at stopping.max_iterations or "
                                 "max_wall_time_s; it reports nash_conv where the env computes it")
        if config.solver != attrs.fields(RunConfig).solver.default:
            raise _psro_only("solver", "marl has no meta-game to solve: every population plays its newest policy")

    def check_populations(self, populations: Mapping[str, PopulationAlgorithm]) -> None:
        """Every population that is not frozen co-learns: its algorithm must train (one
        that makes no trainer would leave its policy as it started, silently) and not be
        an exact oracle (which answers a fixed opponent, it does not co-learn)."""
        named = len({a.algorithm_name for a in populations.values()}) > 1
        for population, agent in populations.items():
            if population in self.config.frozen:
                continue
            where = f"algorithm.{population}" if named else "algorithm"
            if not agent.learns or agent.answers:
                what = "is an exact oracle" if agent.answers else "does not learn"
                raise ConfigError(f"{where}: {agent.algorithm_name} {what}; the marl scenario trains every "
                                  "population not in scenario.params.frozen with a learning algorithm "
                                  "(e.g. dqn, ppo, a2c)")
        if not self.resuming:  # a resumed run has its copies: the other runs are not read again
            read_sources(self.config.frozen, populations)  # that they exist and fit (read again at the start)

    # -- an iteration -----------------------------------------------------------------
    def iterate(self, state: MARLState, iteration: int) -> Work:
        ctx = self.ctx
        training = ctx.config.training
        budget = training.budget(follows_learning=False, max_env_steps=training.round_env_steps)
        task = TrainTask(learners=self._learner_specs(state, iteration),
                         seed=stream_seed(ctx.config.seed, "marl.train", iteration),
                         budget=budget, opponents=self._frozen_opponents(state), return_state=True)
        t0 = self.elapsed()
        (result,) = ctx.backend.train([task])
        train_time = self.elapsed() - t0
        for frozen in result.policies:
            self.publish(frozen.spec.policy_id, frozen.weights)
            state.policies[frozen.spec.population].append(frozen.spec.policy_id)
        state.learners, state.restoring = dict(result.states), False
        t1 = self.elapsed()
        returns, win_rates = evaluate(ctx, state.policies, state.mixtures, iteration=iteration)
        return Work(env_steps=result.env_steps, details=MARLWork(
            result=result, returns=returns, win_rates=win_rates, train_time_s=train_time,
            eval_time_s=self.elapsed() - t1))

    def report(self, state: MARLState, work: Work) -> dict[str, Any]:
        """The iteration's metrics line: each population's mean return in the evaluation
        games (and win rate, where games are won), its initial return and policies, the
        frozen mixtures' draws, NashConv where the env computes it, the learners' metrics."""
        ctx = self.ctx
        done: MARLWork = work.details
        metrics: dict[str, Any] = {"nash_conv": nash_conv(ctx, state.policies, state.mixtures, self.policies), "exploitability": None}
        for population in ctx.mapping.populations:
            metrics[f"mean_return/{population}"] = done.returns[population]
            if population in done.win_rates:
                metrics[f"win_rate/{population}"] = done.win_rates[population]
            metrics[f"initial_return/{population}"] = state.initial_returns[population]
            # Its policies, as summary.json lists them: the initial one and each iteration's snapshot.
            metrics[f"population_size/{population}"] = len(state.policies[population])
            if population in state.mixtures:
                metrics[f"meta_strategy/{population}"] = state.mixtures[population]
        if one_team(ctx):  # a cooperative task: every seat's return, summed
            metrics["team_return"] = float(sum(done.returns[p] * len(ctx.mapping.agents_of(p))
                                               for p in ctx.mapping.populations))
        result = done.result
        metrics.update(frozen_plays(ctx, state.policies, state.mixtures, result.outcomes))
        metrics.update({"episodes": result.episodes,
                        "steps_per_s": result.env_steps / done.train_time_s if done.train_time_s > 0 else 0.0,
                        "train_time_s": done.train_time_s, "eval_time_s": done.eval_time_s})
        metrics.update({f"train/{k}": v for k, v in result.metrics.items()})
        for key, learned in result.learner_metrics.items():
            metrics.update({f"train/{key}/{k}": v for k, v in learned.items()})
        return metrics

    def newest_policies(self, state: MARLState) -> dict[str, str]:
        return {p: ids[-1] for p, ids in state.policies.items() if p not in state.mixtures}

    def _learner_specs(self, state: MARLState, iteration: int) -> tuple[LearnerSpec, ...]:
        """Each learning population's learner, playing all its seats: started from its
        initial policy, then carried on (rebuilt from the checkpoint after a resume). A
        team (:meth:`_teams`) is one learner, keyed by its lead population, over every
        member's seats: it starts fresh (a team has no one initial policy to start from)."""
        ctx = self.ctx
        specs = []
        for team in self._teams():
            population = team[0]
            if state.restoring:
                init = LearnerInit.restore(state.learners[population])
            elif population in state.learners:
                init = LearnerInit(kind="continue")
            elif len(team) > 1:
                init = LearnerInit()
            else:
                init = LearnerInit.start_from(state.policies[population][0])
            snapshot, *others = [PolicySpec(policy_id=policy_id(p, iteration), population=p,
                                            algorithm=ctx.populations[p].algorithm_name, iteration=iteration) for p in team]
            seats = tuple(seat for p in team for seat in ctx.mapping.agents_of(p))
            k = ctx.mapping.populations.index(population)
            specs.append(LearnerSpec(key=population, population=population, seats=seats,
                                     seed=stream_seed(ctx.config.seed, "marl.learner", k), init=init, snapshot=snapshot,
                                     team_snapshots=tuple(others)))
        return tuple(specs)

    def _frozen_opponents(self, state: MARLState) -> MetaStrategy:
        """The seats of frozen populations: their one policy each, or their mixture (each
        seat drawing its policy once per episode)."""
        ctx = self.ctx
        return seat_mixtures({a: p for a, p in ctx.mapping.population_of.items() if p in self.config.frozen},
                             state.policies, state.mixtures)

    def details(self, state: MARLState) -> dict[str, Any]:
        """What ``summary.json`` tells of a marl state besides its iterations and env steps."""
        ctx = self.ctx
        last = state.history[-1] if state.history else {}
        win_rates = {p: last[f"win_rate/{p}"] for p in ctx.mapping.populations if f"win_rate/{p}" in last}
        return {
            "populations": {p: {"policies": ids, "meta_strategy": state.mixtures.get(p, [0.0] * (len(ids) - 1) + [1.0])}
                            for p, ids in state.policies.items()},
            **({"frozen_sources": state.sources} if state.sources else {}),
            "mean_returns": {p: last.get(f"mean_return/{p}") for p in ctx.mapping.populations},
            **({"win_rates": win_rates} if win_rates else {}),
            "initial_returns": state.initial_returns,
            "nash_conv": last.get("nash_conv"),
        }


def _psro_only(key: str, why: str) -> ConfigError:
    """The error for a config key that only psro reads."""
    return ConfigError(f"{key}: applies to scenario psro only ({why}); remove it")
