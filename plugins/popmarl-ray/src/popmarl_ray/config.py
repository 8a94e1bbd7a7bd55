"""The ``ray`` backend's parameters (``backend: {name: ray, params: {...}}``)."""

from __future__ import annotations

import re
from typing import Any

import attrs

from popmarl.api import at_least_one, non_negative, optional, positive

_HOST_PORT = re.compile(r"^(ray://)?\[?[A-Za-z0-9_.:-]+?\]?(:\d{1,5})?$")


def _address(_instance: Any, _attribute: Any, value: str | None) -> None:
    if value is None or value in ("auto", "local") or _HOST_PORT.fullmatch(value):
        return
    raise ValueError(f"must be null (a local Ray), 'auto', 'ray://HOST:PORT' or 'HOST:PORT', got {value!r}")


@attrs.frozen(kw_only=True)
class RayConfig:
    """Where Ray runs and how the run's actors are laid out on it.

    ``address``: ``null`` starts a local Ray (no dashboard, ``num_cpus`` CPUs; all when
    null) for the run, ``auto`` / ``HOST:PORT`` / ``ray://HOST:PORT`` connect to a running
    cluster. An already initialised Ray (a notebook, a test session) is reused either way.
    ``num_rollout_workers`` actors, each stepping ``num_envs_per_worker`` games (null: the
    run's ``evaluation.num_envs`` / ``training.num_envs``), play the rollouts and fill the
    payoff table. ``num_learners`` learner actors (null: one per population) train (or
    run the exact oracle); learners are placed on them per key, the least busy first, so
    several learners of one population (a league's roles) train at the same time when
    there are actors for them. Each has
    ``num_cpus_per_learner`` CPUs and ``num_gpus_per_learner`` GPUs reserved: Ray
    makes the GPUs it assigns the only ones the actor sees (``CUDA_VISIBLE_DEVICES``), so
    a torch algorithm with ``device: auto`` (popmarl-tianshou's default) trains on its
    GPU there, while rollout workers act on the CPU. With ``device: cpu`` the reserved
    GPU stays idle (the run warns).
    Learners train asynchronously: episodes played with weights more than
    ``max_staleness`` versions older than the learner's newest are dropped (for an
    on-policy algorithm, ppo or a2c, every episode not of its newest version). A task whose
    actor dies, or that is late, is retried on a replacement at most ``max_task_retries``
    times: an actor busy for ``task_timeout_s`` without finishing a call (a learner:
    without publishing new weights) is taken for hung, killed and replaced (null: no
    deadline). A dead parameter or episode server is replaced too. Payoff
    evaluation is cut into about ``chunks_per_worker`` batches of entries per worker.
    """

    address: str | None = attrs.field(default=None, validator=_address)
    num_cpus: int | None = attrs.field(default=None, validator=optional(at_least_one))
    num_rollout_workers: int = attrs.field(default=2, validator=at_least_one)
    num_envs_per_worker: int | None = attrs.field(default=None, validator=optional(at_least_one))
    num_cpus_per_worker: float = attrs.field(default=1.0, validator=non_negative)
    num_learners: int | None = attrs.field(default=None, validator=optional(at_least_one))
    num_cpus_per_learner: float = attrs.field(default=0.0, validator=non_negative)
    num_gpus_per_learner: float = attrs.field(default=0.0, validator=non_negative)
    max_staleness: int = attrs.field(default=2, validator=non_negative)
    max_task_retries: int = attrs.field(default=3, validator=non_negative)
    task_timeout_s: float | None = attrs.field(default=3600.0, validator=optional(positive))
    chunks_per_worker: int = attrs.field(default=4, validator=at_least_one)
    connect_timeout_s: float = attrs.field(default=10.0, validator=positive)
    start_timeout_s: float = attrs.field(default=300.0, validator=positive)

    @property
    def local(self) -> bool:
        """Whether the run starts its own Ray on this machine (when none is running)."""
        return self.address in (None, "local")
