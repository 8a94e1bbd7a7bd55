"""Connecting to Ray: start a local one, join a cluster, or reuse the one already up.

A cluster's address is checked before Ray is asked to join it, so that a wrong address
or token is one line naming the cause (Ray itself retries for tens of seconds, printing
a log line a second): first a TCP connection (refused, unreachable, or no answer within
``connect_timeout_s``), then one call to the cluster's GCS made the way the driver will
make it, with the same ``RAY_AUTH_MODE`` and token (Ray's token authentication: a
cluster started with it turned on accepts only drivers and nodes holding its token). That
call runs in a short-lived subprocess, so it can be abandoned after ``connect_timeout_s``
and its log lines stay off the console.

Ray's own log records while it starts or joins (such as its notice that token
authentication is on) go to ``popmarl_driver.log`` in the Ray session's log directory,
and to the ``popmarl_ray.ray`` logger, not to the console.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import ray

from popmarl_ray.config import RayConfig
from popmarl_ray.faults import RayConnectionError, first_line

DEFAULT_PORT = 6379
_HINT = "start one with `ray start --head`, or set backend.params.address to null for a local Ray"
#: Where the token of a cluster with token authentication is looked for, as Ray looks.
_TOKEN_SOURCES = "~/.ray/auth_token, the file RAY_AUTH_TOKEN_PATH names, or RAY_AUTH_TOKEN"
#: How long the GCS probe's subprocess may take to import Ray (a loaded machine), on top
#: of ``connect_timeout_s`` for the call itself.
PROBE_IMPORT_S = 60.0
#: Ray's log records while connecting (kept off the console; see the module docstring).
RAY_LOG = logging.getLogger("popmarl_ray.ray")
RAY_LOG.addHandler(logging.NullHandler())
DRIVER_LOG = "popmarl_driver.log"

# Run as ``python -c _PROBE ADDRESS MODE``: one GCS call, the outcome on stdout's last line
# ("ok", or "token"/"error" and Ray's first line); "ready" once Ray is imported.
# A Ray whose internals differ from those used here ("unknown") is left to ray.init.
_PROBE = """\
import sys
try:
    from ray._raylet import GcsClient
    from ray.exceptions import AuthenticationError
    from ray._private.authentication import authentication_token_setup as auth
except ImportError:
    print("unknown", flush=True)
    raise SystemExit(0)
print("ready", flush=True)
def line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
try:
    if sys.argv[2] == "auto":  # as ray.init(address="auto") does
        auth.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    auth.ensure_token_if_auth_enabled(None, create_token_if_missing=False)
    GcsClient(address=sys.argv[1])
except (AttributeError, TypeError):
    print("unknown", flush=True)
except AuthenticationError as exc:
    print("token", line(exc), flush=True)
except Exception as exc:
    print("error", line(exc), flush=True)
else:
    print("ok", flush=True)
"""


def connect(config: RayConfig) -> bool:
    """Make sure Ray is initialised for ``config``; return whether this call started it
    (then :func:`disconnect` shuts it down at the end of the run)."""
    address = config.address
    if not config.local and address != "auto":
        assert address is not None
        check_reachable(address, timeout_s=config.connect_timeout_s)
    if ray.is_initialized():
        return False
    if not config.local:
        assert address is not None
        check_gcs(address, timeout_s=config.connect_timeout_s)
    options: dict[str, object] = {"include_dashboard": False, "logging_level": logging.WARNING}
    if config.local:
        options.update(num_cpus=config.num_cpus, _node_ip_address="127.0.0.1")
    else:
        options["address"] = address
    with ray_logs_off_console() as records:
        try:
            context = ray.init(**options)  # type: ignore[arg-type]
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
            where = "start a local Ray" if config.local else f"connect to a Ray cluster at {address!r}"
            raise RayConnectionError(f"ray backend: cannot {where}: {first_line(exc)}; {_HINT}") from None
    _write_driver_log(context, records)
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
        if isinstance(exc, TimeoutError) or reason.lower() == "timed out":
            reason = f"no answer within {timeout_s:g} s (connect_timeout_s)"
        raise RayConnectionError(
            f"ray backend: no Ray cluster at {address!r} ({host}:{port}: {reason.lower()}); {_HINT}"
        ) from None


def auth_mode() -> str:
    """This process's ``RAY_AUTH_MODE`` (Ray's default when unset: ``disabled`` for a
    cluster given by its address)."""
    return os.environ.get("RAY_AUTH_MODE", "").strip().lower() or "disabled"


def token_source() -> str | None:
    """Where Ray finds this machine's token: the first of ``RAY_AUTH_TOKEN``,
    ``RAY_AUTH_TOKEN_PATH`` and ``~/.ray/auth_token`` that is set; None if none is."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() and default.stat().st_size else None


def token_problem(address: str, auto: bool = False) -> str:
    """The line for a cluster that refused this driver's authentication token."""
    where = f"the Ray cluster at {address!r}"
    source = token_source()
    if auth_mode() != "token" and not (auto and source):
        return (f"ray backend: {where} uses token authentication and RAY_AUTH_MODE is not 'token' here: set "
                f"RAY_AUTH_MODE=token and give this machine the head node's token ({_TOKEN_SOURCES})")
    if source is None:
        return (f"ray backend: {where} needs the head node's token and this machine has none: copy it to "
                f"{_TOKEN_SOURCES}")
    return (f"ray backend: {where} rejected this machine's authentication token (from {source}); use the head "
            f"node's token (its ~/.ray/auth_token, or `ray get-auth-token` there)")


def check_gcs(address: str, *, timeout_s: float) -> None:
    """Ask the cluster's GCS at ``address`` (``auto``: the local head Ray finds) for its
    id, with this process's token settings, in a subprocess given ``timeout_s`` after it
    has imported Ray: a refused token, no answer, or any other failure is one line. Ray
    Client addresses (``ray://``) are not GCS addresses and are left to Ray."""
    if address.startswith("ray://"):
        return
    target = address
    if address == "auto":
        try:
            found = ray._private.services.canonicalize_bootstrap_address(address)
        except Exception:  # no local cluster: ray.init says so in one line
            return
        if found is None:
            return
        target = found
    outcome, detail = _probe(target, "auto" if address == "auto" else "address", timeout_s)
    if outcome in ("ok", "unknown"):
        return
    if outcome == "token":
        raise RayConnectionError(token_problem(address, auto=address == "auto"))
    if outcome == "timeout":
        raise RayConnectionError(f"ray backend: no answer from a Ray cluster at {address!r} within {timeout_s:g} s "
                                 f"(connect_timeout_s); {_HINT}")
    raise RayConnectionError(f"ray backend: cannot connect to a Ray cluster at {address!r}: {detail}")


def _probe(address: str, mode: str, timeout_s: float) -> tuple[str, str]:
    """Run :data:`_PROBE` on ``address``: ``("ok" | "unknown" | "token" | "error" | "timeout", detail)``.
    What it logs goes to :data:`RAY_LOG`."""
    proc = subprocess.Popen([sys.executable, "-c", _PROBE, address, mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + PROBE_IMPORT_S
        assert proc.stdout is not None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", ""
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                return "timeout", ""
            line = proc.stdout.readline()
            if not line:  # the subprocess ended without a verdict
                return "error", f"the probe exited with status {proc.wait()}"
            lines.append(line.rstrip("\n"))
            if lines[-1] == "ready":
                deadline = time.monotonic() + timeout_s
            elif lines[-1] != "":
                outcome, _, detail = lines[-1].partition(" ")
                if outcome in ("ok", "unknown", "token", "error"):
                    return outcome, detail
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
        for text in err.splitlines():
            if text.strip():
                RAY_LOG.warning("probe of %s: %s", address, text)


class _Keep(logging.Handler):
    """Keeps the records it is given and passes them on to :data:`RAY_LOG`."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        RAY_LOG.handle(record)


@contextmanager
def ray_logs_off_console() -> Iterator[list[logging.LogRecord]]:
    """While in the block, the ``ray`` logger's records are kept (the list yielded) and
    passed to :data:`RAY_LOG` instead of printed."""
    logger = logging.getLogger("ray")
    handlers, propagate = list(logger.handlers), logger.propagate
    keep = _Keep()
    logger.handlers[:] = [keep]
    logger.propagate = False
    try:
        yield keep.records
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate


def _write_driver_log(context: object, records: list[logging.LogRecord]) -> None:
    """Append ``records`` to :data:`DRIVER_LOG` in the Ray session's log directory."""
    if not records:
        return
    session = getattr(context, "address_info", {}).get("session_dir") if context is not None else None
    if not session:
        return
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        logs = Path(session) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / DRIVER_LOG, "a", encoding="utf-8") as out:
            out.writelines(formatter.format(record) + "\n" for record in records)
    except OSError as exc:
        RAY_LOG.warning("cannot write %s: %s", DRIVER_LOG, exc)
