"""A game of the user's own, named by ``env.params.module``, is found in the directory
``popmarl run`` runs in (as ``python -m`` would), without PYTHONPATH; the directory is saved
in the run's config, so ``popmarl eval`` (and ``--resume``) find it from anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from popmarl_pettingzoo.env import PettingZooConfig

USER_GAME = (Path(__file__).parent / "user_nim.py").read_text(encoding="utf-8")
CONFIG = {
    "scenario": "psro",
    "env": {"name": "pettingzoo", "params": {"module": "blotto:Nim", "kwargs": {"tokens": 5}}},
    "algorithm": "random",
    "solver": "uniform",
    "evaluation": {"episodes_per_entry": 4, "num_envs": 2},
    "stopping": {"max_iterations": 1},
    "trackers": [],
}


def popmarl_command(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``popmarl ARGS`` in ``cwd`` as the installed console script runs it: ``-P`` keeps the
    current directory off ``sys.path`` (``python -m`` would put it there)."""
    return subprocess.run([sys.executable, "-P", "-m", "popmarl.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def test_a_module_in_the_current_directory_is_found(tmp_path: Path) -> None:
    games = tmp_path / "games"
    games.mkdir()
    (games / "blotto.py").write_text(USER_GAME, encoding="utf-8")
    (games / "cfg.yaml").write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    result = popmarl_command("run", "cfg.yaml", "--out", tmp_path / "runs" / "blotto", cwd=games)
    assert result.returncode == 0, result.stderr
    saved = yaml.safe_load((tmp_path / "runs" / "blotto" / "config.yaml").read_text(encoding="utf-8"))
    assert saved["env"]["params"]["path"] == [str(games)]
    # From another directory the saved path still finds the game.
    shown = popmarl_command("eval", "runs/blotto", "--episodes", "10", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr


def test_a_missing_module_says_where_it_was_looked_for(tmp_path: Path) -> None:
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    result = popmarl_command("run", "cfg.yaml", "--out", tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("popmarl: error: env.params.module: no module named 'blotto'")
    assert f"env.params.path [{str(tmp_path)!r}]" in result.stderr, result.stderr
    assert "the directory popmarl runs in" in result.stderr, result.stderr


def test_the_path_a_config_resolves_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine.py").write_text(USER_GAME, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    here = [str(tmp_path.resolve())]
    assert PettingZooConfig(module="mine:Nim").path == here  # unset: the current directory
    assert PettingZooConfig(module="mine:Nim", path=None).path == here  # null, as the plugin's README shows it
    assert PettingZooConfig(module="nowhere_to_be_found").path == here  # its error names where it looked
    assert PettingZooConfig(module="pettingzoo.classic.rps_v2").path is None  # installed: nothing to save
    assert PettingZooConfig(module="mine:Nim", path=["games", "/opt/x"]).path == [str(tmp_path / "games"), "/opt/x"]
