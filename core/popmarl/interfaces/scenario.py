"""The Scenario interface: a control loop that emits tasks through a Backend, and the
context a run gives it."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from popmarl.interfaces.component import Component

if TYPE_CHECKING:
    # Types a run passes in, named here only: the layers that build them sit above.
    from popmarl.config.schema import RunConfig
    from popmarl.data.population import AgentMapping
    from popmarl.data.run import RunInfo
    from popmarl.interfaces.population_algorithm import PopulationAlgorithm
    from popmarl.interfaces.algorithm import PolicySpace
    from popmarl.interfaces.backend import Backend
    from popmarl.interfaces.env import Env
    from popmarl.interfaces.solver import MetaSolver
    from popmarl.plugins.hooks import Hooks
    from popmarl.runs.rundir import RunDirectory


@attrs.frozen(kw_only=True)
class RunContext:
    """What a scenario works with: the built components (``agents``: each population's
    :class:`~popmarl.interfaces.population_algorithm.PopulationAlgorithm`, i.e. its algorithm and spaces), the run
    directory, the hooks."""

    config: RunConfig
    info: RunInfo
    run_dir: RunDirectory
    hooks: Hooks
    env: Env
    populations: Mapping[str, PopulationAlgorithm]
    solver: MetaSolver
    backend: Backend
    mapping: AgentMapping
    spaces: Mapping[str, PolicySpace]
    resume: bool = False


class Scenario(Component):
    """A control loop (PSRO, MARL, league...). It holds no execution details.

    Its ``check*`` methods only check: they raise or return, and store nothing a run
    needs later (a scenario derives that when it runs)."""

    #: Whether the run continues from a checkpoint, set before the checks below: a check
    #: of what only a fresh run reads (e.g. another run's policies that ``marl`` copies at
    #: the start) is then skipped, so that a resume does not depend on it.
    resuming: bool = False

    def check(self, *, config: RunConfig, mapping: AgentMapping) -> None:
        """Raise a :class:`~popmarl.errors.ConfigError` for a config this scenario cannot
        run as written; called before the backend starts or anything is written."""

    def check_populations(self, populations: Mapping[str, PopulationAlgorithm]) -> None:
        """Raise a :class:`~popmarl.errors.ConfigError` for populations whose algorithms
        this scenario cannot use (e.g. one that does not learn where learning is the
        point); called with the built algorithms, before anything is written."""

    def check_solver(self, solver: MetaSolver, *, mapping: AgentMapping,
                     populations: Mapping[str, PopulationAlgorithm], config: RunConfig) -> None:
        """Raise a :class:`~popmarl.errors.ConfigError` for a meta-solver this scenario
        cannot use with these populations (e.g. a joint solver with a shared population);
        called before anything is written."""

    @abstractmethod
    def run(self, context: RunContext) -> dict[str, Any]:
        """Run (or resume) to a stopping condition; return the summary, which the caller
        writes to ``summary.json``. Checkpoint after each iteration."""
