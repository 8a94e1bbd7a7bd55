"""``popmarl eval``: play a run's meta-strategies against an opponent (a finished run's
final ones; a run going or killed, its last committed checkpoint's).

Each population of the run plays every seat it maps to, for ``episodes`` episodes per
seat, drawing its policy once per episode from that seat's own final meta-strategy (with
``agents.mapping: shared`` the seats' mixtures over the one pool differ; with a joint
meta-strategy, ``ce``/``cce``, the seat's marginal); the other seats play a uniformly
random policy, or the seats of another run of the same env (drawn together from its joint
meta-strategy, if it has one). The games run on a backend (the run's own by default, so
a run made on Ray is evaluated on Ray) as one evaluate task per seat, whose seats are
mixtures (:class:`~popmarl.data.tasks.EvalTask`): exact where the env computes outcomes
exactly, sampled otherwise. The run's pools come from :func:`popmarl.tools.loaded_run.load_run`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np

from popmarl.interfaces.algorithm import Algorithm
from popmarl.interfaces.backend import Backend, Components
from popmarl.config.schema import ComponentConfig
from popmarl.errors import UserError
from popmarl.tools.loaded_run import LoadedRun, load_run
from popmarl.tools.pools import Pool, side_meta
from popmarl.data.population import AgentMapping
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import EvalResult, EvalTask
from popmarl.runs.rundir import RunDirectory
from popmarl.runs.runner import build, build_algorithms, policy_spaces, run_setup
from popmarl.config.conversion import did_you_mean

#: Where the opponent's populations are renamed (``:`` is not allowed in a population
#: name, so they cannot collide with the run's own).
OPPONENT_PREFIX = "opponent:"
RANDOM_PREFIX = "random:"


#: The registered algorithm whose policies play uniformly at random.
RANDOM_ALGORITHM = "random"


def random_pools(run: LoadedRun) -> dict[str, Pool]:
    """A uniformly random policy per agent (keyed by agent), each agent's its own
    population (``random:<agent>``), made by the run's registered ``random`` algorithm."""
    algorithm: Algorithm = run.registries.get("algorithms").load(RANDOM_ALGORITHM)()
    spaces = policy_spaces(run.env, AgentMapping.resolve("per_player", run.env.agents))
    ids = {a: f"{RANDOM_PREFIX}{a}/0" for a in run.env.agents}
    meta = MetaStrategy.pure(ids)
    live = {ids[a]: algorithm.make_policy(space=spaces[a], seed=0) for a in run.env.agents}
    return {a: Pool(seat=a, meta=meta, live=live, algorithm=(RANDOM_ALGORITHM, {}),
                    space=attrs.evolve(spaces[a], population=RANDOM_PREFIX + a))
            for a in run.env.agents}


def opponent_pools(run: LoadedRun, opponent: str) -> dict[str, Pool]:
    """Per agent, the pool the opponent plays there: ``random`` or another run's pool
    of that seat (its populations renamed ``opponent:<population>``)."""
    if opponent == "random":
        return random_pools(run)
    if not RunDirectory(opponent).config_file.is_file():
        raise UserError(f"--opponent {opponent}: not 'random' and not a run directory (no "
                        f"{RunDirectory(opponent).config_file}); --opponent takes 'random' or another run's "
                        f"directory{did_you_mean(opponent, ['random'])}")
    other = load_run(opponent, registries=run.registries)
    if (other.config.env.name, other.config.env.params) != (run.config.env.name, run.config.env.params):
        raise UserError(f"--opponent {opponent}: a run of a different env "
                        f"({other.config.env.name} {dict(other.config.env.params)})")
    return {agent: pool.renamed(OPPONENT_PREFIX) for agent, pool in other.pools.items()}


def evaluate_run(run: LoadedRun, opponents: Mapping[str, Pool], *, episodes: int, seed: int = 0,
                 backend: ComponentConfig | None = None) -> dict[str, dict[str, Any]]:
    """Win/draw/loss rates and mean return of each population over all its seats (each
    seat drawing from its own pool ``run.pools[seat]`` against ``opponents`` in the
    others), on ``backend`` (default: the run's own). Exact where the env computes
    returns and outcomes exactly (``exact``; ``episodes`` is then 0), else over
    ``episodes`` sampled per seat (:mod:`popmarl.data.outcomes` says what a win is).
    """
    agents = run.env.agents
    jobs = [(population, seat) for population in run.mapping.populations for seat in run.mapping.agents_of(population)]
    theirs = side_meta({a: opponents[a] for a in agents})
    tasks = [EvalTask(index=(j,), meta=MetaStrategy.merged(run.pools[seat].meta.for_seats((seat,)).marginals(),
                                                           theirs.without(seat)),
                      episodes=episodes, seed=seed)
             for j, (_, seat) in enumerate(jobs)]
    with evaluation_backend(run, [run.pools, opponents], backend) as started:
        results = started.evaluate(tasks)
    report = {}
    for population in run.mapping.populations:
        mine = [(agents.index(seat), result) for (p, seat), result in zip(jobs, results) if p == population]
        report[population] = _population_report(mine)
    return report


def _population_report(results: list[tuple[int, EvalResult]]) -> dict[str, Any]:
    """A population's figures over its seats (each seat ``k`` with its result)."""
    rates = np.mean([r.outcome_rates()[:, k] for k, r in results], axis=0)
    return {"win": float(rates[0]), "draw": float(rates[1]), "loss": float(rates[2]),
            "mean_return": float(np.mean([r.returns[k] for k, r in results])),
            "episodes": sum(r.episodes for _, r in results),
            "exact": all(r.exact and r.exact_outcomes for _, r in results)}


@contextmanager
def evaluation_backend(run: LoadedRun, sides: list[Mapping[str, Pool]],
                        backend: ComponentConfig | None) -> Iterator[Backend]:
    """The backend that plays the games (``backend``, default the run's own), started
    with every pool's population and policies, and closed on leaving the block."""
    found = run.registries
    pools = [pool for side in sides for pool in side.values()]
    spaces = {pool.space.population: pool.space for pool in pools}
    specs = {pool.space.population: ComponentConfig(name=pool.algorithm[0], params=dict(pool.algorithm[1]))
             for pool in pools}
    # The run's mapping: only its own populations get a backend's learners.
    setup = run_setup(run.config, mapping=run.mapping, spaces=spaces, specs=specs, found=found)
    started: Backend = build("backends", backend if backend is not None else run.config.backend,
                             "backend.params", found)
    started.start(setup, Components(env=run.env, algorithms=build_algorithms(specs, found)))
    try:
        added: set[str] = set()
        for pool in pools:
            for pid in pool.policy_ids:
                policy = pool.live[pid]
                if pid not in added:
                    started.add_policy(pid, policy.get_weights())
                    added.add(pid)
        yield started
    finally:
        started.close()


def format_report(report: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [f"{'population':<20}{'win':>8}{'draw':>8}{'loss':>8}{'mean_return':>13}{'episodes':>10}"]
    for population, r in report.items():
        episodes = "exact" if r.get("exact") else f"{r['episodes']:d}"
        lines.append(f"{population:<20}{r['win']:>8.3f}{r['draw']:>8.3f}{r['loss']:>8.3f}"
                     f"{r['mean_return']:>13.4f}{episodes:>10}")
    return "\n".join(lines)
