"""A league round's games: each player's training task against its role's mixture, the
outcomes into the win-rate table, the games against frozen players not met yet, and the
snapshots the roles call for."""

from __future__ import annotations

import numpy as np

from popmarl.data.learners import LearnerInit, LearnerSpec
from popmarl.data.population import policy_id
from popmarl.data.seeds import stream_seed
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import EvalTask, TrainResult, TrainTask
from popmarl.interfaces.algorithm import opponent_exploration
from popmarl.scenario.league.roles import Frozen, opponents
from popmarl.scenario.league.state import LeagueBase, LeagueState, Player


class LeagueGames(LeagueBase):
    """The games of a round and what they change in the league."""

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
        opponents_of = MetaStrategy.independent({a: (ids, weights / weights.sum())
                                                 for a in ctx.mapping.agents_of(opposing)})
        if player.key in state.restoring:
            init = LearnerInit.restore(state.learners[player.key])
        elif player.key in state.learners:
            init = LearnerInit(kind="continue")
        else:
            init = LearnerInit()
        training = ctx.config.training
        # A round is a fixed number of env steps (no plateau rule: players never stop learning).
        budget = training.budget(opponent_exploration(ctx.populations[player.population].algorithm, ctx.env),
                                 follows_learning=False, max_env_steps=self.steps_per_round)
        learner = LearnerSpec(key=player.key, population=player.population, seats=seats, one_seat=True,
                              seed=player.seed, init=init)
        return TrainTask(learners=(learner,), seed=stream_seed(ctx.config.seed, "league.train", iteration, k), budget=budget,
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
                                          episodes=episodes, seed=stream_seed(ctx.config.seed, "league.meet", iteration)))
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
        self.publish(pid, state.learners[player.key].weights)
        state.frozen[player.population].append(Frozen(policy_id=pid, parent=player.key, role=player.role))
        state.table.add(pid)
        player.snapshots += 1
        player.since_snapshot = 0
        reset = player.role == "main_exploiter"
        if player.role == "league_exploiter":
            coin = np.random.default_rng(stream_seed(self.ctx.config.seed, "league.reset", iteration, k)).random()
            reset = bool(coin < self.config.league_exploiters.reset_probability)
        if reset:  # back to its initial policy, with a new trainer, next round
            del state.learners[player.key]
        return pid
