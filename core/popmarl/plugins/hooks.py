"""The per-process plugin manager: hookspecs, external hook plugins, trackers.

No module-global manager: each run (and each worker process) builds its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

import pluggy

from popmarl.interfaces import hookspec
from popmarl.errors import PluginError
from popmarl.data.run import RunInfo
from popmarl.plugins.registry import PluginWarning, strict_plugins

PLUGIN_GROUP = "popmarl.plugins"


class Hooks:
    """Typed forwarding to the hook relay, so core call sites are checked."""

    def __init__(self, manager: pluggy.PluginManager) -> None:
        self.manager = manager

    def run_start(self, run: RunInfo) -> None:
        self.manager.hook.popmarl_run_start(run=run)

    def iteration_end(self, run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
        self.manager.hook.popmarl_iteration_end(run=run, iteration=iteration, metrics=metrics)

    def policy_added(self, run: RunInfo, population: str, policy_id: str) -> None:
        self.manager.hook.popmarl_policy_added(run=run, population=population, policy_id=policy_id)

    def checkpoint(self, run: RunInfo, path: str) -> None:
        self.manager.hook.popmarl_checkpoint(run=run, path=path)

    def run_end(self, run: RunInfo, summary: Mapping[str, Any]) -> None:
        self.manager.hook.popmarl_run_end(run=run, summary=summary)


def make_plugin_manager(builtins: Iterable[object] = (), *, external: bool = True) -> pluggy.PluginManager:
    """A fresh manager with popmarl's hookspecs, ``builtins`` (e.g. tracker instances)
    and, when ``external``, every plugin of the ``popmarl.plugins`` entry-point group."""
    manager = pluggy.PluginManager(hookspec.PROJECT)
    manager.add_hookspecs(hookspec)
    for plugin in builtins:
        manager.register(plugin)
    if external:
        for ep in metadata.entry_points(group=PLUGIN_GROUP):
            if manager.get_plugin(ep.name) is not None:
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                dist = ep.dist.name if ep.dist else "?"
                message = f"hook plugin {ep.name!r} of {dist} failed to import: {type(exc).__name__}: {exc}"
                if strict_plugins():
                    raise PluginError(message) from exc
                warnings.warn(message, PluginWarning, stacklevel=2)
                continue
            manager.register(plugin, name=ep.name)
    manager.check_pending()
    return manager
