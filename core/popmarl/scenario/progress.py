"""A run's progress where NashConv cannot be computed: its newest policies against
uniformly random play, every few iterations on a small budget.

Each population's newest policy plays every seat it plays against uniformly random play
in all the others (:func:`versus_random`): the metrics line gets its win / draw / loss
shares and its mean return there. Where one team plays every seat (a cooperative task,
:func:`one_team`), win rates mean nothing: the team's return is measured instead, beside
that of uniformly random play in the team's seats.

The random play is uniform over the legal actions whatever the population's algorithm
(:mod:`popmarl.interfaces.uniform_play`), put on the backend as ``<population>/random``
and never saved to the run directory. Games are played on seeds of their own (stream
``versus_random``: the iteration, the population's index), so the run's other streams,
and a resumed run, stay as they would be.

A scenario calls :func:`measure_progress` at the end of each iteration with its metrics
line so far: it measures when :func:`needs_versus_random` (no exact NashConv) and
:func:`due` (every ``evaluation.versus_random_every`` iterations; 0: never).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from popmarl.data.outcomes import OUTCOMES
from popmarl.data.seeds import stream_seed
from popmarl.data.tasks import EvalTask
from popmarl.interfaces.scenario import RunContext
from popmarl.interfaces.uniform_play import uniform_play_weights

#: The seed stream of the measure's games.
STREAM = "versus_random"
#: The metrics keys' prefix: ``versus_random/<population>/win``...
PREFIX = "versus_random/"


def due(iteration: int, every: int) -> bool:
    """Whether iteration ``iteration`` measures something done every ``every`` iterations
    (0: never)."""
    return every > 0 and iteration > 0 and iteration % every == 0


def needs_versus_random(line: Mapping[str, Any]) -> bool:
    """Whether a metrics line lacks exact NashConv, so that play against random is what
    tells the run's progress."""
    return line.get("nash_conv") is None


def measure_progress(ctx: RunContext, newest: Mapping[str, str], line: Mapping[str, Any], *,
                     team: bool | None = None) -> dict[str, float]:
    """The versus-random figures for the iteration of metrics line ``line`` where due
    (:func:`due`, :func:`needs_versus_random`), else {}."""
    iteration = int(line["iteration"])
    if not (needs_versus_random(line) and due(iteration, ctx.config.evaluation.versus_random_every)):
        return {}
    return versus_random(ctx, newest, iteration, team=team)


def one_team(ctx: RunContext) -> bool:
    """Whether one team plays every seat (a cooperative task): a ``marl`` run of a game that
    is not zero-sum whose one population plays every seat, or whose populations' algorithms
    all train as one team (:attr:`~popmarl.interfaces.algorithm.Algorithm.trains_team`)."""
    if ctx.info.scenario != "marl" or ctx.env.zero_sum:
        return False
    agents = list(ctx.populations.values())
    return len(ctx.mapping.populations) == 1 or bool(agents) and all(a.algorithm.trains_team for a in agents)


def versus_random(ctx: RunContext, newest: Mapping[str, str], iteration: int, *,
                  team: bool | None = None) -> dict[str, float]:
    """Each population of ``newest`` (population -> its newest policy id, on the backend)
    against uniformly random play, over ``evaluation.versus_random_episodes`` games per
    seat: ``versus_random/<population>/win``, ``/draw`` and ``/loss`` (shares, summing to 1)
    and ``/return`` (its mean return), over every seat it plays, each in turn, every other
    seat played at random. ``team`` (default :func:`one_team`): the populations of
    ``newest`` play their seats together instead, and ``/team_return`` (the summed return of
    every seat) and ``/random_team_return`` (the same with random play in their seats)
    replace the shares."""
    if not newest:
        return {}
    randoms = _publish_random(ctx)
    together = one_team(ctx) if team is None else team
    if together:
        return _team_return(ctx, newest, randoms, iteration)
    return _shares(ctx, newest, randoms, iteration)


def _publish_random(ctx: RunContext) -> dict[str, str]:
    """Each population's uniformly random play, put on the backend as ``<population>/random``."""
    randoms = {population: f"{population}/random" for population in ctx.mapping.populations}
    for pid in randoms.values():
        ctx.backend.add_policy(pid, uniform_play_weights())
    return randoms


def _task(ctx: RunContext, k: int, iteration: int, population: str, profile: dict[str, str]) -> EvalTask:
    """Entry ``k``: ``profile``'s games, on the seed of ``population``'s games this iteration
    (the tasks of one seed share one vector of games)."""
    index = ctx.mapping.populations.index(population)
    return EvalTask(index=(k,), profile=profile, episodes=ctx.config.evaluation.versus_random_episodes,
                    seed=stream_seed(ctx.config.seed, STREAM, iteration, index))


def _shares(ctx: RunContext, newest: Mapping[str, str], randoms: Mapping[str, str],
            iteration: int) -> dict[str, float]:
    """Per population, its newest policy in each of its seats in turn, every other seat random."""
    agents, population_of = ctx.env.agents, ctx.mapping.population_of
    seats = [(p, a) for p in newest for a in ctx.mapping.agents_of(p)]
    tasks = [_task(ctx, k, iteration, p, {b: newest[p] if b == a else randoms[population_of[b]] for b in agents})
             for k, (p, a) in enumerate(seats)]
    results = ctx.backend.evaluate(tasks)
    rates: dict[str, list[np.ndarray]] = {p: [] for p in newest}
    returns: dict[str, list[float]] = {p: [] for p in newest}
    for (p, a), result in zip(seats, results):
        k = agents.index(a)
        rates[p].append(result.outcome_rates()[:, k])
        returns[p].append(float(result.returns[k]))
    metrics: dict[str, float] = {}
    for p in newest:
        mean = np.mean(rates[p], axis=0)
        metrics.update({f"{PREFIX}{p}/{outcome}": float(share) for outcome, share in zip(OUTCOMES, mean)})
        metrics[f"{PREFIX}{p}/return"] = float(np.mean(returns[p]))
    return metrics


def _team_return(ctx: RunContext, newest: Mapping[str, str], randoms: Mapping[str, str],
                 iteration: int) -> dict[str, float]:
    """The team of ``newest`` in all its seats, then random play in them (other seats
    random both times): every seat's summed return, as ``/team_return`` and
    ``/random_team_return`` of each of its populations."""
    agents, population_of = ctx.env.agents, ctx.mapping.population_of
    played = {a: newest.get(population_of[a], randoms[population_of[a]]) for a in agents}
    baseline = {a: randoms[population_of[a]] for a in agents}
    lead = next(iter(newest))
    results = ctx.backend.evaluate([_task(ctx, 0, iteration, lead, played), _task(ctx, 1, iteration, lead, baseline)])
    together, random = (float(np.sum(r.returns)) for r in results)
    metrics: dict[str, float] = {}
    for p in newest:
        seats = [agents.index(a) for a in ctx.mapping.agents_of(p)]
        metrics.update({f"{PREFIX}{p}/team_return": together, f"{PREFIX}{p}/random_team_return": random,
                        f"{PREFIX}{p}/return": float(np.mean(results[0].returns[seats]))})
    return metrics
