"""``popmarl plugins --check``: import every installed entry point in child interpreters,
one per available core, each taking the next distribution as it finishes one.

Importing a plugin can take seconds (torch, ray, open_spiel); checking in parallel makes
the check about as slow as the slowest plugin rather than the sum of them. A plugin that
kills its interpreter fails its own check only: the next distribution gets a fresh one.
Once an entry point imports, the child also reads the API version its top-level package
declares (:data:`~popmarl.plugins.api_version.DECLARATION`), which the caller judges with
:func:`~popmarl.plugins.api_version.verdict`; and an algorithm's capability flags are held
against what it implements (:func:`~popmarl.interfaces.algorithm.flag_problems`): one that
contradicts them fails its check, in one line naming each contradiction.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from typing import IO

import attrs

from popmarl.interfaces.algorithm import Algorithm, flag_problems
from popmarl.plugins.api_version import API_VERSION, DECLARATION

#: Seconds one distribution's imports may take before the check reports it as failed.
TIMEOUT_S = 300.0
#: The core's package (spelled out: the child runs this module as ``__main__``).
_CORE = "popmarl"


@attrs.frozen(kw_only=True)
class Target:
    """One entry point to import: its group, name and ``module:attr`` value."""

    group: str
    name: str
    value: str


@attrs.frozen(kw_only=True)
class Checked:
    """What importing one target found: ``problem``, its import error or, for an
    algorithm, the contradictions of its capability flags (None: it loads and agrees),
    and ``api``, the API version its top-level package declares as written there (a
    string, or a number where the package wrote one); None where it declares none or did
    not load. The core's own components declare this popmarl's API."""

    problem: str | None
    api: object = None


def check(targets: Mapping[str, Sequence[Target]], *, timeout_s: float = TIMEOUT_S,
          workers: int | None = None) -> dict[Target, Checked]:
    """Import each distribution's ``targets`` in child interpreters (``workers``, default
    one per available core); map every target to what its import found."""
    pending = deque(targets.values())
    count = min(len(pending), workers or _cores())
    results: dict[Target, Checked] = {}
    if not pending:
        return results
    with ThreadPoolExecutor(max_workers=count) as pool:
        for found in pool.map(lambda _: _Worker(timeout_s).drain(pending), range(count)):
            results.update(found)
    return results


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _Worker:
    """One child interpreter at a time, fed distributions from a shared queue."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.child: subprocess.Popen[str] | None = None
        self.stderr: IO[bytes] | None = None

    def drain(self, pending: deque[Sequence[Target]]) -> dict[Target, Checked]:
        results: dict[Target, Checked] = {}
        try:
            while True:
                try:
                    targets = pending.popleft()
                except IndexError:
                    return results
                results.update(self._check(targets))
        finally:
            self._stop()

    def _start(self) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # what this process imports
        self.stderr = tempfile.TemporaryFile()
        return subprocess.Popen([sys.executable, "-m", "popmarl.plugins.check"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=self.stderr, env=env, text=True)

    def _check(self, targets: Sequence[Target]) -> dict[Target, Checked]:
        child = self.child = self.child or self._start()
        assert child.stdin is not None and child.stdout is not None
        timer = threading.Timer(self.timeout_s, child.kill)
        timer.start()
        try:
            child.stdin.write(json.dumps([attrs.asdict(t) for t in targets]) + "\n")
            child.stdin.flush()
            line = child.stdout.readline()
        except OSError:  # the child died before it read the request
            line = ""
        finally:
            timer.cancel()
        try:
            answers = json.loads(line)
            return {t: Checked(problem=answers[i][0], api=answers[i][1]) for i, t in enumerate(targets)}
        except (ValueError, IndexError, KeyError, TypeError):
            reason = self._died()
            return dict.fromkeys(targets, Checked(problem=reason))

    def _died(self) -> str:
        """Why the child stopped answering (it is gone afterwards)."""
        assert self.child is not None and self.stderr is not None
        self.child.kill()
        status = self.child.wait()
        self.stderr.seek(0)
        tail = (self.stderr.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        self._stop()
        if status == -9:
            return f"TimeoutError: importing took over {self.timeout_s:.0f} s"
        return f"the check's interpreter exited with status {status}: {tail}"

    def _stop(self) -> None:
        if self.child is not None:
            try:
                if self.child.stdin is not None:
                    self.child.stdin.close()
            except OSError:  # it died with a request unread
                pass
            try:
                self.child.wait(timeout=10)  # it ends at the end of its input
            except subprocess.TimeoutExpired:  # e.g. a thread a plugin started keeps it alive
                self.child.kill()
                self.child.wait()
            if self.child.stdout is not None:
                self.child.stdout.close()
            self.child = None
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None


def _import_each(targets: Iterable[Mapping[str, str]]) -> list[tuple[str | None, object]]:
    """Per target: its import error or flag contradiction (None: it loads and agrees) and
    its top-level package's declared API version."""
    answers: list[tuple[str | None, object]] = []
    for t in targets:
        try:
            loaded = metadata.EntryPoint(name=t["name"], value=t["value"], group=t["group"]).load()
        except Exception as exc:  # any import-time failure of a third-party plugin
            answers.append((f"{type(exc).__name__}: {exc}", None))
        else:
            answers.append((_contradiction(t["group"], loaded), _declared(t["value"])))
    return answers


def _contradiction(group: str, loaded: object) -> str | None:
    """Where an algorithm's capability flags contradict what it implements, in one line
    (None: they agree, or ``loaded`` is no algorithm class)."""
    if group != f"{_CORE}.algorithms" or not (isinstance(loaded, type) and issubclass(loaded, Algorithm)):
        return None
    problems = flag_problems(loaded)
    return f"capability flags: {'; '.join(problems)}" if problems else None


def _declared(value: str) -> object:
    """The API version declared by the top-level package of entry point ``value``
    (``module:attr``), already imported: this popmarl's own for the core's components;
    None where it declares none; a value that is not a string or a number, by its repr."""
    top = value.partition(":")[0].strip().partition(".")[0]
    if top == _CORE:
        return API_VERSION
    declared = getattr(sys.modules.get(top), DECLARATION, None)
    return declared if declared is None or isinstance(declared, (str, int, float)) else repr(declared)


def _main() -> None:
    """The child: for each line of stdin (a JSON list of targets), import them and answer
    one line of JSON on stdout, per target its problem and declared API version; whatever
    the imports print goes to stderr."""
    answer = os.dup(1)
    os.dup2(2, 1)  # imports that print (even from C, even at exit) must not garble the answers
    for line in sys.stdin:
        answers = _import_each(json.loads(line))
        sys.stdout.flush()
        os.write(answer, (json.dumps(answers) + "\n").encode())
    os.close(answer)


if __name__ == "__main__":
    _main()
