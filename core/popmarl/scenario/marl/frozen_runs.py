"""A marl run's frozen populations taken from other runs: what ``scenario.params.frozen``
may name (an ``.npz`` policy file, or an earlier psro, league or marl run and its
meta-strategy, :class:`FrozenRun`), and reading them, checked against this run's seats,
before anything is written."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import yaml

from popmarl.config.conversion import did_you_mean, structure_attrs
from popmarl.config.schema import ComponentConfig
from popmarl.errors import ConfigError, UserError
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.runs.rundir import RunDirectory
from popmarl.runs.runner import build
from popmarl.tools.loaded_run import load_run


@attrs.frozen(kw_only=True)
class FrozenRun:
    """A frozen population's policies and meta-strategy taken from an earlier run (psro,
    league or marl): ``run``, its directory; ``population``, the population there
    (default: the frozen population's own name); ``iteration``, the meta-strategy after
    that iteration (default: the final one, as ``popmarl eval`` plays it); ``main``: a
    league's main policy alone."""

    run: str
    population: str | None = None
    iteration: int | None = None
    main: bool = False


#: What ``scenario.params.frozen.<population>`` may be.
FROZEN_ALLOWED = ("'initial', a .npz policy file from a run's checkpoints, an earlier popmarl run's directory, "
                  "or {run: DIR, population: NAME, iteration: N, main: BOOL}")


@attrs.frozen(kw_only=True)
class RunSource:
    """A frozen population's mixture as read from the earlier run: its policies (the
    meta-strategy's support, ids as that run names them) with their weights and
    probabilities."""

    run: Path
    population: str
    iteration: int
    main: bool
    policy_ids: tuple[str, ...]
    mixture: np.ndarray
    weights: tuple[Any, ...]

    def describe(self) -> dict[str, Any]:
        """What ``summary.json`` and the checkpoint record of it (``frozen_sources``)."""
        return {"run": str(self.run), "population": self.population, "iteration": self.iteration,
                "main": self.main, "policies": list(self.policy_ids), "meta_strategy": self.mixture.tolist()}


def frozen_runs(frozen: Mapping[str, str | Mapping[str, Any]]) -> dict[str, FrozenRun]:
    """The frozen populations given as another run, by population: a directory named
    as a string (the same population there, its final meta-strategy), or the mapping
    form (:class:`FrozenRun`)."""
    runs: dict[str, FrozenRun] = {}
    problems: list[str] = []
    for population, source in frozen.items():
        where = f"scenario.params.frozen.{population}"
        if isinstance(source, str):
            if source != "initial" and Path(source).is_dir():
                runs[population] = FrozenRun(run=source)
            continue
        before = len(problems)
        spec = structure_attrs(FrozenRun, source, where, problems)
        if len(problems) > before or spec is None:
            continue
        if spec.main and spec.iteration is not None:
            problems.append(f"{where}.iteration: a league's main policy loads at the end of the run only; "
                            "leave iteration unset with main: true")
        elif spec.iteration is not None and spec.iteration < 0:
            problems.append(f"{where}.iteration: must be 0 or more (unset: the final meta-strategy), "
                            f"got {spec.iteration}")
        else:
            runs[population] = spec
    if problems:
        raise ConfigError(problems)
    return runs


def read_sources(frozen: Mapping[str, str | Mapping[str, Any]],
                 populations: Mapping[str, PopulationAlgorithm]) -> dict[str, RunSource]:
    """Each frozen population's mixture read from its run (a missing policy file or
    directory is an error here, before anything is written)."""
    runs = frozen_runs(frozen)
    for population, source in frozen.items():
        if isinstance(source, str) and source != "initial" and not Path(source).exists():
            raise ConfigError(f"scenario.params.frozen.{population}: no such policy file or run directory: "
                              f"{source}; allowed: {FROZEN_ALLOWED}")
    return {population: _read_source(population, spec, populations[population]) for population, spec in runs.items()}


def load_frozen(path: str, population: str) -> dict[str, np.ndarray]:
    """The weights in the ``.npz`` policy file ``path`` that ``population`` is frozen as."""
    where = f"scenario.params.frozen.{population}"
    if not Path(path).is_file():
        raise ConfigError(f"{where}: no such policy file or run directory: {path}; allowed: {FROZEN_ALLOWED}")
    try:
        return RunDirectory.read_weights(Path(path))
    except Exception as exc:
        raise ConfigError(f"{where}: {path} is not a policy file ({exc})") from None


def _same_algorithm(a: Any, b: Any) -> bool:
    """The same algorithm class with the same params, those aside that a run fills from
    its env (``env_params``: they shape training, not the policies)."""
    if type(a) is not type(b):
        return False
    if not attrs.has(type(a.config)):
        return bool(a.config == b.config)
    skip = set(getattr(type(a), "env_params", ()))
    return all(getattr(a.config, f.name) == getattr(b.config, f.name)
               for f in attrs.fields(type(a.config)) if f.name not in skip)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _read_source(population: str, spec: FrozenRun, agent: PopulationAlgorithm) -> RunSource:
    """``spec``'s population and meta-strategy (its support), checked against this run's
    seats of ``population``: the same spaces, and the same algorithm (name and params),
    which rebuilds its policies as that run built them."""
    where = f"scenario.params.frozen.{population}"
    run = RunDirectory(spec.run)
    if not run.path.is_dir():
        raise ConfigError(f"{where}: no such run directory: {spec.run}; allowed: {FROZEN_ALLOWED}")
    if not run.config_file.is_file():
        raise ConfigError(f"{where}: {spec.run} is not a popmarl run directory (no config.yaml); "
                          f"allowed: {FROZEN_ALLOWED}")
    try:
        league = not spec.main or bool(run.read_summary().get("main_policies"))
        loaded = load_run(run.path, spec.iteration, main=spec.main) if league else None
    except UserError as exc:
        raise ConfigError(f"{where}: cannot load the run {spec.run}: {_one_line(exc)}") from None
    if loaded is None:
        raise ConfigError(f"{where}.main: {spec.run} is not a league run (its summary.json names no main_policies); "
                          "main: true takes a league's main policy")
    name = spec.population if spec.population is not None else population
    if name not in loaded.populations:
        raise ConfigError(f"{where}: the run {spec.run} has no population {name!r}"
                          f"{did_you_mean(name, list(loaded.populations))}; its populations: "
                          f"{', '.join(loaded.populations)} (name one: {{run: {spec.run}, population: NAME}})")
    found = loaded.populations[name]
    pool = loaded.pools[found.seats[0]]
    theirs, mine = pool.space, agent.space
    if (theirs.observation_space, theirs.action_space) != (mine.observation_space, mine.action_space):
        raise ConfigError(f"{where}: population {name} of {spec.run} observes {theirs.observation_space} and acts "
                          f"in {theirs.action_space}, this run's seats {', '.join(mine.agents)} observe "
                          f"{mine.observation_space} and act in {mine.action_space}; the spaces must match")
    algorithm_name, params = pool.algorithm
    algorithm = build("algorithms", ComponentConfig(name=algorithm_name, params=dict(params)),
                      f"{where}: the algorithm of {spec.run}", loaded.registries)
    if not _same_algorithm(algorithm, agent.algorithm):
        shown = yaml.safe_dump({"name": algorithm_name, "params": dict(params)}, default_flow_style=True,
                               width=1_000_000).strip()
        raise ConfigError(f"{where}: population {name} of {spec.run} was trained with algorithm {shown}, this run "
                          f"gives {population} {agent.algorithm_name}; give {population} the same algorithm (name and "
                          f"params: algorithm: {{{population}: ..., ...}}), which rebuilds its policies")
    support = [(pid, float(w)) for pid, w in zip(found.policy_ids, found.mixture) if w > 0]
    weights = []
    for pid, _ in support:
        try:
            saved = run.load_policy(pid)
            agent.make_policy(seed=0).set_weights(saved)  # fails here if they do not fit
        except Exception as exc:
            raise ConfigError(f"{where}: policy {pid} of {spec.run} cannot be loaded: {_one_line(exc)}") from None
        weights.append(saved)
    mixture = np.array([w for _, w in support])
    return RunSource(run=run.path.resolve(), population=name, iteration=loaded.iteration, main=spec.main,
                     policy_ids=tuple(pid for pid, _ in support), mixture=mixture / mixture.sum(),
                     weights=tuple(weights))
