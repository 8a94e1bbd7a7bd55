"""Fixtures of the ray backend tests: one local Ray for the whole session (helpers live
in ray_helpers.py)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from ray_helpers import NUM_CPUS

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``) the Ray tests run on one worker, one after
    another, as without it: they share that worker's local Ray and its 2 CPUs."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session", autouse=True)
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A local Ray with 2 CPUs, started once; every ray-backend run in the session reuses
    it (and must leave it running). Ray's token authentication stays on; the token a
    local Ray would save in the user's home (``~/.ray/auth_token``) is one of the
    session's own, in a file ``RAY_AUTH_TOKEN_PATH`` names (as the Rays the tests' runs
    start in subprocesses find it too), unless one is set already."""
    if not os.environ.get("RAY_AUTH_TOKEN") and not os.environ.get("RAY_AUTH_TOKEN_PATH"):
        token = tmp_path_factory.mktemp("ray-auth") / "auth_token"
        token.write_text(secrets.token_hex(32))
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=NUM_CPUS, include_dashboard=False, logging_level="warning")
    yield
    if started:
        ray.shutdown()
