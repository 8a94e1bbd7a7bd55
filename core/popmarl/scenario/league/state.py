"""The league's state (its players, frozen players, win-rate table and payoff table: the
record a checkpoint holds, written and read by its codec) and the scenario's start.

:class:`LeagueBase` is the part of :class:`~popmarl.scenario.league.scenario.League` that
the others build on: the policies it holds, its players' current weights and opposition,
the payoff table among the frozen players (grown and solved) and the state it writes to
and reads from the run directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from popmarl.data.policies import Weights
from popmarl.data.population import policy_id
from popmarl.data.seeds import stream_seed
from popmarl.gametheory.payoffs import PayoffTable, evaluate_missing
from popmarl.interfaces.solver import MetaSolver, SolverResult, solve_checked
from popmarl.scenario.base import IterationState, IterativeScenario
from popmarl.scenario.league.config import LeagueConfig
from popmarl.scenario.league.roles import ROLES, Frozen, Opposition
from popmarl.scenario.league.table import WinRates
from popmarl.scenario.meta_game import meta_arrays, read_table, table_arrays


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


@attrs.define(kw_only=True)
class LeagueState(IterationState):
    """Everything a checkpoint holds; enough to continue bit-identically."""

    players: list[Player]
    frozen: dict[str, list[Frozen]]
    table: WinRates
    payoffs: PayoffTable
    meta: tuple[np.ndarray, ...]
    solver_metrics: dict[str, Any]
    #: The players whose learners are to be rebuilt from ``learners`` (a resumed run's first round).
    restoring: set[str] = attrs.field(factory=set)

    def policies(self, population: str) -> list[str]:
        return [f.policy_id for f in self.frozen[population]]

    def to_checkpoint(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        arrays = {**table_arrays(self.payoffs), **self.table.arrays(), **meta_arrays(self.meta)}
        saved = {"policies": {p: self.policies(p) for p in self.frozen},
                 "players": [attrs.asdict(p) for p in self.players],
                 "frozen": {p: [attrs.asdict(f) for f in fs] for p, fs in self.frozen.items()},
                 "table_players": list(self.table.players), "solver_metrics": self.solver_metrics}
        return saved, arrays

    @classmethod
    def from_checkpoint(cls, common: dict[str, Any], saved: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                        scenario: Any) -> LeagueState:
        table = WinRates.from_arrays(decay=scenario.config.decay, players=saved["table_players"], arrays=arrays)
        payoffs, meta = read_table(arrays, scenario.ctx.env.agents)
        return cls(**common, players=[Player(**p) for p in saved["players"]],
                   frozen={p: [Frozen(**f) for f in fs] for p, fs in saved["frozen"].items()}, table=table,
                   payoffs=payoffs, meta=meta, solver_metrics=saved["solver_metrics"])

    def held_policies(self) -> list[str]:
        return [f.policy_id for fs in self.frozen.values() for f in fs]


class LeagueBase(IterativeScenario[LeagueState]):
    """The league's players, policies, tables and the files derived from its state."""

    State = LeagueState
    config: LeagueConfig
    #: Derived when the run starts: each player's env steps per round, and the solver of
    #: the output and its name.
    steps_per_round: int
    output_solver: MetaSolver
    output_solver_name: str

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
                                          seed=stream_seed(self.ctx.config.seed, "league.player", len(players))))
        return players

    def start(self) -> LeagueState:
        ctx = self.ctx
        players = self._new_players()
        frozen: dict[str, list[Frozen]] = {p: [] for p in ctx.mapping.populations}
        table = WinRates(decay=self.config.decay, players=[p.key for p in players])
        for player in players:  # each main agent's initial policy is the league's first frozen players
            if player.role == "main_agent":
                pid = policy_id(player.population, len(frozen[player.population]))
                self.publish(pid, ctx.populations[player.population].make_policy(seed=player.seed).get_weights())
                frozen[player.population].append(Frozen(policy_id=pid, parent=player.key, role=player.role))
                table.add(pid)
        state = LeagueState(iteration=0, players=players, frozen=frozen, table=table,
                            payoffs=PayoffTable.empty(ctx.env.agents), meta=(), solver_metrics={}, history=[])
        state.env_steps += self._evaluate_frozen(state)
        return state

    def restored(self, state: LeagueState) -> None:
        state.restoring = set(state.learners)

    def write_outputs(self, state: LeagueState) -> None:
        """``payoffs.npz``, and each population's first main agent's weights now (``<population>/main``)."""
        ctx = self.ctx
        state.payoffs.save(ctx.run_dir.payoffs_file, self._axis_ids(state))
        for population, weights in self._main_weights(state).items():
            ctx.run_dir.save_policy(f"{population}/main", weights)

    def _current_weights(self, state: LeagueState, player: Player) -> Weights:
        """A player's weights now: its learner's, or its initial ones (new, or just reset)."""
        if player.key in state.learners:
            return state.learners[player.key].weights
        return self.ctx.populations[player.population].make_policy(seed=player.seed).get_weights()

    def _opposition(self, state: LeagueState, population: str) -> Opposition:
        opposing = self._opposing(population)
        mains = [p.key for p in state.players if p.population == opposing and p.role == "main_agent"]
        return Opposition(frozen=state.frozen[opposing], main_agents=mains, table=state.table)

    def _evaluate_frozen(self, state: LeagueState, iteration: int = 0) -> int:
        """The payoff table of returns among the frozen players grown to the league, and
        its meta-strategy solved; return the env steps sampled."""
        ctx = self.ctx
        table, steps, _ = evaluate_missing(state.payoffs, self._axis_ids(state), backend=ctx.backend,
                                           agents=ctx.env.agents, episodes=ctx.config.evaluation.episodes_per_entry,
                                           seed=stream_seed(ctx.config.seed, "league.eval", iteration))
        solved = self._solve(table)
        state.payoffs, state.meta, state.solver_metrics = table, solved.mixtures, dict(solved.metrics)
        return steps

    def _solve(self, table: PayoffTable) -> SolverResult:
        return solve_checked(self.output_solver, table.values, name=self.output_solver_name, seats=self.ctx.env.agents)

    def _main_weights(self, state: LeagueState) -> dict[str, Weights]:
        """Each population's first main agent's weights now."""
        return {p: self._current_weights(state, next(pl for pl in state.players
                                                     if pl.population == p and pl.role == "main_agent"))
                for p in self.ctx.mapping.populations}
