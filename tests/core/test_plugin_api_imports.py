"""Plugins, contrib plugins and builtin components import popmarl only through its plugin API.

A component written outside the core may rely on :mod:`popmarl.api` and, for backends,
:mod:`popmarl.api.engine`; the core's other modules may change between versions. The
package root stays usable for what it adds to the API (the registries, ``popmarl.solvers``
and the like, and ``__version__``). The builtin components are held to the same contract
(besides importing each other). This test reads every module under ``plugins/*/src``,
``contrib/*/src`` and ``core/popmarl/builtin`` without importing it (only the core need be
installed), and lists each import that reaches past the API: at module level, inside a
function, under ``TYPE_CHECKING``, relative, by ``importlib.import_module``, or as an
attribute of the imported root (``popmarl.engine.rollout``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import attrs

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "core" / "popmarl"
#: The modules a component may import.
ALLOWED = frozenset({"popmarl", "popmarl.api", "popmarl.api.engine"})
#: The builtin components' own package: they may import each other.
BUILTIN = "popmarl.builtin"
#: Folders that hold no source of their own (build copies, metadata, caches).
SKIPPED = ("build", "__pycache__")


@attrs.frozen
class Module:
    """A source file to check: where it is, and the package its relative imports start from."""

    path: Path
    package: str


def modules() -> Iterator[Module]:
    """Every plugin, contrib plugin and builtin module, build and metadata folders skipped."""
    trees = [(src, src.rglob("*.py")) for src in sorted([*REPO.glob("plugins/*/src"), *REPO.glob("contrib/*/src")])]
    trees.append((CORE.parent, (CORE / "builtin").rglob("*.py")))
    for root, files in trees:
        for path in sorted(files):
            parts = path.relative_to(root).parts
            if not any(part in SKIPPED or part.endswith(".egg-info") for part in parts):
                yield Module(path, ".".join(parts[:-1]))


def is_core_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of the core (``popmarl.engine.rollout``)."""
    parts = dotted.split(".")
    if parts[0] != "popmarl":
        return False
    base = CORE.joinpath(*parts[1:])
    return (base / "__init__.py").is_file() or base.with_suffix(".py").is_file()


def permitted(dotted: str, package: str) -> bool:
    """Whether a module of ``package`` may import the popmarl module ``dotted``."""
    if dotted in ALLOWED:
        return True
    builtin = package == BUILTIN or package.startswith(BUILTIN + ".")
    return builtin and (dotted == BUILTIN or dotted.startswith(BUILTIN + "."))


def resolve(node: ast.ImportFrom, package: str) -> str:
    """The absolute module an ``import from`` names (relative ones from ``package``)."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def violations(source: str, name: str, package: str) -> list[str]:
    """``name:line: statement`` for each import of ``source`` (a module of ``package``)
    that reaches popmarl past :data:`ALLOWED` (or, in a builtin, past its siblings)."""
    found: list[tuple[int, str]] = []
    roots: set[str] = set()  # local names bound to the package root

    def check(dotted: str, line: int, what: str) -> None:
        if (dotted == "popmarl" or dotted.startswith("popmarl.")) and not permitted(dotted, package):
            found.append((line, what))

    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check(alias.name, node.lineno, f"import {alias.name}")
                if alias.name == "popmarl" or (alias.asname is None and alias.name.startswith("popmarl.")):
                    roots.add(alias.asname or "popmarl")
        elif isinstance(node, ast.ImportFrom):
            module = resolve(node, package)
            check(module, node.lineno, f"from {module} import ...")
            for alias in node.names:
                # ``from popmarl import engine`` imports a core subpackage, not an API name.
                if is_core_module(f"{module}.{alias.name}"):
                    check(f"{module}.{alias.name}", node.lineno, f"from {module} import {alias.name}")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            target = node.args[0].value
            if called in ("import_module", "__import__") and isinstance(target, str):
                check(target, node.lineno, f"{called}({target!r})")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in roots:
            if is_core_module(f"popmarl.{node.attr}"):
                check(f"popmarl.{node.attr}", node.lineno, f"{node.value.id}.{node.attr}")
    return [f"{name}:{line}: {what}" for line, what in sorted(found)]


def test_plugins_contrib_and_builtins_import_only_the_api() -> None:
    checked = list(modules())
    found = [v for m in checked for v in violations(m.path.read_text(), str(m.path.relative_to(REPO)), m.package)]
    # The scan covers what it should: every source tree has modules, builtins included.
    trees = {m.path.relative_to(REPO).parts[:2] for m in checked}
    assert ("core", "popmarl") in trees and any(t[0] == "contrib" for t in trees)
    assert {t[1] for t in trees if t[0] == "plugins"} >= {"popmarl-solvers", "popmarl-ray"}
    assert not any("build" in m.path.parts or any(p.endswith(".egg-info") for p in m.path.parts) for m in checked)
    assert not found, "imports of popmarl past popmarl.api / popmarl.api.engine:\n" + "\n".join(found)


PLANTED = '''\
from typing import TYPE_CHECKING
import popmarl
import popmarl.api
from popmarl import ConfigError, solvers, api
from popmarl.api import Policy, engine
from popmarl.api.engine import Executor
from popmarl.engine.rollout import Seating
if TYPE_CHECKING:
    from popmarl.interfaces.env import Env
def build():
    import popmarl.errors as errors
    from popmarl import plugins
    from popmarl.api import version
    module = importlib.import_module("popmarl.data.records")
    return popmarl.engine.rollout, popmarl.solvers, popmarl.__version__
from popmarl.builtin.matrix_env import MatrixEnv
from . import sibling
from .. import data
'''


def test_the_check_catches_planted_violations() -> None:
    expected = [
        "planted.py:7: from popmarl.engine.rollout import ...",
        "planted.py:9: from popmarl.interfaces.env import ...",
        "planted.py:11: import popmarl.errors",
        "planted.py:12: from popmarl import plugins",
        "planted.py:13: from popmarl.api import version",
        "planted.py:14: import_module('popmarl.data.records')",
        "planted.py:15: popmarl.engine",
    ]
    assert violations(PLANTED, "planted.py", "myplugin") == [
        *expected, "planted.py:16: from popmarl.builtin.matrix_env import ..."]
    # A builtin may import its siblings, by name or relatively, but nothing past its package.
    builtin = violations(PLANTED, "planted.py", "popmarl.builtin")
    assert builtin == [*expected, "planted.py:18: from popmarl import data"]
