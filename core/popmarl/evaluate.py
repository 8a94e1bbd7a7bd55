"""``popmarl eval``: play a finished run's meta-strategies against an opponent.

Each population of the run plays every seat it maps to, for ``episodes`` episodes per
seat, drawing its policy once per episode from that seat's own final meta-strategy (with
``agents.mapping: shared`` the seats' mixtures over the one pool differ; with a joint
meta-strategy, ``ce``/``cce``, the seat's marginal); the other seats play a uniformly
random policy, or the seats of another run of the same env (drawn together from its joint
meta-strategy, if it has one).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from popmarl.builtin.random_policy import RandomAlgorithm
from popmarl.config import RunConfig, population_algorithms, read_yaml, validate
from popmarl.env import Env
from popmarl.errors import UserError
from popmarl.policy import Policy
from popmarl.population import AgentMapping
from popmarl.registries import Registries, RegistriesLike
from popmarl.rollout import RolloutWorker
from popmarl.rundir import RunDirectory
from popmarl.runner import build, build_algorithms, policy_spaces


@attrs.frozen(kw_only=True)
class JointPool:
    """A joint meta-strategy: profiles (one policy per seat of ``agents``) drawn together."""

    agents: tuple[str, ...]
    profiles: tuple[tuple[Policy, ...], ...]
    probabilities: np.ndarray

    def draw(self, rng: np.random.Generator) -> dict[str, Policy]:
        return dict(zip(self.agents, self.profiles[int(rng.choice(len(self.profiles), p=self.probabilities))]))


@attrs.frozen(kw_only=True)
class Pool:
    """The final policies a seat plays and its meta-strategy over them; ``joint``: the
    run's joint meta-strategy, when it has one (``mixture`` is then this seat's marginal)."""

    policies: tuple[Policy, ...]
    mixture: np.ndarray
    joint: JointPool | None = None

    def draw(self, rng: np.random.Generator) -> Policy:
        return self.policies[int(rng.choice(len(self.policies), p=self.mixture))]


def draw_profile(pools: Mapping[str, Pool], agents: tuple[str, ...], rng: np.random.Generator) -> dict[str, Policy]:
    """One policy per agent: the seats of a joint meta-strategy drawn together, the others
    each from its own mixture."""
    joint = next((p.joint for p in pools.values() if p.joint is not None), None)
    profile = joint.draw(rng) if joint is not None else {}
    return {a: profile[a] if a in profile else pools[a].draw(rng) for a in agents}


@attrs.frozen(kw_only=True)
class LoadedRun:
    """A run directory's config, env, agent mapping and final pools (one per agent)."""

    config: RunConfig
    env: Env
    mapping: AgentMapping
    pools: Mapping[str, Pool]


def load_run(path: str | Path, *, registries: RegistriesLike | None = None) -> LoadedRun:
    """Rebuild a finished (or checkpointed) run's env and final meta-strategies (its
    components looked up in ``registries``, as :func:`popmarl.run` takes them)."""
    run = RunDirectory(path)
    if not run.config_file.is_file():
        raise UserError(f"{run.path}: not a run directory (no config.yaml)")
    found = Registries.of(registries)
    config = validate(read_yaml(run.config_file), source=str(run.config_file), registries=found)
    env: Env = build("envs", config.env, "env.params", found)
    mapping = AgentMapping.resolve(config.agents.mapping, env.agents)
    spaces = policy_spaces(env, mapping)
    algorithms = build_algorithms(population_algorithms(config, mapping.populations), found)
    summary = run.read_summary()
    populations = summary.get("populations", {})
    if not populations:
        raise UserError(f"{run.summary_file}: the run has no populations yet")
    for population in populations:
        if population not in spaces:
            raise UserError(f"{run.summary_file}: population {population!r} is not in the run's agent mapping")
    # psro writes each seat's mixture; a summary without them (marl: the newest policy
    # of each population) has one mixture per population, the same in all its seats.
    seat_mixtures = summary.get("meta_strategies") or {}
    loaded: dict[str, Policy] = {}  # policy id -> policy, one object shared by the seats
    pools: dict[str, Pool] = {}
    for agent in env.agents:
        population = mapping.population_of[agent]
        info = populations.get(population)
        if info is None:
            raise UserError(f"{run.summary_file}: no population {population!r} (agent {agent})")
        mixture = np.asarray(seat_mixtures.get(agent, info["meta_strategy"]), dtype=float)
        if len(mixture) != len(info["policies"]):
            raise UserError(f"{run.summary_file}: agent {agent}'s meta-strategy has {len(mixture)} weights "
                            f"for {len(info['policies'])} policies of population {population!r}")
        chosen = [(pid, w) for pid, w in zip(info["policies"], mixture) if w > 0]
        for pid, _ in chosen:
            if pid not in loaded:
                loaded[pid] = algorithms[population].make_policy(space=spaces[population], seed=0)
                loaded[pid].set_weights(run.load_policy(pid))
        weights = np.array([w for _, w in chosen])
        pools[agent] = Pool(policies=tuple(loaded[pid] for pid, _ in chosen), mixture=weights / weights.sum())
    joint = summary.get("joint_meta_strategy")
    if joint:
        joint_pool = _joint_pool(joint, loaded, run.summary_file)
        pools = {a: attrs.evolve(pool, joint=joint_pool) for a, pool in pools.items()}
    return LoadedRun(config=config, env=env, mapping=mapping, pools=pools)


def _joint_pool(joint: Mapping[str, Any], loaded: Mapping[str, Policy], source: Path) -> JointPool:
    """The summary's ``joint_meta_strategy`` over the already loaded policies."""
    agents, profiles = tuple(joint["agents"]), joint["profiles"]
    probabilities = np.asarray(joint["probabilities"], dtype=float)
    if len(profiles) != len(probabilities) or any(len(p) != len(agents) for p in profiles):
        raise UserError(f"{source}: joint_meta_strategy needs one policy per seat of {list(agents)} in each "
                        "profile and one probability per profile")
    missing = sorted({pid for profile in profiles for pid in profile} - set(loaded))
    if missing:
        raise UserError(f"{source}: joint_meta_strategy names policies outside the seats' meta-strategies: "
                        f"{', '.join(missing)}")
    return JointPool(agents=agents, profiles=tuple(tuple(loaded[pid] for pid in p) for p in profiles),
                     probabilities=probabilities / probabilities.sum())


def random_pools(run: LoadedRun) -> dict[str, Pool]:
    """A uniformly random policy per agent (keyed by agent)."""
    algorithm = RandomAlgorithm()
    spaces = policy_spaces(run.env, AgentMapping.resolve("per_player", run.env.agents))
    return {a: Pool(policies=(algorithm.make_policy(space=spaces[a], seed=0),), mixture=np.ones(1))
            for a in run.env.agents}


def opponent_pools(run: LoadedRun, opponent: str) -> dict[str, Pool]:
    """Per agent, the pool the opponent plays there: ``random`` or another run's pool
    of that seat."""
    if opponent == "random":
        return random_pools(run)
    other = load_run(opponent)
    if (other.config.env.name, other.config.env.params) != (run.config.env.name, run.config.env.params):
        raise UserError(f"--opponent {opponent}: a run of a different env "
                        f"({other.config.env.name} {dict(other.config.env.params)})")
    return dict(other.pools)


def evaluate_run(run: LoadedRun, opponents: Mapping[str, Pool], *, episodes: int, seed: int = 0,
                 num_envs: int = 64) -> dict[str, dict[str, float]]:
    """Win/draw/loss rates and mean return of each population over all its seats (each
    seat drawing from its own pool ``run.pools[seat]``).

    A seat wins when its return beats every other seat's, loses when another's beats it.
    """
    rng = np.random.default_rng(seed)
    agents = run.env.agents
    jobs = [(population, agent) for population in run.mapping.populations for agent in run.mapping.agents_of(population)]
    order = iter([job for job in jobs for _ in range(episodes)])

    def sample(steps: int) -> tuple[dict[str, Policy], tuple[str, str]] | None:
        job = next(order, None)
        if job is None:
            return None
        population, seat = job
        profile = draw_profile(opponents, agents, rng)
        profile[seat] = run.pools[seat].draw(rng)
        return profile, job

    result = RolloutWorker(env=run.env, num_envs=num_envs).run(sample, seed=seed, explore=False)
    outcome: dict[str, list[tuple[int, float]]] = {p: [] for p in run.mapping.populations}
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

