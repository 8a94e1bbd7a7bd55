"""``popmarl eval``: play a finished run's meta-strategies against an opponent.

Each population of the run plays every seat it maps to, for ``episodes`` episodes per
seat, drawing its policy from its final meta-strategy once per episode; the other seats
play a uniformly random policy, or the populations of another run of the same env.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from popmarl.algorithm import Algorithm
from popmarl.builtin.random_policy import RandomAlgorithm
from popmarl.config import RunConfig, read_yaml, validate
from popmarl.env import Env
from popmarl.errors import UserError
from popmarl.policy import Policy
from popmarl.population import AgentMapping
from popmarl.rollout import RolloutWorker
from popmarl.rundir import RunDirectory
from popmarl.runner import build, policy_spaces


@attrs.frozen(kw_only=True)
class Pool:
    """A population's final policies and their meta-strategy."""

    policies: tuple[Policy, ...]
    mixture: np.ndarray

    def draw(self, rng: np.random.Generator) -> Policy:
        return self.policies[int(rng.choice(len(self.policies), p=self.mixture))]


@attrs.frozen(kw_only=True)
class LoadedRun:
    """A run directory's config, env, agent mapping and final pools."""

    config: RunConfig
    env: Env
    mapping: AgentMapping
    pools: Mapping[str, Pool]


def load_run(path: str | Path) -> LoadedRun:
    """Rebuild a finished (or checkpointed) run's env and final meta-strategies."""
    run = RunDirectory(path)
    if not run.config_file.is_file():
        raise UserError(f"{run.path}: not a run directory (no config.yaml)")
    config = validate(read_yaml(run.config_file), source=str(run.config_file))
    env: Env = build("envs", config.env, "env.params")
    algorithm: Algorithm = build("algorithms", config.algorithm, "algorithm.params")
    mapping = AgentMapping.resolve(config.agents.mapping, env.agents)
    spaces = policy_spaces(env, mapping)
    summary = run.read_summary()
    pools = {}
    for population, info in summary.get("populations", {}).items():
        if population not in spaces:
            raise UserError(f"{run.summary_file}: population {population!r} is not in the run's agent mapping")
        mixture = np.asarray(info["meta_strategy"], dtype=float)
        chosen = [(pid, w) for pid, w in zip(info["policies"], mixture) if w > 0]
        policies = []
        for pid, _ in chosen:
            policy = algorithm.make_policy(space=spaces[population], seed=0)
            policy.set_weights(run.load_policy(pid))
            policies.append(policy)
        weights = np.array([w for _, w in chosen])
        pools[population] = Pool(policies=tuple(policies), mixture=weights / weights.sum())
    if not pools:
        raise UserError(f"{run.summary_file}: the run has no populations yet")
    return LoadedRun(config=config, env=env, mapping=mapping, pools=pools)


def random_pools(run: LoadedRun) -> dict[str, Pool]:
    """A uniformly random policy per agent (keyed by agent)."""
    algorithm = RandomAlgorithm()
    spaces = policy_spaces(run.env, AgentMapping.resolve("per_player", run.env.agents))
    return {a: Pool(policies=(algorithm.make_policy(space=spaces[a], seed=0),), mixture=np.ones(1))
            for a in run.env.agents}


def opponent_pools(run: LoadedRun, opponent: str) -> dict[str, Pool]:
    """Per agent, the pool the opponent plays there: ``random`` or another run's."""
    if opponent == "random":
        return random_pools(run)
    other = load_run(opponent)
    if (other.config.env.name, other.config.env.params) != (run.config.env.name, run.config.env.params):
        raise UserError(f"--opponent {opponent}: a run of a different env "
                        f"({other.config.env.name} {dict(other.config.env.params)})")
    return {a: other.pools[other.mapping.population_of[a]] for a in run.env.agents}


def evaluate_run(run: LoadedRun, opponents: Mapping[str, Pool], *, episodes: int, seed: int = 0,
                 num_envs: int = 64) -> dict[str, dict[str, float]]:
    """Win/draw/loss rates and mean return of each population over all its seats.

    A seat wins when its return beats every other seat's, loses when another's beats it.
    """
    rng = np.random.default_rng(seed)
    agents = run.env.agents
    jobs = [(population, agent) for population in run.pools for agent in run.mapping.agents_of(population)]
    order = iter([job for job in jobs for _ in range(episodes)])

    def sample(steps: int) -> tuple[dict[str, Policy], tuple[str, str]] | None:
        job = next(order, None)
        if job is None:
            return None
        population, seat = job
        profile = {a: opponents[a].draw(rng) for a in agents}
        profile[seat] = run.pools[population].draw(rng)
        return profile, job

    result = RolloutWorker(env=run.env, num_envs=num_envs).run(sample, seed=seed, explore=False)
    outcome: dict[str, list[tuple[int, float]]] = {p: [] for p in run.pools}
    for (population, seat), returns in zip(result.tags, result.returns):
        k = agents.index(seat)
        others = np.delete(returns, k)
        best_other = others.max() if others.size else returns[k]
        outcome[population].append((int(np.sign(returns[k] - best_other)), float(returns[k])))
    report = {}
    for population, rows in outcome.items():
        signs = np.array([s for s, _ in rows])
        report[population] = {
            "win": float(np.mean(signs > 0)), "draw": float(np.mean(signs == 0)),
            "loss": float(np.mean(signs < 0)), "mean_return": float(np.mean([r for _, r in rows])),
            "episodes": len(rows),
        }
    return report


def format_report(report: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [f"{'population':<20}{'win':>8}{'draw':>8}{'loss':>8}{'mean_return':>13}{'episodes':>10}"]
    for population, r in report.items():
        lines.append(f"{population:<20}{r['win']:>8.3f}{r['draw']:>8.3f}{r['loss']:>8.3f}"
                     f"{r['mean_return']:>13.4f}{r['episodes']:>10d}")
    return "\n".join(lines)

