"""Scenario ``league``: AlphaStar-style league training (Vinyals et al. 2019).

A league is a set of **players** training at once, each in a role
(:mod:`popmarl.scenario.league.roles`: main agents, main exploiters, league exploiters), and the
**frozen players**: snapshots of them, which stay. Two-player games: with ``shared`` one
league plays both seats; with one population per seat (``per_player``), each seat has a
league of its own and its players meet the other seat's.

A **round** (what ``stopping.max_iterations`` counts, and what metrics and checkpoints
are written per): every player's weights at the start of the round become its *current*
copy (``<population>/<role>_<k>``, what others meet when they meet that player); pairs
of a player and a frozen player that have never met are evaluated
(``evaluation.episodes_per_entry`` games, or exactly); each player's opponent mixture is
read from its role's rule and the win-rate table (:mod:`popmarl.scenario.league.table`); every
player trains for ``steps_per_round`` env steps (default ``training.max_env_steps``)
against opponents drawn from it once per game (on Ray, at the same time: each player is a
learner of its own); the outcomes of those games update the win-rate table; players
whose role says so are snapshot (a new frozen player, saved as the population's next
policy) and reset; the new frozen players are evaluated against the others (a payoff
table of returns, as PSRO's) and the meta-solver (``nash`` unless ``solver`` names
another) solves it.

Outputs: ``summary.json`` names the frozen players per population with their Nash
mixture (``popmarl eval`` plays it; OpenSpiel envs write it as ``final_policy.json``)
and the latest first main agent of each population as ``main_policies``
(``popmarl eval --main``; OpenSpiel: ``main_policy.json``); per round the metrics hold
each player's win rate in its games and its lowest against the frozen players, the
league's size, the main agents' Elo (from the win-rate table), and where the env computes
it exactly, the NashConv of the Nash mixture (``nash_conv``) and of the main agents
alone (``main_nash_conv``).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from popmarl.interfaces.agent import AgentInterface
from popmarl.interfaces.algorithm import opponent_exploration
from popmarl.config.schema import ComponentConfig, RunConfig
from popmarl.interfaces.env import ExactEnv, MixedProfile
from popmarl.errors import ConfigError
from popmarl.scenario.league.roles import (
    ROLES,
    Frozen,
    LeagueExploitersConfig,
    MainAgentsConfig,
    MainExploitersConfig,
    Opposition,
    RoleConfig,
    opponents,
    ready_to_snapshot,
)
from popmarl.scenario.league.table import WinRates
from popmarl.gametheory.metagame import entropy, expected_payoffs
from popmarl.gametheory.payoffs import PayoffTable, evaluate_missing
from popmarl.interfaces.policy import Policy
from popmarl.data.population import AgentMapping, policy_id
from popmarl.data.records import EvalTask, LearnerInit, LearnerSpec, LearnerState, Opponents, TrainResult, TrainTask, Weights
from popmarl.scenario.base import IterativeScenario, RunContext
from popmarl.data.seeds import derive_seed
from popmarl.interfaces.solver import JointMetaSolver, MetaSolver, SolverResult, solve_checked
from popmarl.interfaces.validators import at_least_one, optional, unit_interval

#: ``training`` keys a league does not use: its players train a round's env steps and snapshot as their roles say.
UNUSED_TRAINING = ("window", "target_return", "target_win_rate", "patience", "min_env_steps",
                   "keep", "self_play", "init", "pipeline")
#: The solver of the league's output when the config names none.
DEFAULT_SOLVER = "nash"


def _main_agents(value: Any) -> MainAgentsConfig:
    """A role's params (a mapping, as a component receives them) as its config."""
    return value if isinstance(value, MainAgentsConfig) else MainAgentsConfig(**value)


def _main_exploiters(value: Any) -> MainExploitersConfig:
    return value if isinstance(value, MainExploitersConfig) else MainExploitersConfig(**value)


def _league_exploiters(value: Any) -> LeagueExploitersConfig:
    return value if isinstance(value, LeagueExploitersConfig) else LeagueExploitersConfig(**value)


@attrs.frozen(kw_only=True)
class LeagueConfig:
    """The roles (each with a ``count``), env steps per player per round, and the
    win-rate table's decay per game."""

    main_agents: MainAgentsConfig = attrs.field(factory=MainAgentsConfig, converter=_main_agents)
    main_exploiters: MainExploitersConfig = attrs.field(factory=MainExploitersConfig,
                                                        converter=_main_exploiters)
    league_exploiters: LeagueExploitersConfig = attrs.field(factory=LeagueExploitersConfig,
                                                            converter=_league_exploiters)
    #: Env steps each player trains per round (null: ``training.max_env_steps``, 20,000 by default).
    steps_per_round: int | None = attrs.field(default=None, validator=optional(at_least_one))
    decay: float = attrs.field(default=0.99, validator=unit_interval)
    #: Games per pair of a player and a frozen player it has not met (null: evaluation.episodes_per_entry).
    unmet_episodes: int | None = attrs.field(default=None, validator=optional(at_least_one))

    def role(self, role: str) -> RoleConfig:
        return {"main_agent": self.main_agents, "main_exploiter": self.main_exploiters,
                "league_exploiter": self.league_exploiters}[role]


@attrs.define
class Player:
    """A learning player: ``key`` (its learner's key and its id in the win-rate table),
    its role, population and seed, and its env steps (in all, and since its last snapshot)."""

    key: str
    name: str
    role: str
    population: str
    seed: int
    trained: int = 0
    since_snapshot: int = 0
    snapshots: int = 0

    @property
    def current_id(self) -> str:
        """The policy id of its copy at the start of a round."""
        return f"{self.population}/{self.name}"


@attrs.define
class LeagueState:
    """Everything a checkpoint holds; enough to continue bit-identically."""

    iteration: int
    players: list[Player]
    frozen: dict[str, list[Frozen]]
    table: WinRates
    payoffs: PayoffTable
    meta: tuple[np.ndarray, ...]
    solver_metrics: dict[str, Any]
    history: list[dict[str, Any]]
    env_steps: int = 0
    wall_time_s: float = 0.0
    learners: dict[str, LearnerState] = attrs.field(factory=dict)
    restoring: set[str] = attrs.field(factory=set)

    def policies(self, population: str) -> list[str]:
        return [f.policy_id for f in self.frozen[population]]


class League(IterativeScenario):
    """League training: PFSP matchmaking over frozen players, snapshots, resets, a Nash output."""

    Config = LeagueConfig
    config: LeagueConfig
    ctx: RunContext

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policies: dict[str, Policy] = {}
        self._solver_named = False
        self._solver: MetaSolver | None = None

    # -- checks ---------------------------------------------------------------------
    def check(self, *, config: RunConfig, mapping: AgentMapping) -> None:
        seats = list(mapping.population_of)
        if len(seats) != 2:
            raise ConfigError(f"scenario: a league is for two-player games; this env has {len(seats)} seats")
        if len(mapping.populations) == 2 and any(len(mapping.agents_of(p)) != 1 for p in mapping.populations):
            raise ConfigError("agents.mapping: a league needs one population for both seats (shared) or one per seat")
        unused = config.training.given(UNUSED_TRAINING)
        if unused:
            raise ConfigError(f"training.{unused[0]}: not used by the league scenario (its players carry on, "
                              "snapshot and reset as their roles say); remove it")
        if config.stopping.patience is not None:
            raise ConfigError("stopping.patience: psro only (a league's players never stop finding "
                              "improvements to learn); stop a league by max_iterations, max_wall_time_s or "
                              "target_nash_conv")
        if self.config.steps_per_round is not None and config.training.max_env_steps is not None:
            raise ConfigError("scenario.params.steps_per_round: set both it and training.max_env_steps (each "
                              "player's env steps per round); keep one")
        self._steps_per_round = self.config.steps_per_round or config.training.round_env_steps
        self._solver_named = config.solver != attrs.fields(RunConfig).solver.default
        self._solver_name = config.solver.name if self._solver_named else DEFAULT_SOLVER

    def check_agents(self, agents: Mapping[str, AgentInterface]) -> None:
        for population, agent in agents.items():
            if not agent.learns or agent.answers:
                what = "is an exact oracle" if agent.answers else "does not learn"
                raise ConfigError(f"algorithm: {agent.algorithm_name} (population {population}) {what}; a league's "
                                  "players learn (e.g. dqn, ppo, a2c)")

    def check_solver(self, solver: MetaSolver, *, mapping: AgentMapping,
                     agents: Mapping[str, AgentInterface]) -> None:
        if not self._solver_named:
            from popmarl.plugins.registries import Registries
            from popmarl.runs.runner import build

            try:
                solver = build("solvers", ComponentConfig(name=DEFAULT_SOLVER), "solver")
            except ConfigError:
                raise ConfigError(f"solver: the league solves its output with {DEFAULT_SOLVER} (install "
                                  f"popmarl-solvers) or the solver the config names; registered solvers: "
                                  f"{', '.join(Registries.current().get('solvers').names())}") from None
        if isinstance(solver, JointMetaSolver):
            raise ConfigError(f"solver: {self._solver_name} gives a joint distribution; a league's output is one "
                              "mixture per seat (use nash, prd, alpharank, ...)")
        self._solver = solver

    # -- state ----------------------------------------------------------------------
    def _opposing(self, population: str) -> str:
        """The population of the other seat (the same one with ``shared``)."""
        populations = self.ctx.mapping.populations
        return population if len(populations) == 1 else next(p for p in populations if p != population)

    def _axis_ids(self, state: LeagueState) -> list[list[str]]:
        return [state.policies(self.ctx.mapping.population_of[a]) for a in self.ctx.env.agents]

    def _new_players(self) -> list[Player]:
        players: list[Player] = []
        for population in self.ctx.mapping.populations:
            for role in ROLES:
                for k in range(self.config.role(role).count):
                    name = f"{role}_{k}"
                    players.append(Player(key=f"{population}.{name}", name=name, role=role, population=population,
                                          seed=derive_seed(self.ctx.config.seed, 0, 10_000 + len(players))))
        return players

    def initialise(self) -> LeagueState:
        ctx = self.ctx
        players = self._new_players()
        frozen: dict[str, list[Frozen]] = {p: [] for p in ctx.mapping.populations}
        table = WinRates(decay=self.config.decay, players=[p.key for p in players])
        for player in players:  # each main agent's initial policy is the league's first frozen players
            if player.role == "main_agent":
                pid = policy_id(player.population, len(frozen[player.population]))
                self._add(pid, ctx.agents[player.population].make_policy(seed=player.seed).get_weights())
                frozen[player.population].append(Frozen(policy_id=pid, parent=player.key, role=player.role))
                table.add(pid)
        state = LeagueState(iteration=0, players=players, frozen=frozen, table=table,
                            payoffs=PayoffTable.empty(ctx.env.agents), meta=(), solver_metrics={}, history=[])
        state.env_steps += self._evaluate_frozen(state)
        state.wall_time_s = self.elapsed()
        self._commit(state)
        return state

    def restore(self) -> LeagueState:
        ctx = self.ctx
        saved, arrays = ctx.run_dir.load_state()
        players = [Player(**p) for p in saved["players"]]
        frozen = {p: [Frozen(**f) for f in fs] for p, fs in saved["frozen"].items()}
        for fs in frozen.values():
            for f in fs:
                self._add(f.policy_id, ctx.run_dir.load_policy(f.policy_id), announce=False)
        table = WinRates.from_arrays(decay=self.config.decay, players=saved["table_players"], arrays=arrays)
        payoffs = PayoffTable(agents=ctx.env.agents, values=arrays["payoffs"], filled=arrays["filled"].astype(bool))
        meta = tuple(arrays[f"meta_{k}"] for k in range(len(ctx.env.agents)))
        self.resume_history(saved)
        learners = ctx.run_dir.load_learners(saved)
        state = LeagueState(iteration=int(saved["iteration"]), players=players, frozen=frozen, table=table,
                            payoffs=payoffs, meta=meta, solver_metrics=saved["solver_metrics"],
                            history=saved["history"], env_steps=int(saved["env_steps"]),
                            wall_time_s=float(saved["wall_time_s"]), learners=learners, restoring=set(learners))
        payoffs.save(ctx.run_dir.payoffs_file, self._axis_ids(state))
        return state

    def _add(self, pid: str, weights: Weights, *, announce: bool = True) -> None:
        ctx = self.ctx
        population = pid.rsplit("/", 1)[0]
        self.policies[pid] = ctx.agents[population].frozen(weights)
        ctx.backend.add_policy(pid, weights)
        if announce:
            ctx.run_dir.save_policy(pid, weights)
            ctx.hooks.policy_added(ctx.info, population, pid)

    def _commit(self, state: LeagueState) -> None:
        ctx = self.ctx
        arrays = {"payoffs": state.payoffs.values, "filled": state.payoffs.filled, **state.table.arrays()}
        arrays.update({f"meta_{k}": m for k, m in enumerate(state.meta)})
        saved = {"iteration": state.iteration, "history_length": len(state.history),
                 "policies": {p: state.policies(p) for p in ctx.mapping.populations},
                 "players": [attrs.asdict(p) for p in state.players],
                 "frozen": {p: [attrs.asdict(f) for f in fs] for p, fs in state.frozen.items()},
                 "table_players": list(state.table.players), "solver_metrics": state.solver_metrics,
                 "env_steps": state.env_steps, "wall_time_s": state.wall_time_s}

        def after() -> None:
            state.payoffs.save(ctx.run_dir.payoffs_file, self._axis_ids(state))
            for population, weights in self._main_weights(state).items():
                ctx.run_dir.save_policy(f"{population}/main", weights)

        self.commit(saved, arrays, state.history, learners=state.learners, after=after)

    # -- the loop -------------------------------------------------------------------
    def loop(self, state: LeagueState) -> tuple[str, str]:
        while (stop := self.stop_reason(state.iteration, state.history)) is None:
            self._round(state)
        return stop

    def _round(self, state: LeagueState) -> None:
        ctx = self.ctx
        iteration = state.iteration + 1
        t0 = time.monotonic()
        for player in state.players:
            self._add(player.current_id, self._current_weights(state, player), announce=False)
        met_steps = self._meet_unmet(state, iteration)
        tasks = [self._task(state, player, iteration, k) for k, player in enumerate(state.players)]
        results = ctx.backend.train(tasks)
        train_time = time.monotonic() - t0
        state.restoring = set()
        snapshots = []
        round_rates: dict[str, float | None] = {}
        for k, (player, result) in enumerate(zip(state.players, results)):
            state.learners[player.key] = result.states[player.key]
            player.trained += result.env_steps
            player.since_snapshot += result.env_steps
            round_rates[player.key] = self._record(state, player, result)
        for k, player in enumerate(state.players):  # every player's games are in before any snapshot
            opposition = self._opposition(state, player.population)
            if ready_to_snapshot(player.role, player.key, self.config.role(player.role), opposition,
                                 player.since_snapshot):
                snapshots.append(self._snapshot(state, player, iteration, k))
        t1 = time.monotonic()
        eval_steps = self._evaluate_frozen(state, iteration)
        eval_time = time.monotonic() - t1
        train_steps = sum(r.env_steps for r in results)
        state.iteration = iteration
        state.env_steps += train_steps + met_steps + eval_steps
        metrics = self._metrics(state, results, round_rates, snapshots, steps=train_steps + met_steps + eval_steps,
                                seconds=time.monotonic() - t0, train_time_s=train_time, eval_time_s=eval_time)
        state.history.append(metrics)
        state.wall_time_s = self.elapsed()
        self._commit(state)
        ctx.run_dir.append_metrics(metrics)
        ctx.hooks.iteration_end(ctx.info, iteration, metrics)

    def _current_weights(self, state: LeagueState, player: Player) -> Weights:
        """A player's weights now: its learner's, or its initial ones (new, or just reset)."""
        if player.key in state.learners:
            return state.learners[player.key].weights
        return self.ctx.agents[player.population].make_policy(seed=player.seed).get_weights()

    def _opposition(self, state: LeagueState, population: str) -> Opposition:
        opposing = self._opposing(population)
        mains = [p.key for p in state.players if p.population == opposing and p.role == "main_agent"]
        return Opposition(frozen=state.frozen[opposing], main_agents=mains, table=state.table)

    def _task(self, state: LeagueState, player: Player, iteration: int, k: int) -> TrainTask:
        """The player's round: ``steps_per_round`` env steps against its role's mixture,
        carrying on (restored after a resume; fresh when new or reset)."""
        ctx = self.ctx
        mixture = opponents(player.role, player.key, self.config.role(player.role),
                            self._opposition(state, player.population))
        current = {p.key: p.current_id for p in state.players}
        ids = tuple(current.get(opponent, opponent) for opponent, p in mixture.items() if p > 0)
        weights = np.array([p for p in mixture.values() if p > 0])
        opposing = self._opposing(player.population)
        seats = ctx.mapping.agents_of(player.population)
        opponents_of = tuple(Opponents(agent=a, population=opposing, policy_ids=ids, mixture=weights / weights.sum())
                             for a in ctx.mapping.agents_of(opposing))
        if player.key in state.restoring:
            init = LearnerInit.restore(state.learners[player.key])
        elif player.key in state.learners:
            init = LearnerInit(kind="continue")
        else:
            init = LearnerInit()
        training = ctx.config.training
        # A round is a fixed number of env steps (no plateau rule: players never stop learning).
        budget = attrs.evolve(training.budget(opponent_exploration(ctx.agents[player.population].algorithm, ctx.env)),
                              max_env_steps=self._steps_per_round, min_env_steps=None, patience=None)
        learner = LearnerSpec(key=player.key, population=player.population, seats=seats, one_seat=True,
                              seed=player.seed, init=init)
        return TrainTask(learners=(learner,), seed=derive_seed(ctx.config.seed, iteration, 100 + k), budget=budget,
                         opponents=opponents_of, return_state=True)

    def _table_id(self, state: LeagueState, name: str) -> str | None:
        """The win-rate table's id of the player named ``name`` in a game's record."""
        for player in state.players:
            if name in (player.key, player.current_id):
                return player.key
        return name if name in state.table else None

    def _record(self, state: LeagueState, player: Player, result: TrainResult) -> float | None:
        """Enter the outcomes of ``player``'s games into the win-rate table; return its win
        rate in them (draws half; None without games)."""
        won = games = 0.0
        for names, counts in result.outcomes.items():
            for seat, name in enumerate(names):
                if name != player.key:
                    continue
                other = next(n for s, n in enumerate(names) if s != seat)
                away = self._table_id(state, other)
                if away is None:
                    raise RuntimeError(f"league: a game of {player.key} against {other}, who is not in the league")
                w, d, lost = (float(c) for c in counts[:, seat])
                state.table.record(player.key, away, w, d, lost)
                won += w + 0.5 * d
                games += w + d + lost
        return won / games if games else None

    def _meet_unmet(self, state: LeagueState, iteration: int) -> int:
        """Evaluate each player's current copy against the frozen players it has never
        met (in both seats with ``shared``), into the win-rate table; return the env steps."""
        ctx = self.ctx
        episodes = self.config.unmet_episodes or ctx.config.evaluation.episodes_per_entry
        tasks: list[EvalTask] = []
        meta: list[tuple[str, str, int]] = []
        for player in state.players:
            opposition = self._opposition(state, player.population)
            for frozen in opposition.frozen:
                if state.table.games(player.key, [frozen.policy_id])[0] > 0:
                    continue
                for seat in ctx.mapping.agents_of(player.population):
                    other = next(a for a in ctx.env.agents if a != seat)
                    tasks.append(EvalTask(index=(len(tasks),), profile={seat: player.current_id, other: frozen.policy_id},
                                          episodes=episodes, seed=derive_seed(ctx.config.seed, iteration, 3_000_017)))
                    meta.append((player.key, frozen.policy_id, ctx.env.agents.index(seat)))
        if not tasks:
            return 0
        results = ctx.backend.evaluate(tasks)
        for (home, away, index), result in zip(meta, results):
            w, d, lost = result.outcome_rates()[:, index] * episodes
            state.table.record(home, away, float(w), float(d), float(lost))
        return sum(r.env_steps for r in results)

    def _snapshot(self, state: LeagueState, player: Player, iteration: int, k: int) -> str:
        """Freeze ``player`` as its population's next policy; reset it as its role says."""
        pid = policy_id(player.population, len(state.frozen[player.population]))
        self._add(pid, state.learners[player.key].weights)
        state.frozen[player.population].append(Frozen(policy_id=pid, parent=player.key, role=player.role))
        state.table.add(pid)
        player.snapshots += 1
        player.since_snapshot = 0
        reset = player.role == "main_exploiter"
        if player.role == "league_exploiter":
            coin = np.random.default_rng(derive_seed(self.ctx.config.seed, iteration, 200 + k)).random()
            reset = bool(coin < self.config.league_exploiters.reset_probability)
        if reset:  # back to its initial policy, with a new trainer, next round
            del state.learners[player.key]
        return pid

    def _evaluate_frozen(self, state: LeagueState, iteration: int = 0) -> int:
        """The payoff table of returns among the frozen players grown to the league, and
        its meta-strategy solved; return the env steps sampled."""
        ctx = self.ctx
        table, steps, _ = evaluate_missing(state.payoffs, self._axis_ids(state), backend=ctx.backend,
                                           agents=ctx.env.agents, episodes=ctx.config.evaluation.episodes_per_entry,
                                           seed=derive_seed(ctx.config.seed, iteration, 1_000_003))
        solved = self._solve(table)
        state.payoffs, state.meta, state.solver_metrics = table, solved.mixtures, dict(solved.metrics)
        return steps

    def _solve(self, table: PayoffTable) -> SolverResult:
        assert self._solver is not None
        return solve_checked(self._solver, table.values, name=self._solver_name, seats=self.ctx.env.agents)

    # -- outputs --------------------------------------------------------------------
    def _main_weights(self, state: LeagueState) -> dict[str, Weights]:
        """Each population's first main agent's weights now."""
        return {p: self._current_weights(state, next(pl for pl in state.players
                                                     if pl.population == p and pl.role == "main_agent"))
                for p in self.ctx.mapping.populations}

    def _nash_profile(self, state: LeagueState) -> MixedProfile:
        axis_ids = self._axis_ids(state)
        return {agent: [(self.policies[pid], float(w)) for pid, w in zip(axis_ids[k], state.meta[k]) if w > 0]
                for k, agent in enumerate(self.ctx.env.agents)}

    def _main_profile(self, state: LeagueState) -> MixedProfile:
        ctx = self.ctx
        policies = {p: ctx.agents[p].frozen(w) for p, w in self._main_weights(state).items()}
        return {a: [(policies[ctx.mapping.population_of[a]], 1.0)] for a in ctx.env.agents}

    def _exact_nash_conv(self, profile: MixedProfile) -> float | None:
        env = self.ctx.env
        if isinstance(env, ExactEnv) and env.supports_exact():
            return float(env.nash_conv(profile))
        return None

    def finish(self, state: LeagueState) -> None:
        """``final_policy.json`` (the Nash mixture) and ``main_policy.json`` (the main
        agents), where the env writes such files."""
        env, directory = self.ctx.env, self.ctx.run_dir.path
        env.export_policy(self._nash_profile(state), directory)
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            for name in env.export_policy(self._main_profile(state), Path(scratch)):
                target = name.replace("final", "main", 1) if "final" in name else f"main_{name}"
                (Path(scratch) / name).replace(directory / target)

    def _metrics(self, state: LeagueState, results: Sequence[TrainResult], rates: Mapping[str, float | None],
                 snapshots: Sequence[str], *, steps: int, seconds: float, **times: float) -> dict[str, Any]:
        ctx = self.ctx
        nash = self._exact_nash_conv(self._nash_profile(state))
        zero_sum = len(ctx.env.agents) == 2 and getattr(ctx.env, "zero_sum", False)
        metrics: dict[str, Any] = {"iteration": state.iteration, "nash_conv": nash,
                                   "exploitability": nash / 2 if nash is not None and zero_sum else None,
                                   "main_nash_conv": self._exact_nash_conv(self._main_profile(state))}
        for population in ctx.mapping.populations:
            seats = [k for k, a in enumerate(ctx.env.agents) if ctx.mapping.population_of[a] == population]
            meta = np.mean([state.meta[k] for k in seats], axis=0)
            metrics[f"population_size/{population}"] = len(state.frozen[population])
            metrics[f"meta_strategy/{population}"] = meta.tolist()
            metrics[f"meta_entropy/{population}"] = entropy(meta)
        ratings = self._elo(state)
        for player, result in zip(state.players, results):
            frozen = [f.policy_id for f in self._opposition(state, player.population).frozen]
            metrics[f"win_rate/{player.key}"] = rates[player.key]
            metrics[f"min_win_rate/{player.key}"] = float(state.table.win_rate(player.key, frozen).min())
            metrics[f"snapshots/{player.key}"] = player.snapshots
            if player.role == "main_agent":
                metrics[f"elo/{player.key}"] = ratings[player.key]
            metrics.update({f"train/{player.key}/{k}": v for k, v in result.learner_metrics[player.key].items()})
        if ctx.config.evaluation.ratings:
            for population in ctx.mapping.populations:
                metrics[f"elo/{population}"] = ratings[state.frozen[population][-1].policy_id]
        metrics.update({"snapshots": list(snapshots), "env_steps": state.env_steps, "iteration_env_steps": steps,
                        "steps_per_s": steps / seconds if seconds > 0 else 0.0,
                        **times, "wall_time_s": self.elapsed()})
        metrics.update({f"solver/{k}": v for k, v in state.solver_metrics.items()})
        return metrics

    def _elo(self, state: LeagueState) -> dict[str, float]:
        """Every player's and frozen player's Elo from the win-rate table's (decayed)
        counts, the first population's first frozen player at 0."""
        from popmarl.gametheory.ratings import elo

        counts = state.table.counts
        anchor = state.table.players.index(state.frozen[self.ctx.mapping.populations[0]][0].policy_id)
        ratings = elo(counts["wins"], counts["draws"], anchor=anchor)
        return dict(zip(state.table.players, map(float, ratings)))

    def summary(self, state: LeagueState | None, status: str, reason: str) -> dict[str, Any]:  # type: ignore[override]
        ctx = self.ctx
        summary = self.base_summary(status, reason)
        if state is None:
            return summary
        last = state.history[-1] if state.history else {}
        seat_meta = {a: state.meta[k].tolist() for k, a in enumerate(ctx.env.agents)}
        summary.update({
            "iterations": state.iteration,
            "populations": {p: {"policies": state.policies(p),
                                "meta_strategy": np.mean([state.meta[k] for k, a in enumerate(ctx.env.agents)
                                                          if ctx.mapping.population_of[a] == p], axis=0).tolist()}
                            for p in ctx.mapping.populations},
            "meta_strategies": seat_meta,
            "meta_game_values": dict(zip(ctx.env.agents, expected_payoffs(state.payoffs.values, state.meta).tolist())),
            "main_policies": {p: f"{p}/main" for p in ctx.mapping.populations},
            "league": {"players": [attrs.asdict(p) for p in state.players],
                       "frozen": {p: [attrs.asdict(f) for f in fs] for p, fs in state.frozen.items()}},
            "nash_conv": last.get("nash_conv"), "exploitability": last.get("exploitability"),
            "main_nash_conv": last.get("main_nash_conv"),
            "env_steps": state.env_steps, "solver": state.solver_metrics,
        })
        return summary
