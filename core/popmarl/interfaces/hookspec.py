"""Lifecycle hooks: what happens during a run. Trackers implement these.

Hook implementations are registered through :func:`popmarl.plugins.hooks.make_plugin_manager`
from the ``popmarl.plugins`` entry-point group and from the configured trackers. Every
argument is a plain, picklable record or mapping.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import pluggy

from popmarl.data.run import RunInfo

PROJECT = "popmarl"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks a function or method as a popmarl hook implementation.
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def popmarl_run_start(run: RunInfo) -> None:
    """Fires once when a run starts or resumes, before the first iteration it executes.

    :param run: the run's directory, resolved config, scenario and start iteration.
    """


@hookspec
def popmarl_iteration_end(run: RunInfo, iteration: int, metrics: Mapping[str, Any]) -> None:
    """Fires after each completed iteration, once its checkpoint is on disk.

    :param run: the run.
    :param iteration: the iteration just completed (1, 2, ...; 0 is the initial population).
    :param metrics: the iteration's metrics line, as written to ``metrics.jsonl``.
    """


@hookspec
def popmarl_policy_added(run: RunInfo, population: str, policy_id: str) -> None:
    """Fires when a new frozen policy joins a population.

    :param run: the run.
    :param population: the population's name.
    :param policy_id: the new policy's id (unique within the run).
    """


@hookspec
def popmarl_checkpoint(run: RunInfo, path: str) -> None:
    """Fires after a checkpoint has been written atomically.

    :param run: the run.
    :param path: the checkpoint directory.
    """


@hookspec
def popmarl_run_end(run: RunInfo, summary: Mapping[str, Any]) -> None:
    """Fires once when a run ends, completed, stopped or failed.

    :param run: the run.
    :param summary: the content of ``summary.json``.
    """


@hookspec
def popmarl_add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Fires once when the ``popmarl`` command line is built, so plugins add subcommands.

    :param commands: the subparsers object; add a parser with
        ``commands.add_parser(name, help=...)`` and set its handler with
        ``parser.set_defaults(handler=fn)``, where ``fn(args) -> int`` is the exit status.
        Raise :class:`popmarl.UserError` for bad input (one line, exit status 2).
    """
