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
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import yaml

from popmarl.config.schema import RunConfig
from popmarl.interfaces.env import ExactEnv
from popmarl.interfaces.agent import AgentInterface
from popmarl.errors import CheckpointError, ConfigError
from popmarl.errors import UserError
from popmarl.data.population import AgentMapping
from popmarl.data.population import policy_id
from popmarl.data.records import (
    EvalTask,
    LearnerInit,
    LearnerSpec,
    LearnerState,
    Opponents,
    PolicySpec,
    TrainBudget,
    TrainTask,
)
from popmarl.runs.rundir import RunDirectory
from popmarl.scenario.base import IterativeScenario, RunContext
from popmarl.data.seeds import derive_seed
from popmarl.config.conversion import did_you_mean, structure_attrs


@attrs.frozen(kw_only=True)
class FrozenRun:
    """A frozen population's policies and meta-strategy taken from an earlier run (psro,
    league or marl): ``run``, its directory; ``population``, the population there
    (default: the frozen population's own name); ``iteration``, the meta-strategy after
    that iteration (default: the final one, as ``popmarl eval`` plays it); ``main``: a
    league's main policy alone."""

    run: str
    population: str | None = None
    iteration: int | None = None
    main: bool = False


@attrs.frozen(kw_only=True)
class MARLConfig:
    """``frozen``: population -> ``initial`` (its untrained policy), a ``.npz`` policy
    file, an earlier run's directory, or ``{run: DIR, population: NAME, iteration: N,
    main: BOOL}`` (:class:`FrozenRun`); those populations do not learn."""

    frozen: dict[str, str | dict[str, Any]] = attrs.field(factory=dict)


#: What ``scenario.params.frozen.<population>`` may be.
FROZEN_ALLOWED = ("'initial', a .npz policy file from a run's checkpoints, an earlier popmarl run's directory, "
                  "or {run: DIR, population: NAME, iteration: N, main: BOOL}")


@attrs.frozen(kw_only=True)
class RunSource:
    """A frozen population's mixture as read from the earlier run: its policies (the
    meta-strategy's support, ids as that run names them) with their weights and
    probabilities."""

    run: Path
    population: str
    iteration: int
    main: bool
    policy_ids: tuple[str, ...]
    mixture: np.ndarray
    weights: tuple[Any, ...]

    def describe(self) -> dict[str, Any]:
        """What ``summary.json`` and the checkpoint record of it (``frozen_sources``)."""
        return {"run": str(self.run), "population": self.population, "iteration": self.iteration,
                "main": self.main, "policies": list(self.policy_ids), "meta_strategy": self.mixture.tolist()}


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
    #: The populations frozen as a mixture (another run's, :class:`FrozenRun`): the
    #: probabilities of their policies (``policies``), and where they came from.
    mixtures: dict[str, list[float]] = attrs.field(factory=dict)
    sources: dict[str, dict[str, Any]] = attrs.field(factory=dict)


class MARL(IterativeScenario):
    """Co-training of every non-frozen population, evaluated each iteration."""

    Config = MARLConfig
    ctx: RunContext
    #: The frozen populations read from other runs (by :meth:`check_agents`, or at the start).
    _sources: dict[str, RunSource] | None = None

    # -- state ----------------------------------------------------------------------
    def _learners(self) -> tuple[str, ...]:
        return tuple(p for p in self.ctx.mapping.populations if p not in self.config.frozen)

    def _teams(self) -> tuple[tuple[str, ...], ...]:
        """The learners, each as its populations (its key, the lead, first): one team of
        every learning population where they all use one algorithm that trains teams
        (:attr:`~popmarl.interfaces.algorithm.Algorithm.trains_team`), else one learner each."""
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
        self._frozen_runs()  # their form; what they name is read by check_agents
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
        if not self.resuming:  # a resumed run has its copies: the other runs are not read again
            self._sources = self._read_sources(agents)

    def _frozen_runs(self) -> dict[str, FrozenRun]:
        """The frozen populations given as another run, by population: a directory named
        as a string (the same population there, its final meta-strategy), or the mapping
        form (:class:`FrozenRun`)."""
        runs: dict[str, FrozenRun] = {}
        problems: list[str] = []
        for population, source in self.config.frozen.items():
            where = f"scenario.params.frozen.{population}"
            if isinstance(source, str):
                if source != "initial" and Path(source).is_dir():
                    runs[population] = FrozenRun(run=source)
                continue
            before = len(problems)
            spec = structure_attrs(FrozenRun, source, where, problems)
            if len(problems) > before or spec is None:
                continue
            if spec.main and spec.iteration is not None:
                problems.append(f"{where}.iteration: a league's main policy loads at the end of the run only; "
                                "leave iteration unset with main: true")
            elif spec.iteration is not None and spec.iteration < 0:
                problems.append(f"{where}.iteration: must be 0 or more (unset: the final meta-strategy), "
                                f"got {spec.iteration}")
            else:
                runs[population] = spec
        if problems:
            raise ConfigError(problems)
        return runs

    def _read_sources(self, agents: Mapping[str, AgentInterface]) -> dict[str, RunSource]:
        """Each frozen population's mixture read from its run (a missing policy file or
        directory is an error here, before anything is written)."""
        runs = self._frozen_runs()
        for population, source in self.config.frozen.items():
            if isinstance(source, str) and source != "initial" and not Path(source).exists():
                raise ConfigError(f"scenario.params.frozen.{population}: no such policy file or run directory: "
                                  f"{source}; allowed: {FROZEN_ALLOWED}")
        return {population: _read_source(population, spec, agents[population]) for population, spec in runs.items()}

    def initialise(self) -> MARLState:
        ctx = self.ctx
        if self._sources is None:
            self._sources = self._read_sources(ctx.agents)
        policies: dict[str, list[str]] = {}
        mixtures: dict[str, list[float]] = {}
        for k, population in enumerate(ctx.mapping.populations):
            if population in self._sources:
                # Copied, so that the run, its resume and `popmarl eval` of it never read the other run again.
                copied = self._sources[population]
                policies[population] = [f"{population}/{j}" for j in range(len(copied.weights))]
                for pid, weights in zip(policies[population], copied.weights):
                    self._publish(pid, weights)
                mixtures[population] = copied.mixture.tolist()
                continue
            policy = ctx.agents[population].make_policy(seed=derive_seed(ctx.config.seed, 0, k))
            weights = policy.get_weights()
            source = self.config.frozen.get(population, "initial")
            if isinstance(source, str) and source != "initial":
                weights = _load_frozen(source, population)
                policy.set_weights(weights)  # fails early if the file does not fit the algorithm
            pid = f"{population}/0"
            self._publish(pid, weights)
            policies[population] = [pid]
        returns, _ = self._evaluate(policies, mixtures, iteration=0)
        state = MARLState(iteration=0, policies=policies, history=[], initial_returns=returns, mixtures=mixtures,
                          sources={p: s.describe() for p, s in self._sources.items()})
        self._commit(state)
        return state

    def restore(self) -> MARLState:
        ctx = self.ctx
        saved, _ = ctx.run_dir.load_state()
        policies = {p: list(ids) for p, ids in saved["policies"].items()}
        mixtures = {p: [float(w) for w in m] for p, m in saved.get("frozen_mixtures", {}).items()}
        for population, ids in policies.items():
            for pid in ids if population in mixtures else ids[-1:]:
                ctx.backend.add_policy(pid, ctx.run_dir.load_policy(pid))
        self.resume_history(saved)
        learners = ctx.run_dir.load_learners(saved)
        missing = [team[0] for team in self._teams() if team[0] not in learners]
        if int(saved["iteration"]) > 0 and missing:
            raise CheckpointError(f"{ctx.run_dir.state_file}: no learner state for {', '.join(missing)} (a checkpoint "
                                  "of an older popmarl, or damaged); the run cannot continue identically")
        return MARLState(iteration=int(saved["iteration"]), policies=policies, history=saved["history"],
                         initial_returns=saved["initial_returns"], env_steps=int(saved["env_steps"]),
                         wall_time_s=float(saved["wall_time_s"]), learners=learners, restoring=bool(learners),
                         mixtures=mixtures, sources=dict(saved.get("frozen_sources", {})))

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
        if state.mixtures:  # only then: the checkpoint of any other run is as it was
            saved.update({"frozen_mixtures": state.mixtures, "frozen_sources": state.sources})
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
        budget = TrainBudget(max_env_steps=training.round_env_steps, max_episodes=training.max_episodes,
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
        returns, win_rates = self._evaluate(state.policies, state.mixtures, iteration=iteration)
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
            if population in state.mixtures:
                metrics[f"meta_strategy/{population}"] = state.mixtures[population]
        metrics.update(self._frozen_plays(state, result.outcomes))
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
        """The seats of frozen populations: their one policy each, or their mixture (each
        seat drawing its policy once per episode)."""
        ctx = self.ctx
        return tuple(_mixture(a, p, state.policies, state.mixtures)
                     for a, p in ctx.mapping.population_of.items() if p in self.config.frozen)

    def _frozen_plays(self, state: MARLState, outcomes: Mapping[tuple[str, ...], np.ndarray]) -> dict[str, int]:
        """``frozen_plays/<policy id>``: in how many seats of this iteration's training games
        each policy of a mixture-frozen population played (its draws)."""
        agents = self.ctx.env.agents
        plays = {pid: 0 for p in state.mixtures for pid in state.policies[p]}
        for seating, counts in outcomes.items():
            games = int(np.sum(counts[:, 0]))
            for k, name in enumerate(seating):
                if name in plays and self.ctx.mapping.population_of[agents[k]] in state.mixtures:
                    plays[name] += games
        return {f"frozen_plays/{pid}": n for pid, n in plays.items()}

    def _profile_ids(self, policies: dict[str, list[str]]) -> dict[str, str]:
        return {a: policies[p][-1] for a, p in self.ctx.mapping.population_of.items()}

    def _evaluate(self, policies: dict[str, list[str]], mixtures: Mapping[str, list[float]], *,
                  iteration: int) -> tuple[dict[str, float], dict[str, float]]:
        """Mean return and win rate per population (over its agents) of the current
        policies (a mixture-frozen population's seats drawing theirs once per episode);
        no win rate for a population that plays every seat (it has no opponent) or where
        the backend reports none."""
        ctx = self.ctx
        population_of = ctx.mapping.population_of
        task = EvalTask(index=(0,), profile={a: pid for a, pid in self._profile_ids(policies).items()
                                             if population_of[a] not in mixtures},
                        mixtures=tuple(_mixture(a, p, policies, mixtures)
                                       for a, p in population_of.items() if p in mixtures),
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
        for agent, population in ctx.mapping.population_of.items():
            seat = _mixture(agent, population, state.policies, state.mixtures)
            profile[agent] = [(ctx.agents[population].frozen(ctx.run_dir.load_policy(pid)), w)
                              for pid, w in seat.support()]
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
            "populations": {p: {"policies": ids, "meta_strategy": state.mixtures.get(p, [0.0] * (len(ids) - 1) + [1.0])}
                            for p, ids in state.policies.items()},
            **({"frozen_sources": state.sources} if state.sources else {}),
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
        raise ConfigError(f"{where}: no such policy file or run directory: {path}; allowed: {FROZEN_ALLOWED}")
    try:
        return RunDirectory.read_weights(Path(path))
    except Exception as exc:
        raise ConfigError(f"{where}: {path} is not a policy file ({exc})") from None


def _mixture(agent: str, population: str, policies: Mapping[str, list[str]],
             mixtures: Mapping[str, list[float]]) -> Opponents:
    """How ``agent``'s seat is played: its population's mixture, or its newest policy."""
    if population in mixtures:
        return Opponents(agent=agent, population=population, policy_ids=tuple(policies[population]),
                         mixture=np.asarray(mixtures[population], dtype=float))
    return Opponents(agent=agent, population=population, policy_ids=(policies[population][-1],), mixture=np.ones(1))


def _same_algorithm(a: Any, b: Any) -> bool:
    """The same algorithm class with the same params, those aside that a run fills from
    its env (``env_params``: they shape training, not the policies)."""
    if type(a) is not type(b):
        return False
    if not attrs.has(type(a.config)):
        return bool(a.config == b.config)
    skip = set(getattr(type(a), "env_params", ()))
    return all(getattr(a.config, f.name) == getattr(b.config, f.name)
               for f in attrs.fields(type(a.config)) if f.name not in skip)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _read_source(population: str, spec: FrozenRun, agent: AgentInterface) -> RunSource:
    """``spec``'s population and meta-strategy (its support), checked against this run's
    seats of ``population``: the same spaces, and the same algorithm (name and params),
    which rebuilds its policies as that run built them."""
    from popmarl.config.schema import ComponentConfig
    from popmarl.tools.loaded_run import load_run
    from popmarl.runs.runner import build

    where = f"scenario.params.frozen.{population}"
    run = RunDirectory(spec.run)
    if not run.path.is_dir():
        raise ConfigError(f"{where}: no such run directory: {spec.run}; allowed: {FROZEN_ALLOWED}")
    if not run.config_file.is_file():
        raise ConfigError(f"{where}: {spec.run} is not a popmarl run directory (no config.yaml); "
                          f"allowed: {FROZEN_ALLOWED}")
    try:
        league = not spec.main or bool(run.read_summary().get("main_policies"))
        loaded = load_run(run.path, spec.iteration, main=spec.main) if league else None
    except UserError as exc:
        raise ConfigError(f"{where}: cannot load the run {spec.run}: {_one_line(exc)}") from None
    if loaded is None:
        raise ConfigError(f"{where}.main: {spec.run} is not a league run (its summary.json names no main_policies); "
                          "main: true takes a league's main policy")
    name = spec.population if spec.population is not None else population
    if name not in loaded.populations:
        raise ConfigError(f"{where}: the run {spec.run} has no population {name!r}"
                          f"{did_you_mean(name, list(loaded.populations))}; its populations: "
                          f"{', '.join(loaded.populations)} (name one: {{run: {spec.run}, population: NAME}})")
    found = loaded.populations[name]
    pool = loaded.pools[found.seats[0]]
    theirs, mine = pool.space, agent.space
    if (theirs.observation_space, theirs.action_space) != (mine.observation_space, mine.action_space):
        raise ConfigError(f"{where}: population {name} of {spec.run} observes {theirs.observation_space} and acts "
                          f"in {theirs.action_space}, this run's seats {', '.join(mine.agents)} observe "
                          f"{mine.observation_space} and act in {mine.action_space}; the spaces must match")
    algorithm_name, params = pool.algorithm
    algorithm = build("algorithms", ComponentConfig(name=algorithm_name, params=dict(params)),
                      f"{where}: the algorithm of {spec.run}", loaded.registries)
    if not _same_algorithm(algorithm, agent.algorithm):
        shown = yaml.safe_dump({"name": algorithm_name, "params": dict(params)}, default_flow_style=True,
                               width=1_000_000).strip()
        raise ConfigError(f"{where}: population {name} of {spec.run} was trained with algorithm {shown}, this run "
                          f"gives {population} {agent.algorithm_name}; give {population} the same algorithm (name and "
                          f"params: algorithm: {{{population}: ..., ...}}), which rebuilds its policies")
    support = [(pid, float(w)) for pid, w in zip(found.policy_ids, found.mixture) if w > 0]
    weights = []
    for pid, _ in support:
        try:
            saved = run.load_policy(pid)
            agent.make_policy(seed=0).set_weights(saved)  # fails here if they do not fit
        except Exception as exc:
            raise ConfigError(f"{where}: policy {pid} of {spec.run} cannot be loaded: {_one_line(exc)}") from None
        weights.append(saved)
    mixture = np.array([w for _, w in support])
    return RunSource(run=run.path.resolve(), population=name, iteration=loaded.iteration, main=spec.main,
                     policy_ids=tuple(pid for pid, _ in support), mixture=mixture / mixture.sum(),
                     weights=tuple(weights))
