"""Every code block of README.md and of the pages under docs/ runs as shown, each on its
own, from a directory laid out like the repository root (``examples/``), with ``.venv/bin``
on the PATH as ``source .venv/bin/activate`` puts it: a Python block in a fresh
interpreter, a bash block in a fresh ``bash -e -o pipefail``. So a block imports what it
uses and makes what it reads. YAML blocks are configs (tests/plugins/mlflow and ray run
them); a block that needs a GPU, a cluster, the network or a server is marked
``<!-- not run by the tests: why -->`` on the line above it (tests/readme_configs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from readme_configs import README, ReadmeBlock, readme_blocks

BLOCKS = readme_blocks()
RUN = {"python", "bash"}
#: Languages that are not code to run: configs, an entry-point table, a config fragment
#: in prose, a command's synopsis, a diagram.
NOT_CODE = {"yaml", "toml", "text", "mermaid"}
SHOWN = [b for b in BLOCKS if b.language in RUN and b.not_run is None]
#: Runs a Python block as a script, its tracebacks naming the page and line (``docs/index.md:40``).
FRESH = "import sys; exec(compile(sys.argv[2], sys.argv[1], 'exec'), {'__name__': '__main__'})"


def _workspace(tmp_path: Path) -> dict[str, str]:
    """``tmp_path`` laid out as the repository root; the environment a reader's shell has."""
    (tmp_path / "examples").symlink_to(README.parent / "examples", target_is_directory=True)
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def test_every_code_block_is_run_or_marked_with_a_reason() -> None:
    unknown = [f"{b.where} ({b.language or 'no language'})" for b in BLOCKS if b.language not in RUN | NOT_CODE]
    assert unknown == [], "blocks of a language no test runs: give each a language"
    assert any(b.language == "python" for b in SHOWN) and any(b.language == "bash" for b in SHOWN)
    assert all(b.not_run.strip() for b in BLOCKS if b.not_run is not None)


@pytest.mark.parametrize("block", SHOWN, ids=[f"{b.where}-{b.language}" for b in SHOWN])
def test_a_block_runs_alone_as_shown(block: ReadmeBlock, tmp_path: Path) -> None:
    command = ([sys.executable, "-c", FRESH, block.where, block.code] if block.language == "python"
               else ["bash", "-e", "-o", "pipefail", "-c", block.code])
    result = subprocess.run(command, cwd=tmp_path, env=_workspace(tmp_path), capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, f"{block.where}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
