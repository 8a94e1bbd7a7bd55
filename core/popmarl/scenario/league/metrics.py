"""The league's outputs: each round's metrics line (win rates, Elo, NashConv of the Nash
mixture and of the main agents), ``summary.json``, and the policy files an env exports."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from popmarl.data.tasks import TrainResult
from popmarl.gametheory.metagame import entropy, expected_payoffs
from popmarl.gametheory.ratings import elo
from popmarl.interfaces.env import MixedProfile
from popmarl.scenario import meta_game
from popmarl.scenario.base import Work
from popmarl.scenario.league.state import LeagueBase, LeagueState


@attrs.frozen(kw_only=True)
class RoundWork:
    """What a round did, for its metrics line: each player's train result and win rate in
    its games, the snapshots taken, and its timings."""

    results: Sequence[TrainResult]
    rates: Mapping[str, float | None]
    snapshots: Sequence[str]
    seconds: float
    train_time_s: float
    eval_time_s: float


class LeagueOutputs(LeagueBase):
    """The metrics, summary and exported policies of a league run."""

    def _nash_profile(self, state: LeagueState) -> MixedProfile:
        return meta_game.mixed_profile(self.ctx.env.agents, self._axis_ids(state), state.meta, self.policies)

    def _main_profile(self, state: LeagueState) -> MixedProfile:
        ctx = self.ctx
        policies = {p: ctx.populations[p].frozen(w) for p, w in self._main_weights(state).items()}
        return {a: [(policies[ctx.mapping.population_of[a]], 1.0)] for a in ctx.env.agents}

    def finish(self, state: LeagueState) -> None:
        """``final_policy.json`` (the Nash mixture) and ``main_policy.json`` (the main
        agents), where the env writes such files."""
        env, directory = self.ctx.env, self.ctx.run_dir.path
        env.export_policy(self._nash_profile(state), directory)
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            for name in env.export_policy(self._main_profile(state), Path(scratch)):
                target = name.replace("final", "main", 1) if "final" in name else f"main_{name}"
                (Path(scratch) / name).replace(directory / target)

    def report(self, state: LeagueState, work: Work) -> dict[str, Any]:
        """The round's metrics line: NashConv of the Nash mixture and of the main agents
        where the env computes it, the meta-strategies, each player's win rates, snapshots
        and (main agents) Elo, its learner's metrics, and the solver's."""
        ctx = self.ctx
        done: RoundWork = work.details
        nash = meta_game.exact_nash_conv(ctx.env, self._nash_profile(state))
        metrics: dict[str, Any] = {"nash_conv": nash, "exploitability": meta_game.exploitability(ctx.env, nash),
                                   "main_nash_conv": meta_game.exact_nash_conv(ctx.env, self._main_profile(state))}
        for population in ctx.mapping.populations:
            meta = meta_game.population_meta(state.meta, ctx.mapping, ctx.env.agents, population)
            metrics[f"population_size/{population}"] = len(state.frozen[population])
            metrics[f"meta_strategy/{population}"] = meta.tolist()
            metrics[f"meta_entropy/{population}"] = entropy(meta)
        ratings = self._elo(state)
        for player, result in zip(state.players, done.results):
            frozen = [f.policy_id for f in self._opposition(state, player.population).frozen]
            metrics[f"win_rate/{player.key}"] = done.rates[player.key]
            metrics[f"min_win_rate/{player.key}"] = float(state.table.win_rate(player.key, frozen).min())
            metrics[f"snapshots/{player.key}"] = player.snapshots
            if player.role == "main_agent":
                metrics[f"elo/{player.key}"] = ratings[player.key]
            metrics.update({f"train/{player.key}/{k}": v for k, v in result.learner_metrics[player.key].items()})
        if ctx.config.evaluation.ratings:
            for population in ctx.mapping.populations:
                metrics[f"elo/{population}"] = ratings[state.frozen[population][-1].policy_id]
        metrics.update({"snapshots": list(done.snapshots),
                        "steps_per_s": work.env_steps / done.seconds if done.seconds > 0 else 0.0,
                        "train_time_s": done.train_time_s, "eval_time_s": done.eval_time_s})
        metrics.update({f"solver/{k}": v for k, v in state.solver_metrics.items()})
        return metrics

    def _elo(self, state: LeagueState) -> dict[str, float]:
        """Every player's and frozen player's Elo from the win-rate table's (decayed)
        counts, the first population's first frozen player at 0."""
        counts = state.table.counts
        anchor = state.table.players.index(state.frozen[self.ctx.mapping.populations[0]][0].policy_id)
        ratings = elo(counts["wins"], counts["draws"], anchor=anchor)
        return dict(zip(state.table.players, map(float, ratings)))

    def details(self, state: LeagueState) -> dict[str, Any]:
        """What ``summary.json`` tells of a league state besides its iterations and env steps."""
        ctx = self.ctx
        last = state.history[-1] if state.history else {}
        seat_meta = {a: state.meta[k].tolist() for k, a in enumerate(ctx.env.agents)}
        return {
            "populations": {p: {"policies": state.policies(p),
                                "meta_strategy": meta_game.population_meta(state.meta, ctx.mapping, ctx.env.agents,
                                                                           p).tolist()}
                            for p in ctx.mapping.populations},
            "meta_strategies": seat_meta,
            "meta_game_values": dict(zip(ctx.env.agents, expected_payoffs(state.payoffs.values, state.meta).tolist())),
            "main_policies": {p: f"{p}/main" for p in ctx.mapping.populations},
            "league": {"players": [attrs.asdict(p) for p in state.players],
                       "frozen": {p: [attrs.asdict(f) for f in fs] for p, fs in state.frozen.items()}},
            "nash_conv": last.get("nash_conv"), "exploitability": last.get("exploitability"),
            "main_nash_conv": last.get("main_nash_conv"), "solver": state.solver_metrics,
        }
