"""Backend ``ray``: the run's rollout workers, learners, episode server and parameter
server as Ray actors, created once per run and reused by every iteration.

Frozen policies are put in the object store once and pushed to every actor (again to
an actor that replaces a dead one). Evaluation is split over the workers in batches.
Training: ``num_learners`` learner actors (one per population by default) hold the
learners placed on them by key (:mod:`popmarl_ray.placement`); every task's learners are
fed asynchronously by the workers (:mod:`popmarl_ray.feed`), and a replaced learner
actor's learners are rebuilt from their last state.
Exact best responses (``best_respond``) are spread over the rollout workers, one task
per call; a train task whose learner's algorithm does not learn runs in its learner actor,
which plays no games (the driver waits on no episode stream).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from functools import cache
from typing import Any

import attrs
import ray
from ray.exceptions import GetTimeoutError, RayError

from popmarl.api import (Backend, BestResponseResult, BestResponseTask, Components, EvalResult, EvalTask, RunSetup,
                         TrainResult, TrainTask, Weights)
from popmarl_ray import cluster, spreading
from popmarl_ray.actors import LearnerActor, LocalComponents, RolloutWorkerActor
from popmarl_ray.config import RayConfig
from popmarl_ray.faults import (
    ActorGroup,
    RayBackendError,
    Servers,
    first_line,
    plugin_errors,
    raise_if_plugin_error,
)
from popmarl_ray.placement import Placement
from popmarl_ray.servers import EpisodeServerActor, ParameterServerActor
from popmarl_ray.training import Training


def unused_gpus(config: RayConfig, setup: RunSetup) -> str | None:
    """A warning when learner actors reserve GPUs (``num_gpus_per_learner``) that an
    algorithm configured with ``device: cpu`` will leave idle; None otherwise. (With
    ``device: auto`` a learner actor trains on the GPU Ray assigned it.)"""
    if not config.num_gpus_per_learner:
        return None
    on_cpu = sorted(p for p, (_, params) in setup.algorithms.items() if dict(params or {}).get("device") == "cpu")
    if not on_cpu:
        return None
    return (f"ray backend: num_gpus_per_learner reserves {config.num_gpus_per_learner:g} GPU per learner, but the "
            f"algorithm of {', '.join(on_cpu)} has device: cpu and leaves it idle; use device: auto (or cuda) to "
            "train on it, or num_gpus_per_learner: 0")


@cache
def remote(cls: type) -> Any:
    """The Ray actor class of ``cls`` (made once per process)."""
    return ray.remote(cls)


class RayBackend(Backend):
    """Runs a scenario's tasks on Ray actors; see :class:`~popmarl_ray.config.RayConfig`."""

    Config = RayConfig
    config: RayConfig
    trains_in_parallel = True  # a call's train tasks run at once, their learners on the learner actors

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._started_ray = False
        self.servers: Servers | None = None
        self.populations: tuple[str, ...] = ()
        self.slots: tuple[str, ...] = ()  # the learner actors' names
        self.workers: ActorGroup | None = None
        self.learners: ActorGroup | None = None
        self._policies: dict[str, ray.ObjectRef] = {}
        self._replaced = 0
        self.placement = Placement(())
        self._serials = itertools.count()
        self._answering: frozenset[str] = frozenset()
        self._on_policy: frozenset[str] = frozenset()

    # -- lifecycle ------------------------------------------------------------------
    # Each public call that runs components in actors ends at a component's own error
    # (``plugin_errors``): a plugin's bug is not retried, it ends the run with its traceback.
    @plugin_errors()
    def start(self, setup: RunSetup, components: Components) -> None:
        self._answering = frozenset(p for p, algorithm in components.algorithms.items() if not algorithm.learns)
        self._on_policy = frozenset(p for p, algorithm in components.algorithms.items() if algorithm.on_policy)
        self._started_ray = cluster.connect(self.config)
        try:
            self._start_actors(setup)
        except BaseException:
            self.close()
            raise

    def _start_actors(self, setup: RunSetup) -> None:
        config = self.config
        if config.num_envs_per_worker is not None:
            setup = attrs.evolve(setup, num_envs=config.num_envs_per_worker, train_num_envs=config.num_envs_per_worker)
        self.populations = tuple(setup.mapping.populations)
        self.slots = (self.populations if config.num_learners is None
                      else tuple(f"learner{k}" for k in range(config.num_learners)))
        self.placement = Placement(self.slots)
        self._check_resources()
        unused = unused_gpus(config, setup)
        if unused:
            warnings.warn(unused, stacklevel=2)
        local = local_components(setup)
        servers = self.servers = Servers(
            make={"params": lambda: remote(ParameterServerActor).options(num_cpus=0).remote(),
                  "data": lambda: remote(EpisodeServerActor).options(num_cpus=0).remote()},
            on_replace=self._use_servers)

        def worker(slot: int) -> Any:
            options = remote(RolloutWorkerActor).options(num_cpus=config.num_cpus_per_worker)
            return options.remote(setup, local, config.num_cpus_per_worker, servers.params, servers.data)

        def learner(slot: int) -> Any:
            options = remote(LearnerActor).options(num_cpus=config.num_cpus_per_learner,
                                                   num_gpus=config.num_gpus_per_learner)
            return options.remote(setup, local, config.num_cpus_per_learner, servers.params, servers.data,
                                  config.max_staleness)

        self.workers = ActorGroup(what="rollout worker", size=config.num_rollout_workers, make=worker,
                                  restore=self._restore, start_timeout_s=config.start_timeout_s)
        self.learners = ActorGroup(what="learner", size=len(self.slots), make=learner, restore=self._restore,
                                   start_timeout_s=config.start_timeout_s)
        refs = [*servers.ready_refs(), *self.workers.ready_refs(), *self.learners.ready_refs()]
        try:
            ray.get(refs, timeout=config.start_timeout_s)
        except GetTimeoutError:
            raise RayBackendError(
                f"ray backend: the actors did not start within {config.start_timeout_s:.0f} s; the cluster lacks "
                f"free resources for {self._needs()}"
            ) from None
        except RayError as exc:
            raise_if_plugin_error(exc)
            raise RayBackendError(f"ray backend: an actor failed to start: {first_line(exc)}", detail=str(exc)) from None

    def _needs(self) -> str:
        c = self.config
        text = (f"{c.num_rollout_workers} workers x {c.num_cpus_per_worker:g} CPU + "
                f"{len(self.slots)} learners x {c.num_cpus_per_learner:g} CPU")
        return text + (f", {c.num_gpus_per_learner:g} GPU each" if c.num_gpus_per_learner else "")

    def _check_resources(self) -> None:
        c = self.config
        cpus = c.num_rollout_workers * c.num_cpus_per_worker + len(self.slots) * c.num_cpus_per_learner
        gpus = len(self.slots) * c.num_gpus_per_learner
        total = ray.cluster_resources()
        hints = []
        if cpus > total.get("CPU", 0.0) + 1e-9:
            hints.append("lower num_rollout_workers, num_cpus_per_worker or num_cpus_per_learner")
        if gpus > total.get("GPU", 0.0) + 1e-9:
            hints.append("lower num_gpus_per_learner (a fraction shares a GPU: 0.5 puts two learners on one)")
        if not hints:
            return
        message = (f"ray backend: the run needs {cpus:g} CPUs and {gpus:g} GPUs ({self._needs()}); the Ray cluster has "
                   f"{total.get('CPU', 0.0):g} CPUs and {total.get('GPU', 0.0):g} GPUs; {'; '.join(hints)}")
        if c.local:
            raise RayBackendError(message)
        warnings.warn(message + " (waiting for the cluster to scale up)", stacklevel=2)

    def _restore(self, handle: Any) -> None:
        """Give a fresh actor every frozen policy, in one call."""
        if self._policies:
            handle.add_policies.remote(list(self._policies), *self._policies.values())

    def _use_servers(self, params: Any, data: Any) -> None:
        """Hand replacement servers to every worker and learner (before their next call)."""
        for group in (self.workers, self.learners):
            for handle in group.handles if group is not None else ():
                handle.use_servers.remote(params, data)

    def close(self) -> None:
        for group in (self.workers, self.learners):
            if group is not None:
                self._replaced += group.replaced
                group.close()
        if self.servers is not None:
            self._replaced += self.servers.replaced
            self.servers.close()
        self.workers = self.learners = self.servers = None
        self._policies = {}
        cluster.disconnect(self._started_ray)
        self._started_ray = False

    # -- tasks ----------------------------------------------------------------------
    def _groups(self) -> tuple[ActorGroup, ActorGroup]:
        if self.workers is None or self.learners is None:
            raise RayBackendError("ray backend: not started (call start before any task)")
        return self.workers, self.learners

    def _servers(self) -> Servers:
        if self.servers is None:
            raise RayBackendError("ray backend: not started (call start before any task)")
        return self.servers

    def add_policy(self, policy_id: str, weights: Weights) -> None:
        workers, learners = self._groups()
        ref = ray.put(dict(weights))
        self._policies[policy_id] = ref
        for handle in (*workers.handles, *learners.handles):
            handle.add_policies.remote([policy_id], ref)

    @plugin_errors()
    def train(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        workers, learners = self._groups()
        training = Training(learners=learners, workers=workers, servers=self._servers(),
                            placement=self.placement, serials=self._serials,
                            max_retries=self.config.max_task_retries,
                            timeout_s=self.config.task_timeout_s, answering=self._answering,
                            on_policy=self._on_policy)
        return training.run(tasks)

    @plugin_errors()
    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        workers, _ = self._groups()
        return spreading.evaluate(workers, tasks, chunks_per_worker=self.config.chunks_per_worker,
                                  max_retries=self.config.max_task_retries, timeout_s=self.config.task_timeout_s)

    @plugin_errors()
    def best_respond(self, tasks: Sequence[BestResponseTask]) -> list[BestResponseResult]:
        workers, _ = self._groups()
        return spreading.best_respond(workers, tasks, max_retries=self.config.max_task_retries,
                                      timeout_s=self.config.task_timeout_s)

    # -- inspection (tests, tools) ----------------------------------------------------
    def worker_pids(self, timeout_s: float = 5.0) -> list[int]:
        """The process id of each rollout worker, by slot (-1 for a worker that died, or
        does not answer within ``timeout_s``, and has not been replaced yet: that happens
        when its next task fails or runs late)."""
        workers, _ = self._groups()
        refs = [handle.pid.remote() for handle in workers.handles]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        pids = []
        for ref in refs:
            try:
                pids.append(int(ray.get(ref)) if ref in ready else -1)
            except ray.exceptions.RayActorError:
                pids.append(-1)
        return pids

    def learner_pids(self) -> dict[str, int]:
        """The process id of each learner actor, by its name (its population's, with one
        actor per population)."""
        _, learners = self._groups()
        return dict(zip(self.slots, ray.get([h.pid.remote() for h in learners.handles])))

    def held_learners(self) -> dict[str, list[str]]:
        """The keys of the learners each learner actor holds, by its name."""
        _, learners = self._groups()
        return dict(zip(self.slots, ray.get([h.holds.remote() for h in learners.handles])))

    def server_pids(self) -> dict[str, int]:
        """The process id of the parameter server (``params``) and episode server (``data``)."""
        servers = self._servers()
        return {"params": int(ray.get(servers.params.ready.remote())), "data": int(ray.get(servers.data.ready.remote()))}

    def open_streams(self) -> tuple[int, int]:
        """How many training attempts the parameter server and the episode server hold state for."""
        servers = self._servers()
        return int(ray.get(servers.params.size.remote())), int(ray.get(servers.data.size.remote()))

    @property
    def replacements(self) -> int:
        """How many dead or hung actors (servers included) were replaced during the run (so far)."""
        live = sum(g.replaced for g in (self.workers, self.learners, self.servers) if g is not None)
        return self._replaced + live


def local_components(setup: RunSetup) -> LocalComponents:
    """The run's env and algorithm when registered in the driver only (``with_component``,
    e.g. in a notebook, passed with ``popmarl.run(..., registries=...)``): the actors get
    them by value, not by entry point."""
    return dict(setup.local_components)
