"""popmarl: population-based multi-agent reinforcement learning.

Re-exports the interfaces, :data:`hookimpl`, the registries (``popmarl.solvers``,
``popmarl.algorithms``, ...), :func:`load_config`, :func:`run`, :func:`load_run` and the
error classes.
Importing popmarl imports no heavy library; registries load components only on demand.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from popmarl.plugins.registry import KINDS, Registry

if TYPE_CHECKING:
    from popmarl.tools.actor import Actor
    from popmarl.interfaces.agent import AgentInterface
    from popmarl.interfaces.algorithm import Algorithm, BestResponseProblem, PolicySpace
    from popmarl.interfaces.backend import Backend
    from popmarl.interfaces.component import Component
    from popmarl.config.schema import RunConfig
    from popmarl.interfaces.env import Env, ExactEnv, Step, VectorEnv
    from popmarl.errors import (
        CheckpointError,
        ConfigError,
        PluginError,
        PopmarlError,
        ResumeError,
        SolverError,
        UnknownComponentError,
        UserError,
    )
    from popmarl.interfaces.hookspec import hookimpl
    from popmarl.tools.loaded_run import LoadedRun, Population
    from popmarl.interfaces.policy import ExplicitPolicy, Policy
    from popmarl.data.records import (
        BestResponseResult,
        BestResponseTask,
        Episode,
        EpisodeBatch,
        EvalResult,
        EvalTask,
        FrozenPolicy,
        JointOpponents,
        LearnerInit,
        LearnerSpec,
        LearnerState,
        Observations,
        Opponents,
        PolicySpec,
        RunInfo,
        TrainBudget,
        TrainResult,
        TrainTask,
    )
    from popmarl.plugins.registries import Registries, RegistriesLike
    from popmarl.engine.rollout import RolloutWorker
    from popmarl.scenario.base import IterativeScenario, RunContext, Scenario
    from popmarl.interfaces.solver import JointMetaSolver, MetaSolver, SolverResult
    from popmarl.interfaces.spaces import Box, Discrete
    from popmarl.interfaces.tracker import Tracker
    from popmarl.interfaces.trainer import Trainer, TrainerState

#: Where each re-exported name lives; imported on first access, so that ``import popmarl``
#: (and listing the registries) loads neither numpy nor any component module.
_EXPORTS: dict[str, str] = {
    "Actor": "popmarl.tools.actor",
    "AgentInterface": "popmarl.interfaces.agent",
    "Algorithm": "popmarl.interfaces.algorithm",
    "BestResponseProblem": "popmarl.interfaces.algorithm",
    "PolicySpace": "popmarl.interfaces.algorithm",
    "TrainerContext": "popmarl.interfaces.algorithm",
    "Backend": "popmarl.interfaces.backend",
    "Component": "popmarl.interfaces.component",
    "Env": "popmarl.interfaces.env",
    "ExactEnv": "popmarl.interfaces.env",
    "Step": "popmarl.interfaces.env",
    "VectorEnv": "popmarl.interfaces.env",
    "CheckpointError": "popmarl.errors",
    "ConfigError": "popmarl.errors",
    "PluginError": "popmarl.errors",
    "PopmarlError": "popmarl.errors",
    "ResumeError": "popmarl.errors",
    "SolverError": "popmarl.errors",
    "UnknownComponentError": "popmarl.errors",
    "UserError": "popmarl.errors",
    "hookimpl": "popmarl.interfaces.hookspec",
    "LoadedRun": "popmarl.tools.loaded_run",
    "Population": "popmarl.tools.loaded_run",
    "ExplicitPolicy": "popmarl.interfaces.policy",
    "Policy": "popmarl.interfaces.policy",
    "BestResponseResult": "popmarl.data.records",
    "BestResponseTask": "popmarl.data.records",
    "EvalResult": "popmarl.data.records",
    "EvalTask": "popmarl.data.records",
    "FrozenPolicy": "popmarl.data.records",
    "JointOpponents": "popmarl.data.records",
    "LearnerInit": "popmarl.data.records",
    "LearnerSpec": "popmarl.data.records",
    "LearnerState": "popmarl.data.records",
    "Episode": "popmarl.data.records",
    "EpisodeBatch": "popmarl.data.records",
    "Observations": "popmarl.data.records",
    "Opponents": "popmarl.data.records",
    "PolicySpec": "popmarl.data.records",
    "RunInfo": "popmarl.data.records",
    "TrainBudget": "popmarl.data.records",
    "TrainResult": "popmarl.data.records",
    "TrainTask": "popmarl.data.records",
    "Registries": "popmarl.plugins.registries",
    "RolloutWorker": "popmarl.engine.rollout",
    "IterativeScenario": "popmarl.scenario.base",
    "RunContext": "popmarl.scenario.base",
    "Scenario": "popmarl.scenario.base",
    "JointMetaSolver": "popmarl.interfaces.solver",
    "MetaSolver": "popmarl.interfaces.solver",
    "SolverResult": "popmarl.interfaces.solver",
    "Box": "popmarl.interfaces.spaces",
    "Discrete": "popmarl.interfaces.spaces",
    "Tracker": "popmarl.interfaces.tracker",
    "Trainer": "popmarl.interfaces.trainer",
    "TrainerState": "popmarl.interfaces.trainer",
    "JointEpisodes": "popmarl.data.trajectories",
    "SeatRows": "popmarl.data.trajectories",
}

__version__ = "0.1.0"

scenarios: Registry
algorithms: Registry
envs: Registry
solvers: Registry
backends: Registry
trackers: Registry


def __getattr__(name: str) -> Any:
    """Build the registries from the entry points, or import a re-exported name, on first use."""
    if name in KINDS:
        from importlib import metadata

        found = metadata.entry_points()  # one scan of the installed distributions for all kinds
        for kind in KINDS:
            if kind not in globals():
                globals()[kind] = Registry.from_entry_points(kind, found)
        return globals()[name]
    if name in _EXPORTS:
        from importlib import import_module

        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'popmarl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | set(KINDS))


def load_config(path: str, overrides: list[str] | tuple[str, ...] = (), *,
                registries: RegistriesLike | None = None) -> RunConfig:
    """Read and validate a YAML run config (see DESIGN §5). Component names are looked
    up in ``registries`` (a :class:`Registries`, or ``{kind: Registry}`` for the kinds
    that differ from ``popmarl.<kind>``, e.g. ``{"solvers": popmarl.solvers.with_component(...)}``)."""
    from popmarl.config.schema import load_config as _load

    return _load(path, overrides, registries=registries)


def validate(raw: Any, *, registries: RegistriesLike | None = None) -> RunConfig:
    """Validate a config given as plain data (a dict as in the YAML file); component
    names are looked up in ``registries`` as in :func:`load_config`."""
    from popmarl.config.schema import validate as _validate

    return _validate(raw, registries=registries)


def run(config: RunConfig, out: str | None = None, *, resume: str | None = None,
        registries: RegistriesLike | None = None) -> dict[str, Any]:
    """Run (or, with ``resume``, continue) a config; return the summary. Pass the
    ``registries`` the config was validated with when it names a component registered
    in this process only (``with_component``): the run builds, and a backend's workers
    rebuild, its components from them."""
    from popmarl.runs.runner import run as _run

    return _run(config, out=out, resume=resume, registries=registries)


def load_run(path: str | os.PathLike[str], iteration: int | None = None, *,
             registries: RegistriesLike | None = None) -> LoadedRun:
    """A run directory loaded to act: its env, agent mapping and populations
    (``run.population(name)``: policies and meta-strategy), and ``run.actor(seat)``, a
    player of the seat's meta-strategy on the env's own observations. ``iteration``:
    the meta-strategies of that iteration (0: the initial policies) instead of the final
    ones; ``registries`` as :func:`run` takes them."""
    from popmarl.tools.loaded_run import load_run as _load_run

    return _load_run(path, iteration, registries=registries)


__all__ = [
    "Actor", "AgentInterface", "Algorithm", "Backend", "BestResponseProblem", "BestResponseResult", "BestResponseTask", "Box", "CheckpointError", "Component",
    "ConfigError", "Discrete", "Env", "Episode", "EpisodeBatch", "EvalResult", "EvalTask", "ExactEnv", "ExplicitPolicy",
    "FrozenPolicy", "IterativeScenario", "JointMetaSolver", "JointOpponents", "LearnerInit", "LearnerSpec", "LearnerState", "LoadedRun", "MetaSolver", "Observations", "Opponents", "PluginError", "Policy", "PolicySpace", "PolicySpec",
    "Population", "PopmarlError", "Registries", "Registry", "ResumeError", "RolloutWorker", "RunContext", "RunInfo", "Scenario",
    "SolverError", "SolverResult", "Step", "Tracker", "TrainBudget", "TrainResult", "TrainTask", "Trainer", "TrainerState",
    "UnknownComponentError", "UserError", "VectorEnv", "algorithms", "backends", "envs", "hookimpl",
    "load_config", "load_run", "run", "scenarios", "solvers", "trackers", "validate",
]
