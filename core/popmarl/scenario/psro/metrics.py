"""PSRO's measures of its meta-strategy: each iteration's metrics line (NashConv in the
real game, approximate NashConv from fresh best responses, Elo ratings, the oracle's gain)
and ``summary.json``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from popmarl.config.schema import ComponentConfig, population_algorithms
from popmarl.data.seeds import stream_seed
from popmarl.data.tasks import EvalTask, TrainResult
from popmarl.gametheory.metagame import entropy, expected_payoffs, joint_values, new_strategy_gains
from popmarl.gametheory.payoffs import PayoffTable
from popmarl.gametheory.ratings import elo, head_to_head
from popmarl.interfaces.env import MixedProfile
from popmarl.plugins.registry import Registries
from popmarl.scenario import meta_game
from popmarl.scenario.base import Work
from popmarl.scenario.psro.joint import PSROJoint
from popmarl.scenario.psro.state import PSROState
from popmarl.tools.exploit import DEFAULT_ENV_STEPS, ExploitTarget, box_seats, exploit, response_algorithms


@attrs.frozen(kw_only=True)
class IterationWork:
    """What an iteration did, for its metrics line: the train results, the oracle's
    gains, the answers computed and payoff entries evaluated exactly, and its timings."""

    results: Sequence[TrainResult]
    gains: Mapping[str, float | None]
    answered: int
    exact_entries: int
    times: Mapping[str, float]
    seconds: float


class PSROMetrics(PSROJoint):
    """The metrics and summary of a PSRO run."""

    def _oracle_gains(self, table: PayoffTable, state: PSROState) -> dict[str, float | None]:
        """What the iteration's new policies gain against the meta-strategy they answered
        (``state``'s, over the policies before them), summed over seats
        (``oracle_gain``: PSRO's own estimate of that meta-strategy's NashConv), and as a
        share of the payoff table's range (``oracle_gain_share``: what ``stopping.patience``
        reads); None under a joint meta-strategy."""
        if not self.strategy.per_seat_gains:
            return {"oracle_gain": None, "oracle_gain_share": None}
        gain = float(new_strategy_gains(table.values, state.meta).sum())
        spread = float(np.ptp(table.values))
        return {"oracle_gain": gain, "oracle_gain_share": gain / spread if spread > 0 else 0.0}

    def _mixed_profile(self, state: PSROState) -> MixedProfile:
        return meta_game.mixed_profile(self.ctx.env.agents, self._axis_ids(state.policies), state.meta, self.policies)

    def nash_conv(self, state: PSROState) -> float | None:
        """NashConv of the meta-strategy in the real game, where the env can compute it."""
        return meta_game.exact_nash_conv(self.ctx.env, self._mixed_profile(state))

    def approx_nash_conv(self, state: PSROState) -> dict[str, float]:
        """Every ``evaluation.approx_nash_conv_every`` iterations: the meta-strategy's
        approximate NashConv (CCE gap for a joint one) from fresh RL best responses
        (:mod:`popmarl.tools.exploit`), trained on a local backend of their own from seeds of
        their own, so the run's streams, and a resumed run, stay as they would be."""
        ctx = self.ctx
        evaluation = ctx.config.evaluation
        every = evaluation.approx_nash_conv_every
        if every is None or state.iteration % every:
            return {}
        found = Registries.current()
        specs = population_algorithms(ctx.config, ctx.mapping.populations)
        meta = meta_game.seat_meta_strategy(ctx.env.agents, self._axis_ids(state.policies), state.meta)
        if state.joint is not None:
            support = self.joint_meta_strategy(state)
            meta = attrs.evolve(meta, joint_agents=tuple(support["agents"]), profiles=support["profiles"],
                                probabilities=support["probabilities"])
        target = ExploitTarget(meta=meta, spaces=ctx.spaces, algorithms=specs,
                               weights={pid: self.policies[pid].get_weights() for pid in meta.named()})
        algorithms = response_algorithms(ctx.env.agents, ctx.mapping.population_of, specs, None, found,
                                         boxes=box_seats(ctx.env))
        report = exploit(ctx.config, ctx.env, target, algorithms=algorithms,
                         env_steps=evaluation.approx_nash_conv_env_steps or DEFAULT_ENV_STEPS,
                         seed=stream_seed(ctx.config.seed, "psro.approx_nash_conv", state.iteration),
                         backend=ComponentConfig(name="local"), registries=found)
        return report.metrics()

    def ratings(self, state: PSROState) -> dict[str, float]:
        """With ``evaluation.ratings``: ``elo/<population>``, the Elo of each population's
        newest policy (:func:`popmarl.gametheory.ratings.elo`, the first seat's initial policy at 0)
        from every payoff entry's win/draw/loss (exact probabilities count as
        ``episodes_per_entry`` games). Each entry is played once, on the run's backend from a
        seed of its own, and kept in memory (a resumed run plays them again, identically):
        the run's own streams and env steps are untouched."""
        ctx = self.ctx
        evaluation = ctx.config.evaluation
        if not evaluation.ratings:
            return {}
        agents = ctx.env.agents
        axis_ids = self._axis_ids(state.policies)
        shape = tuple(len(ids) for ids in axis_ids)
        tasks = [EvalTask(index=index, profile={a: axis_ids[k][i] for k, (a, i) in enumerate(zip(agents, index))},
                          episodes=evaluation.episodes_per_entry, seed=stream_seed(ctx.config.seed, "psro.ratings", *index))
                 for index in np.ndindex(*shape) if index not in self._outcomes]
        for result in ctx.backend.evaluate(tasks):
            self._outcomes[result.index] = result.outcome_rates()[:, 0] * evaluation.episodes_per_entry
        counts = np.zeros((3, *shape))
        for index in np.ndindex(*shape):
            counts[(slice(None), *index)] = self._outcomes[index]
        shared = len(ctx.mapping.populations) == 1
        ratings = elo(*head_to_head(*counts, shared=shared), anchor=0)
        newest = [shape[0] - 1] if shared else [shape[0] - 1, shape[0] + shape[1] - 1]
        return {f"elo/{ctx.mapping.population_of[agents[k]]}": float(ratings[n]) for k, n in enumerate(newest)}

    def population_meta(self, state: PSROState, population: str) -> np.ndarray:
        """A population's meta-strategy: the mean of its seats' mixtures."""
        return meta_game.population_meta(state.meta, self.ctx.mapping, self.ctx.env.agents, population)

    def report(self, state: PSROState, work: Work) -> dict[str, Any]:
        """The iteration's metrics line: NashConv in the real game where the env computes
        it, the meta-strategies, the oracle's gains, the work done (``exact_best_responses``
        and ``exact_entries``: answers computed and payoff entries evaluated exactly, the
        work of an iteration that took no env steps), the solver's and learners' metrics,
        approximate NashConv and ratings where configured."""
        done: IterationWork = work.details
        nash = self.nash_conv(state)
        metrics: dict[str, Any] = {"nash_conv": nash, "exploitability": self._exploitability(nash)}
        for population in self.ctx.mapping.populations:
            metrics[f"population_size/{population}"] = len(state.policies[population])
            meta = self.population_meta(state, population)
            metrics[f"meta_entropy/{population}"] = entropy(meta)
            metrics[f"meta_strategy/{population}"] = meta.tolist()
        metrics.update({"train_env_steps": sum(r.env_steps for r in done.results),
                        "exact_best_responses": done.answered, "exact_entries": done.exact_entries,
                        "steps_per_s": work.env_steps / done.seconds if done.seconds > 0 else 0.0,
                        **{f"{k}_s": v for k, v in done.times.items()}})
        metrics.update(self.correlated_gaps(state))
        metrics.update({f"solver/{k}": v for k, v in state.solver_metrics.items()})
        for result in done.results:
            for key, learned in result.learner_metrics.items():
                name = self.strategy.metrics_name(state, key)
                metrics.update({f"train/{name}/{k}": v for k, v in {**result.metrics, **learned}.items()})
                if result.stop_reason:  # trained (not answered exactly): its budget's outcome
                    metrics.update({f"train/{name}/env_steps": result.env_steps,
                                    f"train/{name}/stop_reason": result.stop_reason})
        metrics.update(done.gains)
        metrics.update(self.approx_nash_conv(state))
        metrics.update(self.ratings(state))
        return metrics

    def _exploitability(self, nash: float | None) -> float | None:
        return meta_game.exploitability(self.ctx.env, nash)

    def details(self, state: PSROState) -> dict[str, Any]:
        """What ``summary.json`` tells of a psro state besides its iterations and env steps."""
        ctx = self.ctx
        nash = state.history[-1]["nash_conv"] if state.history else self.nash_conv(state)
        details = {
            "populations": {
                p: {"policies": list(state.policies[p]), "meta_strategy": self.population_meta(state, p).tolist()}
                for p in ctx.mapping.populations
            },
            "meta_strategies": {a: state.meta[k].tolist() for k, a in enumerate(ctx.env.agents)},
            "meta_game_values": dict(zip(ctx.env.agents, self._meta_values(state).tolist())),
            "nash_conv": nash, "exploitability": self._exploitability(nash),
            **{k: sum(int(m.get(k, 0)) for m in state.history) for k in ("exact_best_responses", "exact_entries")},
            "solver": state.solver_metrics,
        }
        if state.joint is not None:
            details["joint_meta_strategy"] = self.joint_meta_strategy(state)
            details.update({k: state.history[-1][k] for k in ("cce_gap", "ce_gap") if state.history and k in state.history[-1]})
        return details

    def _meta_values(self, state: PSROState) -> np.ndarray:
        """Each seat's expected meta-game payoff under the (joint) meta-strategy."""
        if state.joint is not None:
            return joint_values(state.table.values, state.joint)
        return expected_payoffs(state.table.values, state.meta)
