"""Every code block the README shows runs as shown, from a directory laid out like the
repository root (``examples/``), with ``.venv/bin`` on the PATH as ``source
.venv/bin/activate`` puts it: the Python blocks in order in one interpreter, as a notebook
would run them, twice (a second run must work too); each bash block with ``set -e``.
YAML blocks are configs (tests/plugins/mlflow and ray run them); a block that needs a
GPU, a cluster, the network or a server is marked ``<!-- not run by the tests: why -->``
on the line above it (tests/readme_configs.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from readme_configs import README, ReadmeBlock, readme_blocks

BLOCKS = readme_blocks()
RUN = {"python", "bash"}
#: Languages that are not code to run: the configs, an entry-point table, a config fragment in prose.
NOT_CODE = {"yaml", "toml", "text"}
PYTHON = [b for b in BLOCKS if b.language == "python" and b.not_run is None]
BASH = [b for b in BLOCKS if b.language == "bash" and b.not_run is None]
#: Runs each block (``README.md:LINE`` in tracebacks) in one namespace.
NOTEBOOK = """\
import json, sys
namespace = {"__name__": "__main__"}
for line, code in json.load(sys.stdin):
    exec(compile(code, f"README.md:{line}", "exec"), namespace)
"""


def _workspace(tmp_path: Path) -> dict[str, str]:
    """``tmp_path`` laid out as the repository root; the environment a reader's shell has."""
    (tmp_path / "examples").symlink_to(README.parent / "examples", target_is_directory=True)
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def test_every_code_block_is_run_or_marked_with_a_reason() -> None:
    assert {b.language for b in BLOCKS} <= RUN | NOT_CODE, "a README block of a language no test runs"
    assert PYTHON and BASH
    assert all(b.not_run.strip() for b in BLOCKS if b.not_run is not None)


def test_the_python_blocks_run_as_shown_and_again(tmp_path: Path) -> None:
    env = _workspace(tmp_path)
    for attempt in ("first", "second"):
        result = subprocess.run([sys.executable, "-c", NOTEBOOK], input=json.dumps([[b.line, b.code] for b in PYTHON]),
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, f"{attempt} run:\n{result.stderr}"


@pytest.mark.parametrize("block", BASH, ids=[f"README.md:{b.line}" for b in BASH])
def test_a_bash_block_runs_as_shown(block: ReadmeBlock, tmp_path: Path) -> None:
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=tmp_path, env=_workspace(tmp_path),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"README.md:{block.line}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
