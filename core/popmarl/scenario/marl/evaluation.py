"""How a marl run measures its populations: the seats played by each population's newest
policy or frozen mixture, each iteration's evaluation episodes (mean return and win rate
per population), the NashConv of the joint policy where the env computes it, and how
often each policy of a mixture played in training."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from popmarl.data.seeds import stream_seed
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import EvalTask
from popmarl.interfaces.env import mixed_profile
from popmarl.interfaces.policy import Policy
from popmarl.interfaces.scenario import RunContext
from popmarl.scenario.meta_game import exact_nash_conv


def seat_mixtures(seats: Mapping[str, str], policies: Mapping[str, list[str]],
                  mixtures: Mapping[str, list[float]]) -> MetaStrategy:
    """How the ``seats`` (each seat's population) are played: each its population's
    mixture, or its newest policy."""
    return MetaStrategy.independent({
        agent: (policies[population], mixtures[population]) if population in mixtures
        else ((policies[population][-1],), np.ones(1))
        for agent, population in seats.items()})


def evaluate(ctx: RunContext, policies: dict[str, list[str]], mixtures: Mapping[str, list[float]], *,
             iteration: int) -> tuple[dict[str, float], dict[str, float]]:
    """Mean return and win rate per population (over its agents) of the current
    policies (a mixture-frozen population's seats drawing theirs once per episode);
    no win rate for a population that plays every seat (it has no opponent) or where
    the backend reports none."""
    population_of = ctx.mapping.population_of
    newest = {a: policies[p][-1] for a, p in population_of.items()}
    task = EvalTask(index=(0,), profile={a: pid for a, pid in newest.items() if population_of[a] not in mixtures},
                    meta=seat_mixtures({a: p for a, p in population_of.items() if p in mixtures}, policies, mixtures),
                    episodes=ctx.config.evaluation.episodes_per_entry,
                    seed=stream_seed(ctx.config.seed, "marl.eval", iteration))
    result = ctx.backend.evaluate([task])[0]
    seats = {p: [ctx.env.agents.index(a) for a in ctx.mapping.agents_of(p)] for p in ctx.mapping.populations}
    returns = {p: float(np.mean(result.returns[k])) for p, k in seats.items()}
    if result.wins is None:
        return returns, {}
    wins = result.outcome_rates()[0]
    return returns, {p: float(np.mean(wins[k])) for p, k in seats.items() if len(k) < len(ctx.env.agents)}


def nash_conv(ctx: RunContext, policies: Mapping[str, list[str]], mixtures: Mapping[str, list[float]],
              held: Mapping[str, Policy]) -> float | None:
    """NashConv of the current joint policy (each seat's policy or mixture, the scenario's
    ``held`` copies) where the env computes it exactly."""
    return exact_nash_conv(ctx.env, mixed_profile(seat_mixtures(ctx.mapping.population_of, policies, mixtures),
                                                  held.__getitem__))


def frozen_plays(ctx: RunContext, policies: Mapping[str, list[str]], mixtures: Mapping[str, list[float]],
                 outcomes: Mapping[tuple[str, ...], np.ndarray]) -> dict[str, int]:
    """``frozen_plays/<policy id>``: in how many seats of this iteration's training games
    each policy of a mixture-frozen population played (its draws)."""
    agents = ctx.env.agents
    plays = {pid: 0 for p in mixtures for pid in policies[p]}
    for seating, counts in outcomes.items():
        games = int(np.sum(counts[:, 0]))
        for k, name in enumerate(seating):
            if name in plays and ctx.mapping.population_of[agents[k]] in mixtures:
                plays[name] += games
    return {f"frozen_plays/{pid}": n for pid, n in plays.items()}
