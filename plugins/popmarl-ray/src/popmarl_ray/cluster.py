"""Connecting to Ray: start a local one, join a cluster, or reuse the one already up."""

from __future__ import annotations

import logging
import socket
from urllib.parse import urlsplit

import ray

from popmarl_ray.config import RayConfig
from popmarl_ray.faults import RayConnectionError, first_line

DEFAULT_PORT = 6379
_HINT = "start one with `ray start --head`, or set backend.params.address to null for a local Ray"


def connect(config: RayConfig) -> bool:
    """Make sure Ray is initialised for ``config``; return whether this call started it
    (then :func:`disconnect` shuts it down at the end of the run)."""
    address = config.address
    if not config.local and address != "auto":
        assert address is not None
        check_reachable(address, timeout_s=config.connect_timeout_s)
    if ray.is_initialized():
        return False
    options: dict[str, object] = {"include_dashboard": False, "logging_level": logging.WARNING}
    if config.local:
        options.update(num_cpus=config.num_cpus, _node_ip_address="127.0.0.1")
    else:
        options["address"] = address
    try:
        ray.init(**options)  # type: ignore[arg-type]
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
        where = "start a local Ray" if config.local else f"connect to a Ray cluster at {address!r}"
        raise RayConnectionError(f"ray backend: cannot {where}: {first_line(exc)}; {_HINT}") from None
    return True


def disconnect(started: bool) -> None:
    """Shut Ray down if this run started it."""
    if started and ray.is_initialized():
        ray.shutdown()


def split_address(address: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST[:PORT]`` or ``ray://HOST[:PORT]``."""
    text = address if "://" in address else f"gcs://{address}"
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise RayConnectionError(f"ray backend: bad address {address!r}: {exc}") from None
    if not host:
        raise RayConnectionError(f"ray backend: bad address {address!r}: no host")
    if port is None:
        port = 10001 if address.startswith("ray://") else DEFAULT_PORT
    return host, port


def check_reachable(address: str, *, timeout_s: float) -> None:
    """Fail fast (instead of Ray's minutes of retries) when nothing listens at ``address``."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RayConnectionError(
            f"ray backend: no Ray cluster at {address!r} ({host}:{port}: {reason.lower()}); {_HINT}"
        ) from None
