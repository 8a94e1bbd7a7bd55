"""``popmarl plugins --check`` reads the API version each plugin declares (``POPMARL_API`` in its
top-level package): another major version than this popmarl's fails in one line naming the
distribution, its version and both API versions; none declared is noted without failing.

The plugins are real distributions installed into directories of their own (``make_dist``),
imported by the check's child interpreters."""

from __future__ import annotations

from pathlib import Path

import pytest

import popmarl
from popmarl.api import API_VERSION
from popmarl.cli import main
from popmarl.cli.plugins import check_cell
from popmarl.plugins.api_version import verdict
from popmarl.plugins.check import Target, check
from popmarl.plugins.registry import KINDS, STRICT_ENV, Registry

#: Each probe distribution and its top-level package (also its solver's name).
PROBES = {"popmarl-probe-api-two": "probe_api_two", "popmarl-probe-api-one": "probe_api_one",
          "popmarl-probe-api-later": "probe_api_later", "popmarl-probe-api-none": "probe_api_none"}
#: The one line that fails the plugin built against API 3.0.
TWO = (f"popmarl-probe-api-two 2.1.0 is built against popmarl API 3.0; this popmarl provides API {API_VERSION}, "
       "another major version (names it uses may be gone or mean other things)")
SOLVER = "from popmarl.api import MetaSolver\n\nclass Solver(MetaSolver):\n    def solve(self, payoffs):\n        return ()\n"


def _package(site: Path, name: str, declaration: str) -> None:
    """A top-level package ``name`` whose ``__init__`` holds ``declaration`` and whose
    ``solver`` module holds the component (the entry point names the submodule)."""
    (site / name).mkdir()
    (site / name / "__init__.py").write_text(declaration, encoding="utf-8")
    (site / name / "solver.py").write_text(SOLVER, encoding="utf-8")


@pytest.fixture
def plugins(make_dist):
    """Four plugins: built against API 3.0, this one, a later minor one, and undeclared."""
    declarations = {"probe_api_two": 'POPMARL_API = "3.0"\n', "probe_api_one": f'POPMARL_API = "{API_VERSION}"\n',
                    "probe_api_later": 'POPMARL_API = "2.7"\n', "probe_api_none": ""}
    for dist, package in PROBES.items():
        made = make_dist(dist, version="2.1.0", entry_points={"popmarl.solvers": {package: f"{package}.solver:Solver"}})
        _package(made.site, package, declarations[package])


def test_the_check_reads_each_plugins_declared_api_version(plugins) -> None:
    targets = {dist: [Target(group="popmarl.solvers", name=name, value=f"{name}.solver:Solver")]
               for dist, name in PROBES.items()}
    targets["popmarl"] = [Target(group="popmarl.solvers", name="uniform", value="popmarl.builtin.solvers:Uniform")]
    found = {t.name: checked for t, checked in check(targets).items()}
    assert all(checked.problem is None for checked in found.values()), found
    assert found["probe_api_two"].api == "3.0" and found["probe_api_one"].api == API_VERSION
    assert found["probe_api_none"].api is None
    assert found["uniform"].api == API_VERSION  # the core's own components are of its own API

    cells = {name: check_cell(found[name], dist, "2.1.0") for dist, name in PROBES.items()}
    assert cells["probe_api_one"] == check_cell(found["uniform"], "popmarl", popmarl.__version__) == "ok"
    assert cells["probe_api_none"] == "ok (API version undeclared (POPMARL_API))"
    assert cells["probe_api_later"].startswith(f"ok (built against API 2.7, newer than this popmarl's {API_VERSION}")
    assert cells["probe_api_two"] == f"FAILED: {TWO}"


@pytest.mark.parametrize("declared", [2, "1", "one", "1.0.0", True])
def test_a_declaration_that_is_no_version_fails(declared: object) -> None:
    judged = verdict(declared, distribution="popmarl-x", version="0.3")
    assert not judged.ok and judged.text.startswith("popmarl-x 0.3 declares POPMARL_API = ")
    assert "\n" not in judged.text


def test_plugins_check_fails_on_a_plugin_of_another_major_api_version(plugins, monkeypatch, capsys) -> None:
    """The command: only the probes registered (every kind's registry replaced, as a user may
    replace them); the plugin of API 3.0 fails its row and the command exits 1, the others pass."""
    monkeypatch.setenv(STRICT_ENV, "1")
    for kind in KINDS:
        monkeypatch.setattr(popmarl, kind, Registry(kind=kind))
    installed = Registry.from_entry_points("solvers")
    probes = Registry(kind="solvers", entries={n: e for n, e in installed.entries.items()
                                               if n in PROBES.values() or n == "uniform"})
    monkeypatch.setattr(popmarl, "solvers", probes.with_component("in_process", object))  # nothing to import: ok
    assert main(["plugins", "--check"]) == 1
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[1:] if line.split()[0] == "solver"}
    assert set(rows) == {*PROBES.values(), "uniform", "in_process"}
    assert rows["probe_api_two"].split()[2:5] == ["popmarl-probe-api-two", "2.1.0", "FAILED:"]
    assert rows["probe_api_two"].endswith(f"FAILED: {TWO}")
    assert rows["probe_api_one"].endswith(" ok") and rows["in_process"].endswith(" ok") and rows["uniform"].endswith(" ok")
    assert rows["probe_api_none"].endswith(" ok (API version undeclared (POPMARL_API))")
