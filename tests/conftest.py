"""Fixtures shared by every test directory: the real CLI in a subprocess, and run configs.

Generic on purpose (core, plugins and contrib tests all use them); anything specific to
one part of the project lives in that directory's own conftest.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

# A shell without job control starts a background job (`bash .ci/run &`, nohup) with Ctrl-C
# ignored, and every process it starts inherits that: Python then installs no Ctrl-C
# handler, and the tests that press Ctrl-C on a run (and the runs they start) would see
# nothing happen and wait forever. Tests behave as in a terminal whatever started them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: A small, fast run: rock-paper-scissors, double oracle with a uniform meta-solver.
BASE_CONFIG: dict[str, Any] = {
    "env": {"name": "matrix", "params": {"game": "rps"}},
    "algorithm": {"name": "exact_matrix_br"},
    "solver": {"name": "uniform"},
    "stopping": {"max_iterations": 3},
    "trackers": [],
}


@attrs.frozen
class CliResult:
    """What a finished ``popmarl`` subprocess left behind."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:  # shown by pytest when an assertion about it fails
        return f"popmarl {' '.join(self.args)} -> {self.returncode}\n--stdout--\n{self.stdout}\n--stderr--\n{self.stderr}"


@attrs.frozen
class Cli:
    """The real ``popmarl`` command line, run with this interpreter (so in this environment)."""

    def command(self, args: Sequence[str | os.PathLike[str]]) -> list[str]:
        return [sys.executable, "-m", "popmarl.cli", *map(str, args)]

    def env(self, extra: Mapping[str, str] | None = None, pythonpath: Sequence[Path] = ()) -> dict[str, str]:
        """Our environment plus ``extra``, with ``pythonpath`` prepended to PYTHONPATH."""
        env = {**os.environ, **(extra or {})}
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), *filter(None, [env.get("PYTHONPATH")])])
        return env

    def run(self, *args: str | os.PathLike[str], cwd: Path, env: Mapping[str, str] | None = None,
            pythonpath: Sequence[Path] = (), timeout: float = 900) -> CliResult:
        """Run ``popmarl ARGS`` in ``cwd`` to the end (``timeout``: a hang guard, far above
        what any test's run takes on a loaded machine)."""
        proc = subprocess.run(self.command(args), cwd=cwd, env=self.env(env, pythonpath), capture_output=True,
                              text=True, timeout=timeout)
        return CliResult(tuple(map(str, args)), proc.returncode, proc.stdout, proc.stderr)

    def popen(self, *args: str | os.PathLike[str], cwd: Path,
              env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
        """Start ``popmarl ARGS`` in its own session (so a test may kill it); stdout discarded."""
        return subprocess.Popen(self.command(args), cwd=cwd, env=self.env(env), text=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in recursively (a ``None`` override deletes a key)."""
    result = dict(base)
    for key, value in overrides.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merge(result[key], value)
        else:
            result[key] = value
    return result


def write_config_in(directory: Path, name: str = "config.yaml", **overrides: Any) -> Path:
    """Write :data:`BASE_CONFIG` merged with ``overrides`` (nested mappings merge; ``None``
    removes a key) to ``directory/name``."""
    path = Path(directory) / name
    path.write_text(yaml.safe_dump(merge(BASE_CONFIG, overrides), sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def cli() -> Cli:
    """The command line, for fixtures wider than one test (see ``run_cli`` otherwise)."""
    return Cli()


@pytest.fixture(scope="session")
def config_writer() -> Callable[..., Path]:
    """``write_config_in(directory, name="config.yaml", **overrides)``, for wide fixtures."""
    return write_config_in


@pytest.fixture
def run_cli(cli: Cli, tmp_path: Path) -> Callable[..., CliResult]:
    """``run_cli(*args, cwd=tmp_path, env=None, pythonpath=(), timeout=900)`` runs the real
    ``popmarl`` command line in a subprocess and returns its :class:`CliResult`."""

    def run(*args: str | os.PathLike[str], cwd: Path | None = None, **kwargs: Any) -> CliResult:
        return cli.run(*args, cwd=cwd or tmp_path, **kwargs)

    return run


@pytest.fixture
def popen_cli(cli: Cli, tmp_path: Path) -> Callable[..., subprocess.Popen[str]]:
    """``popen_cli(*args, cwd=tmp_path, env=None)``: see :meth:`Cli.popen`."""

    def start(*args: str | os.PathLike[str], cwd: Path | None = None, **kwargs: Any) -> subprocess.Popen[str]:
        return cli.popen(*args, cwd=cwd or tmp_path, **kwargs)

    return start


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    """``write_config(name="config.yaml", **overrides)``: :func:`write_config_in` ``tmp_path``."""

    def write(name: str = "config.yaml", **overrides: Any) -> Path:
        return write_config_in(tmp_path, name, **overrides)

    return write
