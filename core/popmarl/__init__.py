"""popmarl: population-based multi-agent reinforcement learning.

For users: :func:`load_config`, :func:`validate`, :func:`run`, :func:`load_run` and the
component registries (``popmarl.solvers``, ``popmarl.algorithms``, ...). Every name of the
plugin API (:mod:`popmarl.api`: ``popmarl.Policy``, ``popmarl.TrainTask``...) is reachable
here as well, loaded on first use.
Importing popmarl imports no heavy library (nor numpy); registries load components only on demand.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from popmarl.plugins.registry import KINDS, Registry

if TYPE_CHECKING:
    from popmarl.api import *  # noqa: F403 (the plugin API, re-exported lazily below)
    from popmarl.api.engine import RolloutWorker as RolloutWorker
    from popmarl.config.schema import RunConfig
    from popmarl.plugins.registry import RegistriesLike
    from popmarl.tools.actor import Actor as Actor
    from popmarl.tools.loaded_run import LoadedRun as LoadedRun
    from popmarl.tools.loaded_run import Population as Population
    from popmarl.tools.run_status import RunStatus as RunStatus

#: The names this package adds to the plugin API's, and where each lives; imported on first
#: access, so that ``import popmarl`` (and listing the registries) loads neither numpy nor
#: any component module.
_OWN: dict[str, str] = {
    "Actor": "popmarl.tools.actor",
    "LoadedRun": "popmarl.tools.loaded_run",
    "Population": "popmarl.tools.loaded_run",
    "RolloutWorker": "popmarl.api.engine",
    "RunStatus": "popmarl.tools.run_status",
}
_FUNCTIONS = ("load_config", "validate", "run", "load_run")

__version__ = "0.1.0"

scenarios: Registry
algorithms: Registry
envs: Registry
solvers: Registry
backends: Registry
trackers: Registry
ratings: Registry
models: Registry


def _api_names() -> list[str]:
    from importlib import import_module

    api = import_module("popmarl.api")
    return [name for name in vars(api) if not name.startswith("_") and name not in ("engine", "version")]


def __getattr__(name: str) -> Any:
    """Build the registries from the entry points, or import a re-exported name, on first use."""
    if name in KINDS:
        from importlib import metadata

        found = metadata.entry_points()  # one scan of the installed distributions for all kinds
        for kind in KINDS:
            if kind not in globals():
                globals()[kind] = Registry.from_entry_points(kind, found)
        return globals()[name]
    if name == "__all__":
        return sorted({*_OWN, *_FUNCTIONS, *KINDS, "Registry", *_api_names()})
    from importlib import import_module

    if name in _OWN:
        value = getattr(import_module(_OWN[name]), name)
    elif not name.startswith("_") and name in _api_names():
        value = getattr(import_module("popmarl.api"), name)
    else:
        raise AttributeError(f"module 'popmarl' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_OWN) | set(KINDS) | set(_api_names()))


def load_config(path: str, overrides: list[str] | tuple[str, ...] = (), *,
                registries: RegistriesLike | None = None) -> RunConfig:
    """Read and validate a YAML run config. Component names are looked
    up in ``registries`` (a :class:`Registries`, or ``{kind: Registry}`` for the kinds
    that differ from ``popmarl.<kind>``, e.g. ``{"solvers": popmarl.solvers.with_component(...)}``)."""
    from popmarl.config.loading import load_config as _load

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
    player of the seat's meta-strategy on the env's own observations. A run that is going
    or was killed loads from its last committed checkpoint; ``run.status``
    (:class:`RunStatus`) says which, and at which iteration. ``iteration``: the
    meta-strategies of that iteration (0: the initial policies) instead of the final
    ones; ``registries`` as :func:`run` takes them."""
    from popmarl.tools.loaded_run import load_run as _load_run

    return _load_run(path, iteration, registries=registries)
