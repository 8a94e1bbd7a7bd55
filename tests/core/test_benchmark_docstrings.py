"""A benchmark's docstring says what it measures and how to run it, not what it measured:
no dated figures, no "before issue N". The current figures live in README.md's
Benchmarks table, earlier ones in the git history (a docstring's figures drift)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: A date (2026-11-23), a comparison with an earlier state, or a measured-figures heading
#: ("Measured with ...", not "measured in the same run").
HISTORY = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b(?i:before issue|re-measured)\b|\bMeasured\b")


def _docstrings(path: Path) -> list[tuple[int, str]]:
    """Every docstring of ``path`` (module, classes, functions), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))]
    return [(getattr(n, "lineno", 1), doc) for n in nodes if (doc := ast.get_docstring(n))]


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda p: p.name)
def test_a_benchmark_docstring_holds_no_measured_history(path: Path) -> None:
    found = [f"{path.name}:{line}: {match.group()!r}" for line, doc in _docstrings(path)
             for match in HISTORY.finditer(doc)]
    assert found == [], "measured history belongs in the README table (current) or the git history"
