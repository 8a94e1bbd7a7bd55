"""The core's import contract (``[tool.importlinter]`` in pyproject.toml) holds, and catches a break.

``lint-imports`` runs on the real tree and must keep every contract; then on a copy of the
core with two planted upward imports (one at module level, one inside a function, which a
lazy import cannot hide either), put first on the path, where it must fail naming the
layers contract and both imports. import-linter is a dependency of the plugins env (tox.ini).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "pyproject.toml"
LAYERS = "the core's layers import only the layers below them"


def _lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("lint-imports")
    assert script.exists(), "lint-imports is not installed beside this interpreter (tox.ini's [plugins] deps has it)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(pythonpath) if pythonpath else "", os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([str(script), "--config", str(CONFIG), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_core_keeps_its_import_contracts(tmp_path: Path) -> None:
    result = _lint_imports(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{LAYERS} KEPT" in result.stdout
    assert "0 broken" in result.stdout


def test_a_planted_upward_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    copy = tmp_path / "site" / "popmarl"
    shutil.copytree(REPO / "core" / "popmarl", copy, ignore=shutil.ignore_patterns("__pycache__"))
    seeds = copy / "data" / "seeds.py"
    seeds.write_text(seeds.read_text(encoding="utf-8") + "\nimport popmarl.cli.main  # planted\n", encoding="utf-8")
    spaces = copy / "interfaces" / "spaces.py"
    spaces.write_text(spaces.read_text(encoding="utf-8")
                      + "\n\ndef _planted() -> None:\n    import popmarl.tools.exploit  # noqa: F401\n", encoding="utf-8")
    result = _lint_imports(tmp_path, pythonpath=copy.parent)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{LAYERS} BROKEN" in result.stdout
    assert "popmarl.data.seeds -> popmarl.cli.main" in result.stdout
    assert "popmarl.interfaces.spaces -> popmarl.tools.exploit" in result.stdout
