"""Scenario ``marl``: independent or parameter-shared multi-agent learning.

Every population maps to one learning policy (``agents.mapping: shared`` gives
parameter sharing, ``per_player`` independent learners); populations listed in
``frozen`` keep a fixed policy (their initial one, or weights from a ``.npz`` file of an
earlier run). Each iteration co-trains the learners for the ``training`` budget, then
plays ``evaluation.episodes_per_entry`` evaluation episodes; the run directory,
checkpoints, resume and trackers are those of ``psro``. A config setting what only
``psro`` uses (``solver``, ``stopping.target_nash_conv``, the best-response ``training``
keys) is rejected rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from popmarl.config import RunConfig, TrainingConfig
from popmarl.env import ExactEnv
from popmarl.agent import AgentInterface
from popmarl.errors import CheckpointError, ConfigError
from popmarl.population import AgentMapping
from popmarl.population import policy_id
from popmarl.records import (
    EvalTask,
    LearnerInit,
    LearnerSpec,
    LearnerState,
    Opponents,
    PolicySpec,
    TrainBudget,
    TrainTask,
)
from popmarl.rundir import RunDirectory
from popmarl.scenario import IterativeScenario, RunContext
from popmarl.seeding import derive_seed


@attrs.frozen(kw_only=True)
class MARLConfig:
    """``frozen``: population -> ``initial`` (its untrained policy) or a ``.npz`` policy
    file; those populations do not learn."""

    frozen: dict[str, str] = attrs.field(factory=dict)


#: ``training`` keys about one best response against frozen opponents: ``psro`` only.
PSRO_ONLY_TRAINING = ("window", "target_return", "target_win_rate", "patience", "min_env_steps", "keep", "self_play",
                      "opponent_epsilon", "init", "pipeline")


@attrs.define
class MARLState:
    iteration: int
    policies: dict[str, list[str]]
    history: list[dict[str, Any]]
    initial_returns: dict[str, float]
    env_steps: int = 0
    wall_time_s: float = 0.0
    #: The learners' states after the last iteration (restored on resume).
    learners: dict[str, LearnerState] = attrs.field(factory=dict)
    #: Whether the learners are to be rebuilt from ``learners`` (a resumed run's first iteration).
    restoring: bool = False


class MARL(IterativeScenario):
    """Co-training of every non-frozen population, evaluated each iteration."""

    Config = MARLConfig
    ctx: RunContext

    # -- state ----------------------------------------------------------------------
    def _learners(self) -> tuple[str, ...]:
        return tuple(p for p in self.ctx.mapping.populations if p not in self.config.frozen)

    def _teams(self) -> tuple[tuple[str, ...], ...]:
        """The learners, each as its populations (its key, the lead, first): one team of
        every learning population where they all use one algorithm that trains teams
        (:attr:`~popmarl.algorithm.Algorithm.trains_team`), else one learner each."""
        learning = self._learners()
        agents = [self.ctx.agents[p] for p in learning]
        if len(learning) > 1 and len({a.algorithm_name for a in agents}) == 1 and agents[0].algorithm.trains_team:
            return (learning,)
        return tuple((p,) for p in learning)

    def check(self, *, config: RunConfig, mapping: AgentMapping) -> None:
        unknown = sorted(set(self.config.frozen) - set(mapping.populations))
        if unknown:
            raise ConfigError(f"scenario.params.frozen: unknown population(s) {', '.join(unknown)}; "
                              f"populations: {', '.join(mapping.populations)}")
        if set(mapping.populations) <= set(self.config.frozen):
            raise ConfigError("scenario.params.frozen: every population is frozen; nothing would learn")
        # Set in a marl run, these would be silently ignored; a value equal to the default
        # cannot be told from an unset one, and changes nothing either.
        defaults = TrainingConfig()
        for name in PSRO_ONLY_TRAINING:
            if getattr(config.training, name) != getattr(defaults, name):
                raise _psro_only(f"training.{name}", "marl co-trains every learner for the training budget: "
                                 "max_env_steps, max_episodes, max_wall_time_s")
        if config.stopping.target_nash_conv is not None:
            raise _psro_only("stopping.target_nash_conv", "marl stops at stopping.max_iterations or "
                             "max_wall_time_s; it reports nash_conv where the env computes it")
        if config.solver != attrs.fields(RunConfig).solver.default:
            raise _psro_only("solver", "marl has no meta-game to solve: every population plays its newest policy")

    def check_agents(self, agents: Mapping[str, AgentInterface]) -> None:
        """Every population that is not frozen co-learns: its algorithm must train (one
        that makes no trainer would leave its policy as it started, silently) and not be
        an exact oracle (which answers a fixed opponent, it does not co-learn)."""
        named = len({a.algorithm_name for a in agents.values()}) > 1
        for population, agent in agents.items():
            if population in self.config.frozen:
                continue
            where = f"algorithm.{population}" if named else "algorithm"
            if not agent.learns or agent.answers:
                what = "is an exact oracle" if agent.answers else "does not learn"
                raise ConfigError(f"{where}: {agent.algorithm_name} {what}; the marl scenario trains every "
                                  "population not in scenario.params.frozen with a learning algorithm "
                                  "(e.g. dqn, ppo, a2c)")

    def initialise(self) -> MARLState:
        ctx = self.ctx
        policies: dict[str, list[str]] = {}
        for k, population in enumerate(ctx.mapping.populations):
            policy = ctx.agents[population].make_policy(seed=derive_seed(ctx.config.seed, 0, k))
            weights = policy.get_weights()
            source = self.config.frozen.get(population, "initial")
            if source != "initial":
                weights = _load_frozen(source, population)
                policy.set_weights(weights)  # fails early if the file does not fit the algorithm
            pid = f"{population}/0"
            self._publish(pid, weights)
            policies[population] = [pid]
        returns, _ = self._evaluate(policies, iteration=0)
        state = MARLState(iteration=0, policies=policies, history=[], initial_returns=returns)
        self._commit(state)
        return state

    def restore(self) -> MARLState:
        ctx = self.ctx
        saved, _ = ctx.run_dir.load_state()
        policies = {p: list(ids) for p, ids in saved["policies"].items()}
        for ids in policies.values():
            ctx.backend.add_policy(ids[-1], ctx.run_dir.load_policy(ids[-1]))
        self.resume_history(saved)
        learners = ctx.run_dir.load_learners(saved)
        missing = [team[0] for team in self._teams() if team[0] not in learners]
        if int(saved["iteration"]) > 0 and missing:
            raise CheckpointError(f"{ctx.run_dir.state_file}: no learner state for {', '.join(missing)} (a checkpoint "
                                  "of an older popmarl, or damaged); the run cannot continue identically")
        return MARLState(iteration=int(saved["iteration"]), policies=policies, history=saved["history"],
                         initial_returns=saved["initial_returns"], env_steps=int(saved["env_steps"]),
                         wall_time_s=float(saved["wall_time_s"]), learners=learners, restoring=bool(learners))

    def _publish(self, pid: str, weights: Any) -> None:
        ctx = self.ctx
        ctx.backend.add_policy(pid, weights)
        ctx.run_dir.save_policy(pid, weights)
        ctx.hooks.policy_added(ctx.info, pid.rsplit("/", 1)[0], pid)

    def _commit(self, state: MARLState) -> None:
        ctx = self.ctx
        saved = {"iteration": state.iteration, "policies": state.policies, "history_length": len(state.history),
                 "initial_returns": state.initial_returns, "env_steps": state.env_steps,
                 "wall_time_s": state.wall_time_s}
        last = state.history[-1] if state.history else {}
        returns = np.array([last.get(f"mean_return/{p}", np.nan) for p in ctx.mapping.populations])
        self.commit(saved, {"mean_returns": returns}, state.history, learners=state.learners)

    # -- the loop -------------------------------------------------------------------
    def loop(self, state: MARLState) -> tuple[str, str]:
        while (stop := self.stop_reason(state.iteration)) is None:
            self._iterate(state)
        return stop

    def _iterate(self, state: MARLState) -> None:
        ctx = self.ctx
        training = ctx.config.training
        iteration = state.iteration + 1
        budget = TrainBudget(max_env_steps=training.max_env_steps, max_episodes=training.max_episodes,
                             max_wall_time_s=training.max_wall_time_s,
                             episodes_per_update=training.episodes_per_update)
        task = TrainTask(learners=self._learner_specs(state, iteration), seed=derive_seed(ctx.config.seed, iteration, 1),
                         budget=budget, opponents=self._frozen_opponents(state), return_state=True)
        t0 = self.elapsed()
        (result,) = ctx.backend.train([task])
        train_time = self.elapsed() - t0
        for frozen in result.policies:
            self._publish(frozen.spec.policy_id, frozen.weights)
            state.policies[frozen.spec.population].append(frozen.spec.policy_id)
        state.learners, state.restoring = dict(result.states), False
        t1 = self.elapsed()
        returns, win_rates = self._evaluate(state.policies, iteration=iteration)
        state.iteration = iteration
        state.env_steps += result.env_steps
        metrics: dict[str, Any] = {"iteration": iteration, "nash_conv": self._nash_conv(state), "exploitability": None}
        for population in ctx.mapping.populations:
            metrics[f"mean_return/{population}"] = returns[population]
            if population in win_rates:
                metrics[f"win_rate/{population}"] = win_rates[population]
            metrics[f"initial_return/{population}"] = state.initial_returns[population]
            # Its policies, as summary.json lists them: the initial one and each iteration's snapshot.
            metrics[f"population_size/{population}"] = len(state.policies[population])
        seconds = self.elapsed() - t0
        metrics.update({"env_steps": state.env_steps, "iteration_env_steps": result.env_steps,
                        "episodes": result.episodes,
                        "steps_per_s": result.env_steps / train_time if train_time > 0 else 0.0,
                        "train_time_s": train_time, "eval_time_s": self.elapsed() - t1,
                        "iteration_time_s": seconds, "wall_time_s": self.elapsed()})
        metrics.update({f"train/{k}": v for k, v in result.metrics.items()})
        for key, learned in result.learner_metrics.items():
            metrics.update({f"train/{key}/{k}": v for k, v in learned.items()})
        state.history.append(metrics)
        state.wall_time_s = self.elapsed()
        self._commit(state)
        ctx.run_dir.append_metrics(metrics)
        ctx.hooks.iteration_end(ctx.info, iteration, metrics)

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
                                            algorithm=ctx.agents[p].algorithm_name, iteration=iteration) for p in team]
            seats = tuple(seat for p in team for seat in ctx.mapping.agents_of(p))
            k = ctx.mapping.populations.index(population)
            specs.append(LearnerSpec(key=population, population=population, seats=seats,
                                     seed=derive_seed(ctx.config.seed, 0, 1_000 + k), init=init, snapshot=snapshot,
                                     team_snapshots=tuple(others)))
        return tuple(specs)

    def _frozen_opponents(self, state: MARLState) -> tuple[Opponents, ...]:
        """The seats of frozen populations: their one policy each."""
        ctx = self.ctx
        return tuple(Opponents(agent=a, population=p, policy_ids=(state.policies[p][-1],), mixture=np.ones(1))
                     for a, p in ctx.mapping.population_of.items() if p in self.config.frozen)

    def _profile_ids(self, policies: dict[str, list[str]]) -> dict[str, str]:
        return {a: policies[p][-1] for a, p in self.ctx.mapping.population_of.items()}

    def _evaluate(self, policies: dict[str, list[str]], *,
                  iteration: int) -> tuple[dict[str, float], dict[str, float]]:
        """Mean return and win rate per population (over its agents) of the current
        policies; no win rate for a population that plays every seat (it has no opponent)
        or where the backend reports none."""
        ctx = self.ctx
        task = EvalTask(index=(0,), profile=self._profile_ids(policies),
                        episodes=ctx.config.evaluation.episodes_per_entry,
                        seed=derive_seed(ctx.config.seed, iteration, 2))
        result = ctx.backend.evaluate([task])[0]
        seats = {p: [ctx.env.agents.index(a) for a in ctx.mapping.agents_of(p)] for p in ctx.mapping.populations}
        returns = {p: float(np.mean(result.returns[k])) for p, k in seats.items()}
        if result.wins is None:
            return returns, {}
        wins = result.outcome_rates()[0]
        return returns, {p: float(np.mean(wins[k])) for p, k in seats.items() if len(k) < len(ctx.env.agents)}

    def _nash_conv(self, state: MARLState) -> float | None:
        """NashConv of the current joint policy where the env computes it exactly."""
        ctx = self.ctx
        env = ctx.env
        if not (isinstance(env, ExactEnv) and env.supports_exact()):
            return None
        profile = {}
        for agent, pid in self._profile_ids(state.policies).items():
            policy = ctx.agents[ctx.mapping.population_of[agent]].frozen(ctx.run_dir.load_policy(pid))
            profile[agent] = [(policy, 1.0)]
        return float(env.nash_conv(profile))

    def summary(self, state: MARLState | None, status: str, reason: str) -> dict[str, Any]:  # type: ignore[override]
        ctx = self.ctx
        summary = self.base_summary(status, reason)
        if state is None:
            return summary
        last = state.history[-1] if state.history else {}
        win_rates = {p: last[f"win_rate/{p}"] for p in ctx.mapping.populations if f"win_rate/{p}" in last}
        summary.update({
            "iterations": state.iteration,
            "populations": {p: {"policies": ids, "meta_strategy": [0.0] * (len(ids) - 1) + [1.0]}
                            for p, ids in state.policies.items()},
            "mean_returns": {p: last.get(f"mean_return/{p}") for p in ctx.mapping.populations},
            **({"win_rates": win_rates} if win_rates else {}),
            "initial_returns": state.initial_returns,
            "nash_conv": last.get("nash_conv"),
            "env_steps": state.env_steps,
        })
        return summary


def _psro_only(key: str, why: str) -> ConfigError:
    return ConfigError(f"{key}: applies to scenario psro only ({why}); remove it")


def _load_frozen(path: str, population: str) -> dict[str, np.ndarray]:
    where = f"scenario.params.frozen.{population}"
    if not Path(path).is_file():
        raise ConfigError(f"{where}: no such policy file: {path} (use 'initial' or a .npz from a run's checkpoints)")
    try:
        return RunDirectory.read_weights(Path(path))
    except Exception as exc:
        raise ConfigError(f"{where}: {path} is not a policy file ({exc})") from None
