"""The Backend interface: where the tasks a scenario emits are executed."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from popmarl.interfaces.algorithm import Algorithm, PolicySpace
from popmarl.interfaces.component import Component
from popmarl.interfaces.env import Env
from popmarl.data.population import AgentMapping
from popmarl.data.policies import Weights
from popmarl.data.tasks import (
    BestResponseResult,
    BestResponseTask,
    EvalResult,
    EvalTask,
    TrainResult,
    TrainTask,
)


@attrs.frozen(kw_only=True)
class RunSetup:
    """Everything a backend needs to rebuild the run's components in another process:
    component names and params, not live objects (``algorithms``: each population's
    ``(name, params)``), except ``local_components``: the env
    or algorithm registered in this process only (``with_component``), which another
    process cannot find by name, by value (``{(kind, name): class}``)."""

    env_name: str
    env_params: Mapping[str, object]
    algorithms: Mapping[str, tuple[str, Mapping[str, object]]]
    mapping: AgentMapping
    spaces: Mapping[str, PolicySpace]
    seed: int
    num_envs: int = 64
    train_num_envs: int = 64
    exact_evaluation: str = "auto"
    local_components: Mapping[tuple[str, str], Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Components:
    """The live env and each population's algorithm of a run."""

    env: Env
    algorithms: Mapping[str, Algorithm]


class Backend(Component):
    """Executes train, evaluate and best-response tasks, for every scenario alike. ``local`` runs them
    in-process; others may run them on workers. Policies are addressed by id; their
    weights are pushed with :meth:`add_policy` once, when frozen. Learners are addressed
    by key and persist between train tasks wherever the backend holds them."""

    #: Whether one :meth:`train` call runs its tasks at the same time (spread over workers),
    #: so that a caller with a time limit may give each task all of it. False: they run one
    #: after another, and such a caller calls :meth:`train` per task, sharing the time among
    #: them (``popmarl exploit`` does).
    trains_in_parallel: ClassVar[bool] = False

    @abstractmethod
    def start(self, setup: RunSetup, components: Components) -> None:
        """Prepare workers for a run (called once per run, before any task)."""

    @abstractmethod
    def add_policy(self, policy_id: str, weights: Weights) -> None:
        """Make a frozen policy available to every worker."""

    @abstractmethod
    def train(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        """Run each task (they are independent: e.g. one per population in a PSRO
        iteration); results in task order."""

    @abstractmethod
    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        """Each task's entry: every seat's mean return and win / draw / loss, its seats'
        policies fixed or drawn per episode from mixtures (exactly where the env allows);
        results in task order."""

    @abstractmethod
    def best_respond(self, tasks: Sequence[BestResponseTask]) -> list[BestResponseResult]:
        """Each task's exact best response, computed by its population's algorithm with
        no learner (independent tasks, e.g. one per population); results in task order."""

    def close(self) -> None:
        """Release workers."""
