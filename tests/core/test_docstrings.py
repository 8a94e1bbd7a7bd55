"""A docstring says what a thing does and why, not what it measured once or what it used to
be: no dates, no measured figures, no history. Measured figures drift (machines, loads,
later code), so they live in docs/benchmarks.md with their date and the command that
printed them; earlier states live in the git history.

Read: every module, class and function docstring (``ast``) and every ``#:`` comment
(an attribute's docstring) of the core, the plugins and contrib. A benchmark's docstring
says what it measures and how to run it, and may name the issue that set its target; it
too holds no dated figures."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("core/popmarl/**/*.py"), *ROOT.glob("plugins/*/src/**/*.py"),
                  *ROOT.glob("contrib/*/src/**/*.py")])
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_NUMBER = r"\d[\d,.]*"
#: What a source docstring may not hold, by kind; each alternative with an example it catches.
FORBIDDEN = {
    "a date": re.compile(
        rf"\b20\d\d-\d\d-\d\d\b"                                  # 2026-11-25
        rf"|\b{_MONTH} 20\d\d\b"),                                # Nov 2026
    "history": re.compile(
        r"(?i:\bissue \d+"                                        # until issue 28
        r"|\bused to\b|\bno longer\b|\bpreviously\b|\bformerly\b"
        r"|\b(?:before|after|until) the (?:fix|change)\b"         # before the fix
        r"|\b(?:earlier|previous) main\b"                         # the earlier main
        r"|\bre-measured\b"
        r"|\bwas [^.;]{0,40}, now\b)"),                           # was 4 epochs, now 10
    "a measurement": re.compile(
        r"\bMeasured\b|\bmeasured (?:on|with)\b"                  # Measured on an H100
        r"|\bon an? [A-Z]\d{3}\b|\b\d+-core machine\b"            # on an H100, 2-core machine
        r"|\bseeds? \d"                                           # (seed 0), seeds 0-2
        rf"|{_NUMBER} ?± ?\d"                                     # -58.9 ± 0.7
        r"|\b(?:took|lost|reached|ended at|converged at)\b[^.;]{0,20}?\d"  # took 47 s
        rf"|~ ?{_NUMBER} ?(?:ms|µs|s|min|minutes|%|x|×)(?!\w)"    # ~45 ms, ~30%
        rf"|{_NUMBER} ?(?:%|x|×|times) (?:faster|slower|sooner|cheaper|longer|shorter)\b"  # 3x cheaper
        r"|\d\.\d+ ?(?:x|×|times)(?!\w)"                          # 1.75 times, 2.3x
        r"|\d (?:of|against) (?:its|the) (?:floor|baseline)\b"    # 0.64-0.86 of its floor
        rf"|{_NUMBER}k? (?:env )?steps?(?:/s\b| per (?:CPU |wall )?second)"),  # 17,900 env steps/s
}
#: A benchmark's docstring: a date, a comparison with an earlier state, a measured-figures
#: heading ("Measured with ...", not "measured in the same run").
BENCHMARK_HISTORY = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b(?i:before issue|re-measured)\b|\bMeasured\b")


def _docstrings(path: Path) -> list[tuple[int, str]]:
    """Every docstring of ``path`` (module, classes, functions), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))]
    return [(getattr(n, "lineno", 1), doc) for n in nodes if (doc := ast.get_docstring(n))]


def _doc_comments(path: Path) -> list[tuple[int, str]]:
    """Every block of consecutive ``#:`` lines of ``path``, joined, with its first line."""
    blocks: list[tuple[int, str]] = []
    last = -1
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if text.startswith("#:"):
            if blocks and last == number - 1:
                blocks[-1] = (blocks[-1][0], f"{blocks[-1][1]} {text[2:].strip()}")
            else:
                blocks.append((number, text[2:].strip()))
            last = number
    return blocks


def forbidden(text: str) -> list[str]:
    """What of ``FORBIDDEN`` ``text`` holds: ``kind: 'match'`` each (whitespace folded,
    so a phrase broken over lines is still one)."""
    flat = " ".join(text.split())
    return [f"{kind}: {match.group()!r}" for kind, pattern in FORBIDDEN.items() for match in pattern.finditer(flat)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_docstring_says_what_and_why_without_figures_or_history(path: Path) -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {what}"
             for line, doc in [*_docstrings(path), *_doc_comments(path)] for what in forbidden(doc)]
    assert found == [], ("a docstring says what and why; measured figures go to docs/benchmarks.md "
                         "(with date and command), history to the git log:\n" + "\n".join(found))


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_a_benchmark_docstring_holds_no_measured_history(path: Path) -> None:
    found = [f"{path.name}:{line}: {match.group()!r}" for line, doc in _docstrings(path)
             for match in BENCHMARK_HISTORY.finditer(doc)]
    assert found == [], "measured figures belong in docs/benchmarks.md (current) or the git history"


@pytest.mark.parametrize("text", [
    "Defaults (2026-11-26): the paper's.", "as of Nov 2026", "took 47 s", "0.64-0.86 of its floor",
    "-63.2 with these (seed 0)", "lost 24-27% of its games", "until issue 28", "what it used to do",
    "before the fix", "against the earlier main", "it no longer waits", "the default was 4 epochs, now 10",
    "Measured on an H100", "on this project's 2-core machine", "100-300x faster", "~30% longer",
    "~0.31 ms", "-58.9 ± 0.7", "ended at 1.75 times uniform's", "17,900 env steps per second",
])
def test_the_detector_catches_figures_dates_and_history(text: str) -> None:
    assert forbidden(text), text


@pytest.mark.parametrize("text", [
    "30% of the time unless training.opponent_epsilon says otherwise", "or after 30 minutes",
    "its 95% confidence interval", "gain at most 1% of the payoff range", "``lr`` 3e-3, ``gamma`` 0.95",
    "E.g. ``device auto -> cuda:0 (timed: cpu 1.52 ms, cuda:0 0.61 ms per update)``",
    "the iteration it was measured at", "measured once per env object", "chosen by ``benchmarks/defaults.py``",
    "seeds below 2**64", "Whether the run starts its own Ray on this machine", "128x128 networks",
    "1/32 (8 samples per decision)", "only ~20 updates of 128 episodes", "several times faster",
    "not improving for ``patience`` update rounds", "Env steps this iteration's tasks took to evaluate",
])
def test_the_detector_allows_what_and_why(text: str) -> None:
    assert forbidden(text) == [], text
