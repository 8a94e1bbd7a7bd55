"""A run directory loaded to act: :func:`popmarl.load_run`.

A loaded run rebuilds the run's env and, at its final iteration or a past one, each
population's policies (read from the run directory when first asked for) and
meta-strategies: per population (:class:`Population`) and per seat (:class:`Pool`, what
``popmarl eval`` plays; its :class:`~popmarl.data.meta_strategy.MetaStrategy` is the run's). :meth:`LoadedRun.actor` plays a seat from the env's own
observations (:class:`~popmarl.tools.actor.Actor`).

A finished run's final meta-strategies come from ``summary.json`` (each seat's own
mixture, and the joint one of a ``ce`` / ``cce`` run). A run that is going or was killed
(:attr:`LoadedRun.status`, :mod:`popmarl.tools.run_status`) has none yet: its latest are
those of its last committed checkpoint, the same a finished run would give for that
iteration (:mod:`popmarl.tools.checkpoint_view`). A past iteration's come from its line
of the checkpoint's history (its lines of ``metrics.jsonl``), which
records how many policies each population had then and its mixture over them (``marl``:
none, its newest policy plays): every seat of a population plays that mixture, and a
joint meta-strategy's seats their marginals.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from popmarl.tools.actor import Actor
from popmarl.tools.checkpoint_view import Checkpoint, Mixtures, read_checkpoint
from popmarl.tools.pools import Pool
from popmarl.tools.run_status import RunStatus, run_status
from popmarl.interfaces.algorithm import Algorithm, PolicySpace
from popmarl.config.loading import read_yaml
from popmarl.config.schema import RunConfig, population_algorithms, validate
from popmarl.interfaces.env import Env
from popmarl.errors import UserError
from popmarl.interfaces.policy import Policy
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.population import AgentMapping
from popmarl.plugins.registry import Registries, RegistriesLike
from popmarl.runs.rundir import RunDirectory
from popmarl.runs.runner import build, build_algorithms, policy_spaces
from popmarl.config.conversion import did_you_mean


class PolicyStore:
    """The run's frozen policies, each read from the run directory and rebuilt by its
    population's algorithm when first asked for, then kept (one object per policy id,
    shared by every seat that plays it)."""

    def __init__(self, run: RunDirectory, algorithms: Mapping[str, Algorithm],
                 spaces: Mapping[str, PolicySpace]) -> None:
        self._run, self._algorithms, self._spaces = run, algorithms, spaces
        self._loaded: dict[str, Policy] = {}

    def get(self, policy_id: str) -> Policy:
        if policy_id not in self._loaded:
            population = policy_id.rsplit("/", 1)[0]
            policy = self._algorithms[population].make_policy(space=self._spaces[population], seed=0)
            policy.set_weights(self._run.load_policy(policy_id))
            self._loaded[policy_id] = policy
        return self._loaded[policy_id]


@attrs.frozen(kw_only=True)
class Population:
    """A population at the loaded iteration: its policies (``policy_ids``, oldest first),
    its meta-strategy over them (``mixture``, aligned; with seats of their own, the mean of
    its seats' mixtures) and the seats it plays."""

    name: str
    seats: tuple[str, ...]
    policy_ids: tuple[str, ...]
    mixture: np.ndarray
    store: PolicyStore = attrs.field(repr=False, eq=False)

    def policy(self, policy_id: str) -> Policy:
        """One of the population's policies, by id (e.g. ``player_0/3``)."""
        if policy_id not in self.policy_ids:
            raise UserError(f"policy {policy_id!r}: not a policy of population {self.name!r} at this iteration"
                            f"{did_you_mean(policy_id, self.policy_ids)}; it has {_listed(self.policy_ids)}")
        return self.store.get(policy_id)

    def sample_id(self, rng: np.random.Generator) -> str:
        """A policy id drawn from the meta-strategy."""
        return self.policy_ids[int(rng.choice(len(self.policy_ids), p=self.mixture))]

    def sample(self, rng: np.random.Generator) -> Policy:
        """A policy drawn from the meta-strategy."""
        return self.store.get(self.sample_id(rng))


def _listed(ids: tuple[str, ...], limit: int = 8) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


@attrs.frozen(kw_only=True)
class LoadedRun:
    """A run directory's config, env, agent mapping, populations and per-seat pools at
    ``iteration``, the run's ``status`` when it was loaded (finished, or going or killed
    and then read from its last committed checkpoint: ``status.iteration`` is that
    checkpoint's) and the registries its components were found in."""

    config: RunConfig
    env: Env
    mapping: AgentMapping
    pools: Mapping[str, Pool]
    populations: Mapping[str, Population]
    iteration: int
    path: Path
    status: RunStatus
    registries: Registries = attrs.field(factory=Registries.current)

    @property
    def meta_strategy(self) -> MetaStrategy:
        """The run's meta-strategy over policy ids at ``iteration``: every seat's mixture,
        and its joint meta-strategy where it has one (every pool holds it)."""
        return self.pools[self.env.agents[0]].meta

    def population(self, name: str) -> Population:
        """The population ``name`` (its policies and meta-strategy)."""
        if name not in self.populations:
            raise UserError(f"population {name!r}: not a population of {self.path}{did_you_mean(name, list(self.populations))}; "
                            f"its populations: {', '.join(self.populations)}")
        return self.populations[name]

    def actor(self, seat: str, rng: np.random.Generator | None = None) -> Actor:
        """A player of ``seat``'s meta-strategy that acts on the env's own observations
        (:class:`~popmarl.tools.actor.Actor`); ``rng`` draws its policies and samples its
        actions (default: a fresh, unseeded generator)."""
        if seat not in self.pools:
            raise UserError(f"seat {seat!r}: not a seat of {self.path}{did_you_mean(seat, list(self.pools))}; "
                            f"its seats: {', '.join(self.pools)}")
        return Actor(env=self.env, seat=seat, pool=self.pools[seat],
                     rng=rng if rng is not None else np.random.default_rng())


def load_run(path: str | os.PathLike[str], iteration: int | None = None, *, main: bool = False,
             registries: RegistriesLike | None = None) -> LoadedRun:
    """Rebuild a run's env and meta-strategies: the final ones (``iteration=None``; from
    ``summary.json``, or, while the run is going or once it was killed, from its last
    committed checkpoint), or those of a past ``iteration`` (0 = the initial policies;
    from the checkpoint's history); with ``main``, a league run's main agents instead
    (alone). Components are looked up in ``registries``, as :func:`popmarl.run` takes them."""
    run = RunDirectory(path)
    if not run.path.is_dir():
        raise UserError(f"{run.path}: no such run directory")
    if not run.config_file.is_file():
        raise UserError(f"{run.path}: not a run directory (no config.yaml)")
    if iteration is not None and (isinstance(iteration, bool) or not isinstance(iteration, (int, np.integer))):
        raise UserError(f"iteration: must be a whole number or None (the final meta-strategy), got {iteration!r}")
    status = run_status(run)
    if not status.finished and status.iteration is None:
        raise UserError(f"{run.path}: {status.describe()}; it has no checkpoint to load yet")
    found = Registries.of(registries)
    config = validate(read_yaml(run.config_file), source=str(run.config_file), registries=found)
    env: Env = build("envs", config.env, "env.params", found)
    mapping = AgentMapping.resolve(config.agents.mapping, env.agents)
    spaces = policy_spaces(env, mapping)
    specs = population_algorithms(config, mapping.populations)
    store = PolicyStore(run, build_algorithms(specs, found), spaces)
    read = _read(run, status, iteration, main=main, agents=env.agents, mapping=mapping,
                 scenario=config.scenario.name)
    populations, seat_mixtures, joint, source = read.populations, read.seat_mixtures, read.joint, read.source
    for population in populations:
        if population not in spaces:
            raise UserError(f"{source}: population {population!r} is not in the run's agent mapping")
    supports: dict[str, tuple[list[str], np.ndarray]] = {}
    for agent in env.agents:
        name = mapping.population_of[agent]
        if name not in populations:
            raise UserError(f"{source}: no population {name!r} (agent {agent})")
        ids, population_mixture = populations[name]
        mixture = np.asarray(seat_mixtures.get(agent, population_mixture), dtype=float)
        if len(mixture) != len(ids):
            raise UserError(f"{source}: agent {agent}'s meta-strategy has {len(mixture)} weights "
                            f"for {len(ids)} policies of population {name!r}")
        chosen = [(pid, w) for pid, w in zip(ids, mixture) if w > 0]
        supports[agent] = ([pid for pid, _ in chosen], np.array([w for _, w in chosen]))
    meta = MetaStrategy.independent(supports)
    if joint:
        meta = _with_joint(meta, joint, source)
    live = {pid: store.get(pid) for pid in meta.named()}
    pools = {agent: Pool(seat=agent, meta=meta, live=live, space=spaces[mapping.population_of[agent]],
                         algorithm=(specs[mapping.population_of[agent]].name,
                                    dict(specs[mapping.population_of[agent]].params)))
             for agent in env.agents}
    loaded = {name: Population(name=name, seats=mapping.agents_of(name), policy_ids=tuple(ids),
                               mixture=_normalised(mixture), store=store)
              for name, (ids, mixture) in populations.items()}
    return LoadedRun(config=config, env=env, mapping=mapping, pools=pools, populations=loaded,
                     iteration=read.iteration, path=run.path, status=read.status, registries=found)


@attrs.frozen(kw_only=True)
class _Read:
    """The meta-strategies :func:`load_run` read, and where from: the populations (policy
    ids and mixture), the seats' own mixtures where the run has them, a joint meta-strategy
    (as ``summary.json`` writes it), the ``iteration`` they are of, the file read
    (``source``, for messages) and the run's status (at the iteration read)."""

    populations: Mixtures
    seat_mixtures: Mapping[str, Any]
    joint: Any
    iteration: int
    source: Path
    status: RunStatus


def _read(run: RunDirectory, status: RunStatus, iteration: int | None, *, main: bool, agents: tuple[str, ...],
          mapping: AgentMapping, scenario: str) -> _Read:
    """The meta-strategies :func:`load_run` asks for: a finished run's final ones from its
    summary, an unfinished run's latest from its last committed checkpoint, a past
    iteration's from the checkpoint's history."""
    if main and iteration is not None:
        raise UserError("iteration: a league's main agents load at the end of the run only (leave it unset)")
    checkpoint: Checkpoint | None = None
    if status.finished:
        summary = run.read_summary()
        last, source = int(summary.get("iterations", 0)), run.summary_file
    else:
        checkpoint = read_checkpoint(run)
        if checkpoint is None:
            raise UserError(f"{run.path}: {status.describe()}; it has no checkpoint to load yet")
        status = attrs.evolve(status, iteration=checkpoint.iteration)  # the one read, if a commit came between
        last, source = checkpoint.iteration, run.state_file
    if iteration is None or iteration == last:
        if checkpoint is None:
            populations, seats, joint = (_main(run, summary), {}, None) if main else _final(run, summary)
        elif main:
            populations, seats, joint = _main_of_checkpoint(run, checkpoint), {}, None
        else:
            populations, seats, joint = _committed(checkpoint, agents, mapping)
        return _Read(populations=populations, seat_mixtures=seats, joint=joint, iteration=last, source=source,
                     status=status)
    past = checkpoint if checkpoint is not None else read_checkpoint(run)
    if past is None:
        raise UserError(f"iteration {iteration}: the run at {run.path} has no checkpoint; only its final "
                        "meta-strategy loads (iteration unset)")
    populations = past.past_mixtures(int(iteration), mapping.populations, scenario, str(run.path))
    return _Read(populations=populations, seat_mixtures={}, joint=None, iteration=int(iteration),
                 source=run.state_file, status=status)


def _final(run: RunDirectory, summary: Mapping[str, Any]) -> tuple[Mixtures, Mapping[str, Any], Any]:
    """The summary's populations, per-seat mixtures (psro writes each seat's; a summary
    without them, as marl's, has one per population) and joint meta-strategy."""
    populations = summary.get("populations", {})
    if not populations:
        raise UserError(f"{run.summary_file}: the run has no populations yet")
    mixtures = {p: (list(info["policies"]), np.asarray(info["meta_strategy"], dtype=float))
                for p, info in populations.items()}
    return mixtures, summary.get("meta_strategies") or {}, summary.get("joint_meta_strategy")


def _main(run: RunDirectory, summary: Mapping[str, Any]) -> Mixtures:
    """Each population's main agent alone (a league's ``main_policies``)."""
    main = summary.get("main_policies")
    if not main:
        raise UserError(f"{run.path}: not a league run (its summary.json names no main_policies); "
                        "--main plays a league's main agents")
    return {p: ([pid], np.ones(1)) for p, pid in main.items()}


def _committed(checkpoint: Checkpoint, agents: tuple[str, ...],
               mapping: AgentMapping) -> tuple[Mixtures, Mapping[str, Any], Any]:
    """As :func:`_final`, from the last committed checkpoint: the populations, per-seat
    mixtures (where it has them) and joint meta-strategy a summary would give for it."""
    seat_populations = [mapping.population_of[a] for a in agents]
    seats = checkpoint.seat_mixtures(seat_populations)
    return (checkpoint.population_mixtures(seat_populations),
            {} if seats is None else dict(zip(agents, seats)),
            checkpoint.joint_meta_strategy(agents, seat_populations))


def _main_of_checkpoint(run: RunDirectory, checkpoint: Checkpoint) -> Mixtures:
    """Each population's main agent alone, as a league's checkpoint names them."""
    main = checkpoint.main_policies()
    if not main:
        raise UserError(f"{run.path}: not a league run (its checkpoint names no main agents); "
                        "--main plays a league's main agents")
    return {p: ([pid], np.ones(1)) for p, pid in main.items()}


def _normalised(mixture: np.ndarray) -> np.ndarray:
    total = float(np.sum(mixture))
    return mixture / total if total > 0 else mixture


def _with_joint(meta: MetaStrategy, joint: Mapping[str, Any], source: Path) -> MetaStrategy:
    """``meta`` (the seats' own mixtures) with the summary's ``joint_meta_strategy`` over them."""
    agents, profiles = tuple(joint["agents"]), joint["profiles"]
    probabilities = np.asarray(joint["probabilities"], dtype=float)
    if len(profiles) != len(probabilities) or any(len(p) != len(agents) for p in profiles):
        raise UserError(f"{source}: joint_meta_strategy needs one policy per seat of {list(agents)} in each "
                        "profile and one probability per profile")
    loaded = {pid for agent in meta.agents for pid, _ in meta.support(agent)}
    missing = sorted({pid for profile in profiles for pid in profile} - loaded)
    if missing:
        raise UserError(f"{source}: joint_meta_strategy names policies outside the seats' meta-strategies: "
                        f"{', '.join(missing)}")
    return attrs.evolve(meta, joint_agents=agents, profiles=profiles, probabilities=probabilities)
