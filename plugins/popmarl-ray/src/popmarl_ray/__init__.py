"""popmarl-ray: the ``ray`` backend. Rollout workers, learners, the episode server and
the parameter server run as Ray actors, on one machine or a cluster."""

from __future__ import annotations

from popmarl_ray.backend import RayBackend
from popmarl_ray.config import RayConfig
from popmarl_ray.faults import RayBackendError, RayConnectionError

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)

__all__ = ["RayBackend", "RayBackendError", "RayConfig", "RayConnectionError"]
