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

Its parts: :mod:`~popmarl.scenario.league.config` (the params),
:mod:`~popmarl.scenario.league.state` (the state and its codec),
:mod:`~popmarl.scenario.league.games` (a round's games) and
:mod:`~popmarl.scenario.league.metrics` (metrics, summary, exported policies); here, the
checks and a round.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import attrs

from popmarl.config.schema import ComponentConfig, RunConfig
from popmarl.data.population import AgentMapping
from popmarl.errors import ConfigError
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.interfaces.solver import JointMetaSolver, MetaSolver
from popmarl.plugins.registry import Registries
from popmarl.runs.runner import build
from popmarl.scenario.league.config import DEFAULT_SOLVER, UNUSED_TRAINING, LeagueConfig
from popmarl.scenario.league.games import LeagueGames
from popmarl.scenario.base import Work
from popmarl.scenario.league.metrics import LeagueOutputs, RoundWork
from popmarl.scenario.league.roles import ready_to_snapshot
from popmarl.scenario.league.state import LeagueState

__all__ = ["League", "LeagueConfig"]


class League(LeagueGames, LeagueOutputs):
    """League training: PFSP matchmaking over frozen players, snapshots, resets, a Nash output."""

    Config = LeagueConfig

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

    def check_populations(self, populations: Mapping[str, PopulationAlgorithm]) -> None:
        for population, agent in populations.items():
            if not agent.learns or agent.answers:
                what = "is an exact oracle" if agent.answers else "does not learn"
                raise ConfigError(f"algorithm: {agent.algorithm_name} (population {population}) {what}; a league's "
                                  "players learn (e.g. dqn, ppo, a2c)")

    def check_solver(self, solver: MetaSolver, *, mapping: AgentMapping,
                     populations: Mapping[str, PopulationAlgorithm], config: RunConfig) -> None:
        output, name = _output_solver(config, solver)
        if isinstance(output, JointMetaSolver):
            raise ConfigError(f"solver: {name} gives a joint distribution; a league's output is one "
                              "mixture per seat (use nash, prd, alpharank, ...)")

    def prepare(self) -> None:
        config = self.ctx.config
        self.steps_per_round = self.config.steps_per_round or config.training.round_env_steps
        self.output_solver, self.output_solver_name = _output_solver(config, self.ctx.solver)

    def newest_policies(self, state: LeagueState) -> dict[str, str]:
        """Each population's newest frozen player."""
        return {p: fs[-1].policy_id for p, fs in state.frozen.items()}

    # -- a round --------------------------------------------------------------------
    def iterate(self, state: LeagueState, iteration: int) -> Work:
        t0 = time.monotonic()
        for player in state.players:
            self.publish(player.current_id, self._current_weights(state, player), announce=False)
        met_steps = self._meet_unmet(state, iteration)
        tasks = [self._task(state, player, iteration, k) for k, player in enumerate(state.players)]
        results = self.ctx.backend.train(tasks)
        train_time = time.monotonic() - t0
        state.restoring = set()
        snapshots = []
        round_rates: dict[str, float | None] = {}
        for player, result in zip(state.players, results):
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
        steps = sum(r.env_steps for r in results) + met_steps + eval_steps
        return Work(env_steps=steps, details=RoundWork(
            results=results, rates=round_rates, snapshots=snapshots, seconds=time.monotonic() - t0,
            train_time_s=train_time, eval_time_s=eval_time))


def _output_solver(config: RunConfig, solver: MetaSolver) -> tuple[MetaSolver, str]:
    """The solver of a league's output and its name: the config's, or :data:`DEFAULT_SOLVER`
    where the config names none."""
    if config.solver != attrs.fields(RunConfig).solver.default:
        return solver, config.solver.name
    try:
        return build("solvers", ComponentConfig(name=DEFAULT_SOLVER), "solver"), DEFAULT_SOLVER
    except ConfigError:
        raise ConfigError(f"solver: the league solves its output with {DEFAULT_SOLVER} (install "
                          f"popmarl-solvers) or the solver the config names; registered solvers: "
                          f"{', '.join(Registries.current().get('solvers').names())}") from None
