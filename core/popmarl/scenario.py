"""The Scenario interface: a control loop that emits tasks through a Backend."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import attrs

from popmarl.algorithm import Algorithm, PolicySpace
from popmarl.backend import Backend
from popmarl.component import Component
from popmarl.config import RunConfig
from popmarl.env import Env
from popmarl.plugins import Hooks
from popmarl.population import AgentMapping
from popmarl.records import RunInfo
from popmarl.rundir import RunDirectory
from popmarl.solver import MetaSolver


@attrs.frozen(kw_only=True)
class RunContext:
    """What a scenario works with: the built components, the run directory, the hooks."""

    config: RunConfig
    info: RunInfo
    run_dir: RunDirectory
    hooks: Hooks
    env: Env
    algorithm: Algorithm
    solver: MetaSolver
    backend: Backend
    mapping: AgentMapping
    spaces: Mapping[str, PolicySpace]
    resume: bool = False


class Scenario(Component):
    """A control loop (PSRO, MARL, league...). It holds no execution details."""

    @abstractmethod
    def run(self, context: RunContext) -> dict[str, Any]:
        """Run (or resume) to a stopping condition; return the summary, which the caller
        writes to ``summary.json``. Checkpoint after each iteration."""
