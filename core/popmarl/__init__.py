"""popmarl: population-based multi-agent reinforcement learning.

Re-exports the interfaces, :data:`hookimpl`, the registries (``popmarl.solvers``,
``popmarl.algorithms``, ...), :func:`load_config`, :func:`run`, :func:`load_run` and the
error classes.
Importing popmarl imports no heavy library; registries load components only on demand.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from popmarl.registry import KINDS, Registry

if TYPE_CHECKING:
    from popmarl.actor import Actor
    from popmarl.agent import AgentInterface
    from popmarl.algorithm import Algorithm, BestResponseProblem, PolicySpace
    from popmarl.backend import Backend
    from popmarl.component import Component
    from popmarl.config import RunConfig
    from popmarl.env import Env, ExactEnv, Step, VectorEnv
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
    from popmarl.hookspec import hookimpl
    from popmarl.loaded import LoadedRun, Population
    from popmarl.policy import ExplicitPolicy, Policy
    from popmarl.records import (
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
    from popmarl.registries import Registries, RegistriesLike
    from popmarl.rollout import RolloutWorker
    from popmarl.scenario import IterativeScenario, RunContext, Scenario
    from popmarl.solver import JointMetaSolver, MetaSolver, SolverResult
    from popmarl.spaces import Box, Discrete
    from popmarl.tracker import Tracker
    from popmarl.trainer import Trainer, TrainerState

#: Where each re-exported name lives; imported on first access, so that ``import popmarl``
#: (and listing the registries) loads neither numpy nor any component module.
_EXPORTS: dict[str, str] = {
    "Actor": "popmarl.actor",
    "AgentInterface": "popmarl.agent",
    "Algorithm": "popmarl.algorithm",
    "BestResponseProblem": "popmarl.algorithm",
    "PolicySpace": "popmarl.algorithm",
    "TrainerContext": "popmarl.algorithm",
    "Backend": "popmarl.backend",
    "Component": "popmarl.component",
    "Env": "popmarl.env",
    "ExactEnv": "popmarl.env",
    "Step": "popmarl.env",
    "VectorEnv": "popmarl.env",
    "CheckpointError": "popmarl.errors",
    "ConfigError": "popmarl.errors",
    "PluginError": "popmarl.errors",
    "PopmarlError": "popmarl.errors",
    "ResumeError": "popmarl.errors",
    "SolverError": "popmarl.errors",
    "UnknownComponentError": "popmarl.errors",
    "UserError": "popmarl.errors",
    "hookimpl": "popmarl.hookspec",
    "LoadedRun": "popmarl.loaded",
    "Population": "popmarl.loaded",
    "ExplicitPolicy": "popmarl.policy",
    "Policy": "popmarl.policy",
    "BestResponseResult": "popmarl.records",
    "BestResponseTask": "popmarl.records",
    "EvalResult": "popmarl.records",
    "EvalTask": "popmarl.records",
    "FrozenPolicy": "popmarl.records",
    "JointOpponents": "popmarl.records",
    "LearnerInit": "popmarl.records",
    "LearnerSpec": "popmarl.records",
    "LearnerState": "popmarl.records",
    "Episode": "popmarl.records",
    "EpisodeBatch": "popmarl.records",
    "Observations": "popmarl.records",
    "Opponents": "popmarl.records",
    "PolicySpec": "popmarl.records",
    "RunInfo": "popmarl.records",
    "TrainBudget": "popmarl.records",
    "TrainResult": "popmarl.records",
    "TrainTask": "popmarl.records",
    "Registries": "popmarl.registries",
    "RolloutWorker": "popmarl.rollout",
    "IterativeScenario": "popmarl.scenario",
    "RunContext": "popmarl.scenario",
    "Scenario": "popmarl.scenario",
    "JointMetaSolver": "popmarl.solver",
    "MetaSolver": "popmarl.solver",
    "SolverResult": "popmarl.solver",
    "Box": "popmarl.spaces",
    "Discrete": "popmarl.spaces",
    "Tracker": "popmarl.tracker",
    "Trainer": "popmarl.trainer",
    "TrainerState": "popmarl.trainer",
    "JointEpisodes": "popmarl.trajectories",
    "SeatRows": "popmarl.trajectories",
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
    from popmarl.config import load_config as _load

    return _load(path, overrides, registries=registries)


def validate(raw: Any, *, registries: RegistriesLike | None = None) -> RunConfig:
    """Validate a config given as plain data (a dict as in the YAML file); component
    names are looked up in ``registries`` as in :func:`load_config`."""
    from popmarl.config import validate as _validate

    return _validate(raw, registries=registries)


def run(config: RunConfig, out: str | None = None, *, resume: str | None = None,
        registries: RegistriesLike | None = None) -> dict[str, Any]:
    """Run (or, with ``resume``, continue) a config; return the summary. Pass the
    ``registries`` the config was validated with when it names a component registered
    in this process only (``with_component``): the run builds, and a backend's workers
    rebuild, its components from them."""
    from popmarl.runner import run as _run

    return _run(config, out=out, resume=resume, registries=registries)


def load_run(path: str | os.PathLike[str], iteration: int | None = None, *,
             registries: RegistriesLike | None = None) -> LoadedRun:
    """A run directory loaded to act: its env, agent mapping and populations
    (``run.population(name)``: policies and meta-strategy), and ``run.actor(seat)``, a
    player of the seat's meta-strategy on the env's own observations. ``iteration``:
    the meta-strategies of that iteration (0: the initial policies) instead of the final
    ones; ``registries`` as :func:`run` takes them."""
    from popmarl.loaded import load_run as _load_run

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
