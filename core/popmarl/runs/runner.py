"""Build a run's components from its config and drive its scenario.

Everything that can fail on bad input (component construction, agent mapping, the run
directory checks) happens before anything is written.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from popmarl.interfaces.algorithm import Algorithm, PolicySpace, check_state
from popmarl.interfaces.backend import Backend, Components, RunSetup
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.config.schema import ComponentConfig, RunConfig, dump, population_algorithms, to_dict, validate
from popmarl.interfaces.env import Env
from popmarl.interfaces.env_traits import traits_of
from popmarl.errors import ConfigError, ResumeError
from popmarl.plugins.hooks import Hooks, make_plugin_manager
from popmarl.data.population import AgentMapping
from popmarl.data.run import RunInfo
from popmarl.plugins.registry import Registries, RegistriesLike
from popmarl.runs.process_file import is_alive, read_record, session
from popmarl.runs.rundir import RunDirectory
from popmarl.interfaces.scenario import RunContext, Scenario
from popmarl.interfaces.solver import MetaSolver
from popmarl.runs.warning_log import WarningLog

_POPULATION_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def build(kind: str, spec: Any, path: str, found: Registries | None = None) -> Any:
    """An instance of a configured component (looked up in ``found``, default
    ``popmarl.<kind>``); a bad value becomes a ConfigError at ``path``."""
    try:
        return (found or Registries.current()).component(kind, spec.name, spec.params)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: {spec.name}: {exc}") from None


def policy_spaces(env: Env, mapping: AgentMapping) -> dict[str, PolicySpace]:
    """Each population's spaces; its agents must share them."""
    spaces: dict[str, PolicySpace] = {}
    for population in mapping.populations:
        if not _POPULATION_NAME.fullmatch(population):
            raise ConfigError(f"agents.mapping: population name {population!r} may use only letters, digits, _ . -")
        agents = mapping.agents_of(population)
        obs = {a: env.observation_space(a) for a in agents}
        act = {a: env.action_space(a) for a in agents}
        first = agents[0]
        for agent in agents[1:]:
            if obs[agent] != obs[first] or act[agent] != act[first]:
                raise ConfigError(
                    f"agents.mapping: population {population!r} maps {first} and {agent}, whose spaces differ "
                    f"({obs[first]}, {act[first]} vs {obs[agent]}, {act[agent]}); map them to different populations"
                )
        spaces[population] = PolicySpace(population=population, agents=agents,
                                         observation_space=obs[first], action_space=act[first])
    return spaces


def build_algorithms(specs: Mapping[str, ComponentConfig], found: Registries | None = None) -> dict[str, Algorithm]:
    """Each population's algorithm (one instance per distinct component: populations
    given the same one share it); a bad value is a ConfigError at its path."""
    built: dict[tuple[str, str], Algorithm] = {}
    algorithms = {}
    shared = len({(s.name, repr(s.params)) for s in specs.values()}) == 1
    for population, spec in specs.items():
        key = (spec.name, repr(spec.params))
        if key not in built:
            path = "algorithm.params" if shared else f"algorithm.{population}.params"
            built[key] = build("algorithms", spec, path, found)
        algorithms[population] = built[key]
    return algorithms


def with_env_defaults(specs: Mapping[str, ComponentConfig], env: Env,
                      found: Registries | None = None) -> dict[str, ComponentConfig]:
    """Each population's algorithm with its params that follow the env
    (:attr:`popmarl.interfaces.algorithm.Algorithm.env_params`) filled where the config leaves them
    null, from the env's traits (:mod:`popmarl.interfaces.env_traits`; measured only when one is)."""
    registry = Registries.of(found).get("algorithms")
    filled: dict[str, ComponentConfig] = {}
    for population, spec in specs.items():
        cls = registry.load(spec.name)
        unset = [name for name in getattr(cls, "env_params", ()) if spec.params.get(name) is None]
        if unset:
            defaults = cls.env_defaults(traits_of(env))
            spec = ComponentConfig(name=spec.name, params={**spec.params, **{k: defaults[k] for k in unset}})
        filled[population] = spec
    return filled


def describe_env_defaults(before: Mapping[str, ComponentConfig], after: Mapping[str, ComponentConfig],
                          env: Env) -> list[str]:
    """Lines for the run's log: which params :func:`with_env_defaults` filled, and why."""
    populations: dict[tuple[str, str], list[str]] = {}  # one line per algorithm and values
    for population, spec in after.items():
        filled = {k: v for k, v in spec.params.items() if before[population].params.get(k) is None and v is not None}
        if filled:
            values = ", ".join(f"{k} {v}" for k, v in filled.items())
            populations.setdefault((spec.name, values), []).append(population)
    return [f"popmarl: {name} ({', '.join(names)}): {values}, from the env ({traits_of(env).describe()})"
            for (name, values), names in populations.items()]


def describe_algorithms(algorithms: Mapping[str, Algorithm], specs: Mapping[str, ComponentConfig],
                        spaces: Mapping[str, PolicySpace]) -> list[str]:
    """Lines for the run's log: what each population's algorithm says of how it builds
    its policies (:meth:`~popmarl.interfaces.algorithm.Algorithm.describe`, e.g. the
    network model of each network), one line per algorithm and text."""
    populations: dict[tuple[str, str], list[str]] = {}
    for population, algorithm in algorithms.items():
        text = algorithm.describe(spaces[population])
        if text:
            populations.setdefault((specs[population].name, text), []).append(population)
    return [f"popmarl: {name} ({', '.join(names)}): {text}" for (name, text), names in populations.items()]


def run_setup(config: RunConfig, *, mapping: AgentMapping, spaces: Mapping[str, PolicySpace],
              specs: Mapping[str, ComponentConfig], found: Registries) -> RunSetup:
    """What a backend needs to rebuild the run's components elsewhere: each population's
    algorithm (``specs``) and spaces by name, and the env or algorithms registered in this
    process only (``found``), by value."""
    local = found.in_process({"envs": config.env.name})
    for spec in specs.values():
        local.update(found.in_process({"algorithms": spec.name}))
    return RunSetup(env_name=config.env.name, env_params=dict(config.env.params),
                    algorithms={p: (spec.name, dict(spec.params)) for p, spec in specs.items()},
                    mapping=mapping, spaces=spaces, seed=config.seed,
                    num_envs=config.evaluation.num_envs, train_num_envs=config.training.num_envs,
                    exact_evaluation=config.evaluation.exact, local_components=local)


def default_out(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{config.scenario.name}-{config.env.name}-{stamp}"


def run(config: RunConfig, out: str | None = None, *, resume: str | None = None,
        registries: RegistriesLike | None = None, console_warnings: bool = True) -> dict[str, Any]:
    """Run ``config`` into ``out``, or continue the run in ``resume``; return the summary.

    To continue a run as it was configured, pass its saved config
    (``load_config(Path(resume) / "config.yaml")``). ``config`` may differ from it only in
    ``stopping`` and ``trackers``: those changes are applied, saved to the run's
    ``config.yaml`` and printed (``resume: stopping.max_iterations 10 -> 50``); any other
    difference is a ResumeError. Components are looked up in ``registries`` (default
    ``popmarl.<kind>``), and those registered in this process only are shipped by value
    to a backend's workers.

    Python warnings raised during the run are appended to the run directory's ``log.txt``
    (:mod:`popmarl.runs.warning_log`); ``console_warnings=False`` (``popmarl run``) shows only
    popmarl's own on the console, and says at the end how many went to the log only."""
    with WarningLog(console=console_warnings) as log:
        summary = _run(config, out, resume=resume, registries=registries, log=log)
    if log.hidden and log.path is not None:
        try:
            print(f"popmarl: {log.hidden} Python warning(s) of the run's libraries in {log.path}")
        except (OSError, ValueError):  # a closed stdout (`popmarl run ... | head -2`): the run is done
            pass
    return summary


def _run(config: RunConfig, out: str | None, *, resume: str | None, registries: RegistriesLike | None,
         log: WarningLog) -> dict[str, Any]:
    found = Registries.of(registries)
    resolved = to_dict(config)
    changes: list[str] = []
    if resume is not None:
        run_dir, changes = RunDirectory.check_resume(
            resume, resolved, resolve=lambda saved: to_dict(validate(saved, registries=found)))
        _refuse_a_live_run(run_dir)
    else:
        run_dir = RunDirectory.check_new(out if out is not None else default_out(config))
    env: Env = build("envs", config.env, "env.params", found)
    solver: MetaSolver = build("solvers", config.solver, "solver.params", found)
    backend: Backend = build("backends", config.backend, "backend.params", found)
    scenario: Scenario = build("scenarios", config.scenario, "scenario.params", found)
    trackers = [build("trackers", t, f"trackers[{i}].params", found) for i, t in enumerate(config.trackers)]
    mapping = AgentMapping.resolve(config.agents.mapping, env.agents)
    spaces = policy_spaces(env, mapping)
    given = population_algorithms(config, mapping.populations)
    specs = with_env_defaults(given, env, found)
    algorithms = build_algorithms(specs, found)
    # A run killed before its first checkpoint restarts from the beginning, in place.
    resuming = resume is not None and run_dir.state_file.is_file()
    scenario.resuming = resuming
    scenario.check(config=config, mapping=mapping)
    populations = {p: PopulationAlgorithm(space=spaces[p], algorithm=algorithms[p], env=env,
                                          algorithm_name=specs[p].name)
                   for p in mapping.populations}
    scenario.check_populations(populations)
    scenario.check_solver(solver, mapping=mapping, populations=populations, config=config)
    if (config.training.self_play or 0) > 0 and len({(s.observation_space, s.action_space) for s in spaces.values()}) > 1:
        raise ConfigError("training.self_play: copies of a learner can play the other seats only when all populations share "
                          "observation and action spaces; set it to 0 for this env")
    for agent in populations.values():  # last: an exact oracle's check may enumerate the game
        check_state(agent.algorithm, env, population=agent.population, algorithm_name=agent.algorithm_name)
        agent.algorithm.check(env=env, space=agent.space)
    hooks = Hooks(make_plugin_manager(trackers))  # a broken hook plugin stops the run here
    setup = run_setup(config, mapping=mapping, spaces=spaces, specs=specs, found=found)
    # A corrupt checkpoint is reported before anything starts or changes.
    start_iteration = int(run_dir.load_state()[0]["iteration"]) if resuming else 0
    for change in changes:
        print(f"resume: {change}")
    for line in [*describe_env_defaults(given, specs, env), *describe_algorithms(algorithms, specs, spaces)]:
        print(line)
    limit = config.stopping.max_iterations
    if resuming and limit is not None and start_iteration >= limit and any(c.startswith("stopping.max_iterations ") for c in changes):
        # max_iterations counts the run's iterations from its start, not the resumed ones.
        print(f"resume: the run has done {start_iteration} iterations already, so it stops at once; "
              f"to go on, set stopping.max_iterations above {start_iteration}")
    try:
        # The backend starts before the directory is written: a backend that cannot
        # start (e.g. no Ray cluster at the address) leaves nothing behind.
        backend.start(setup, Components(env=env, algorithms=algorithms))
        if resuming:
            run_dir.update_config(dump(config))
        else:
            run_dir.create(dump(config))
        log.open(run_dir.log_file)
        info = RunInfo(run_dir=str(run_dir.path), scenario=config.scenario.name, seed=config.seed,
                       config=resolved, populations=mapping.populations, resumed=resuming,
                       start_iteration=start_iteration)
        context = RunContext(config=config, info=info, run_dir=run_dir, hooks=hooks, env=env, populations=populations,
                             solver=solver, backend=backend, mapping=mapping, spaces=spaces, resume=resuming)
        with session(run_dir.path):  # .process.json, removed once the summary is written
            return scenario.run(context)
    finally:
        backend.close()


def _refuse_a_live_run(run_dir: RunDirectory) -> None:
    """A ResumeError if a process on this host is running the run already (two sessions
    would write one directory)."""
    record = read_record(run_dir.path)
    if record is not None and is_alive(record):
        raise ResumeError(f"--resume {run_dir.path}: the run is going (process {record.pid} on this host); stop it "
                          f"first (Ctrl-C there, or kill {record.pid}), or follow it with "
                          f"popmarl show --follow {run_dir.path}")
