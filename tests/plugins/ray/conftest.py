"""Fixtures of the ray backend tests: one local Ray for the whole session (helpers live
in ray_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray

from ray_helpers import NUM_CPUS


@pytest.fixture(scope="session", autouse=True)
def ray_session() -> Iterator[None]:
    """A local Ray with 2 CPUs, started once; every ray-backend run in the session reuses
    it (and must leave it running)."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=NUM_CPUS, include_dashboard=False, logging_level="warning")
    yield
    if started:
        ray.shutdown()
