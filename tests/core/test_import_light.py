"""Done-when (2): importing popmarl and listing every registry is fast and imports no heavy
library, whatever else is installed (this runs in every tox env)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("torch", "ray", "pettingzoo", "pyspiel", "tianshou", "mlflow", "open_spiel", "scipy", "matplotlib",
         "gymnasium", "pandas", "tensorflow", "jax", "torchrl", "tensordict")
LIMIT_S = 0.5

#: Runs in a fresh interpreter: times ``import popmarl`` + ``names()`` of every registry
#: (interpreter start-up excluded) in CPU seconds of the process, which other load on a
#: shared machine does not inflate, then reports which heavy top-level modules got imported.
PROBE = """
import json, sys, time
start = time.process_time()
import popmarl
names = {kind: getattr(popmarl, kind).names() for kind in popmarl.KINDS}
seconds = time.process_time() - start
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
print(json.dumps({"seconds": seconds, "heavy": heavy, "names": names}))
"""


def _probe(code: str) -> dict:
    # Bytecode may be cached, as in any installed environment; the sandbox's
    # PYTHONDONTWRITEBYTECODE would otherwise make every run recompile the core.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{code}"], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_import_and_listing_import_no_heavy_library() -> None:
    report = _probe(PROBE)
    assert report["heavy"] == [], f"importing popmarl / listing plugins imported {report['heavy']}"
    assert "matrix" in report["names"]["envs"] and "uniform" in report["names"]["solvers"]


def test_import_and_listing_take_under_half_a_second() -> None:
    _probe(PROBE)  # warm the bytecode cache
    times = [_probe(PROBE)["seconds"] for _ in range(3)]
    assert min(times) < LIMIT_S, f"import popmarl + names(): best of 3 = {min(times):.3f}s ({times})"


def test_the_plugins_listing_imports_no_heavy_library() -> None:
    """``popmarl plugins`` (without --check) lists every component without importing any."""
    code = """
import contextlib, io, json, sys
from popmarl.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = main(["plugins"])
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
builtin = sorted(m for m in sys.modules if m.startswith("popmarl.builtin."))
print(json.dumps({"status": status, "heavy": heavy, "builtin": builtin, "lines": len(out.getvalue().splitlines())}))
"""
    report = _probe(code)
    assert report["status"] == 0
    assert report["heavy"] == []
    assert report["builtin"] == [], "listing imported component modules"
    assert report["lines"] > 9


def test_every_public_name_resolves() -> None:
    """Re-exports load on first use: each name in ``__all__`` must still be found."""
    import popmarl

    missing = [name for name in popmarl.__all__ if not hasattr(popmarl, name)]
    assert missing == []
    assert popmarl.Policy.__module__ == "popmarl.interfaces.policy" and popmarl.UserError.__module__ == "popmarl.errors"


def test_the_plugin_api_imports_no_heavy_library() -> None:
    """``import popmarl.api`` (what every plugin imports first) stays as light as ``import popmarl``."""
    code = """
import json, sys, time
start = time.process_time()
import popmarl.api, popmarl.api.engine
seconds = time.process_time() - start
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
builtin = sorted(m for m in sys.modules if m.startswith("popmarl.builtin."))
print(json.dumps({"seconds": seconds, "heavy": heavy, "builtin": builtin}))
"""
    _probe(code)  # warm the bytecode cache
    reports = [_probe(code) for _ in range(3)]
    assert reports[0]["heavy"] == [] and reports[0]["builtin"] == []
    times = [r["seconds"] for r in reports]
    assert min(times) < LIMIT_S, f"import popmarl.api: best of 3 = {min(times):.3f}s ({times})"
