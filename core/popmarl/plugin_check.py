"""``popmarl plugins --check``: import every installed entry point, each distribution's in
a fresh interpreter of its own, all at once.

Importing a plugin can take seconds (torch, ray, open_spiel); checking distributions in
parallel makes the check as slow as the slowest plugin rather than the sum of them, and a
plugin that crashes its interpreter or leaves import side effects cannot affect another's
check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata

import attrs

#: Seconds one distribution's imports may take before the check reports it as failed.
TIMEOUT_S = 300.0


@attrs.frozen(kw_only=True)
class Target:
    """One entry point to import: its group, name and ``module:attr`` value."""

    group: str
    name: str
    value: str


def check(targets: Mapping[str, Sequence[Target]], *, timeout_s: float = TIMEOUT_S) -> dict[Target, str | None]:
    """Import each distribution's ``targets`` in a child interpreter (all in parallel); map
    every target to its import error, or None when it loads."""
    results: dict[Target, str | None] = {}
    if not targets:
        return results
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        for found in pool.map(lambda item: _check_distribution(item[1], timeout_s), targets.items()):
            results.update(found)
    return results


def _check_distribution(targets: Sequence[Target], timeout_s: float) -> dict[Target, str | None]:
    request = json.dumps([attrs.asdict(t) for t in targets])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # what this process imports
    try:
        proc = subprocess.run([sys.executable, "-m", "popmarl.plugin_check"], input=request, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return dict.fromkeys(targets, f"TimeoutError: importing took over {timeout_s:.0f} s")
    try:
        problems = json.loads(proc.stdout.strip().splitlines()[-1])
        return {t: problems[i] for i, t in enumerate(targets)}
    except (ValueError, IndexError, KeyError):  # the child died before it answered
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return dict.fromkeys(targets, f"the check's interpreter exited with status {proc.returncode}: {tail}")


def _import_each(targets: Iterable[Mapping[str, str]]) -> list[str | None]:
    problems: list[str | None] = []
    for t in targets:
        try:
            metadata.EntryPoint(name=t["name"], value=t["value"], group=t["group"]).load()
            problems.append(None)
        except Exception as exc:  # any import-time failure of a third-party plugin
            problems.append(f"{type(exc).__name__}: {exc}")
    return problems


def _main() -> None:
    """The child: read the targets (JSON) from stdin, import them, write the problems
    (JSON) as the only line of stdout; whatever the imports print goes to stderr."""
    targets = json.loads(sys.stdin.read())
    answer = os.dup(1)
    os.dup2(2, 1)  # imports that print (even from C, even at exit) must not garble the answer
    problems = _import_each(targets)
    sys.stdout.flush()
    os.write(answer, (json.dumps(problems) + "\n").encode())
    os.close(answer)


if __name__ == "__main__":
    _main()
