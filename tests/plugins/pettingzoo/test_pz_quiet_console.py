"""A PettingZoo classic run's console carries the run's output only: PettingZoo's envs are
made through its env registry (no deprecation raised), and a warning a library does raise
goes to the run directory's ``log.txt``. Run by the real command line, with Python's
warnings displayed (``PYTHONWARNINGS=default``) as a user who turns them on sees them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: What importing a versioned PettingZoo module (the old creation API) warns.
OLD_API = "The old environment creation API"
SHOWN = {"PYTHONWARNINGS": "default"}


def _config(write_config: Callable[..., Path], module: str) -> Path:
    return write_config(env={"name": "pettingzoo", "params": {"game": None, "module": module}},
                        agents={"mapping": "per_player"}, algorithm={"name": "random"},
                        evaluation={"episodes_per_entry": 4, "num_envs": 2}, stopping={"max_iterations": 1},
                        trackers=["console"])


def _warning_lines(result: Any) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if "Warning" in line]


@pytest.mark.parametrize("module", ["pettingzoo.classic.tictactoe_v3", "pettingzoo.classic.rps_v2"])
def test_a_classic_run_raises_no_warning(run_cli, write_config, tmp_path: Path, module: str) -> None:
    result = run_cli("run", _config(write_config, module), "--out", tmp_path / "run", env=SHOWN)
    assert result.returncode == 0, result
    assert _warning_lines(result) == [], result
    assert not (tmp_path / "run" / "log.txt").exists()  # none was raised at all


def test_a_library_warning_goes_to_the_log_file(run_cli, write_config, tmp_path: Path) -> None:
    """``module:attr`` imports the versioned module as named, which warns: the warning is
    raised before the run directory exists, held, and written to its log once it does."""
    result = run_cli("run", _config(write_config, "pettingzoo.classic.tictactoe_v3:raw_env"), "--out", tmp_path / "run",
                     env=SHOWN)
    assert result.returncode == 0, result
    assert _warning_lines(result) == [], result
    log = (tmp_path / "run" / "log.txt").read_text(encoding="utf-8")
    assert f"DeprecationWarning: {OLD_API}" in log
    assert f"popmarl: 1 Python warning(s) of the run's libraries in {tmp_path / 'run' / 'log.txt'}" in result.stdout
