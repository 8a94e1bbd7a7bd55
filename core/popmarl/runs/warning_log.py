"""Python warnings of a run, written to its run directory's log file.

Libraries warn about what their users can rarely act on (a deprecated import path, a
numerical corner case); on the console such lines bury the run's own output. While a
:class:`WarningLog` is installed, every warning that Python's filters let through is
appended to the log file (``log.txt`` in the run directory; those raised before the
directory exists are held and written once it does). With ``console=False`` (what
``popmarl run`` asks for) a warning is then shown on the console only when popmarl's own
code raised it (a module of ``popmarl`` or of a ``popmarl_*`` plugin): those are meant
for the user. With ``console=True`` every warning also goes where it went before (so an
in-process caller's ``pytest.warns`` or filters see them unchanged).

Warnings the filters drop (by default a library's ``DeprecationWarning``) are dropped as
before: the log changes where warnings go, never which ones are raised or shown.
"""

from __future__ import annotations

import sys
import threading
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

#: The run directory's log file.
LOG_FILE = "log.txt"


def _own_directories() -> list[Path]:
    """The directories of popmarl's package and of every imported ``popmarl_*`` plugin."""
    found = []
    for name, module in list(sys.modules.items()):
        if "." not in name and (name == "popmarl" or name.startswith("popmarl_")):
            file = getattr(module, "__file__", None)
            if file:
                found.append(Path(file).resolve().parent)
    return found


def raised_by_popmarl(filename: str) -> bool:
    """Whether a warning attributed to ``filename`` comes from popmarl's own code."""
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return False
    return any(path.is_relative_to(directory) for directory in _own_directories())


class WarningLog:
    """While entered, Python warnings are appended to a log file (from :meth:`open` on;
    those before are held) and, as ``console`` says, also shown as before."""

    def __init__(self, *, console: bool = True) -> None:
        self.console = console
        self.path: Path | None = None
        #: Warnings written to the log only (not shown on the console).
        self.hidden = 0
        self._held: list[str] = []
        self._unshown: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> WarningLog:
        self._previous = warnings.showwarning
        warnings.showwarning = self._show
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if warnings.showwarning == self._show:
            warnings.showwarning = self._previous
        if self.path is None:  # no log file was ever opened: nothing may be lost
            for args in self._unshown:
                self._previous(*args)

    def open(self, path: str | Path) -> None:
        """Write to ``path`` from now on, starting with the warnings held so far."""
        with self._lock:
            self.path = Path(path)
            held, self._held = self._held, []
            if held:
                self._append(self.path, "".join(held))

    def _show(self, message: Warning | str, category: type[Warning], filename: str, lineno: int,
              file: TextIO | None = None, line: str | None = None) -> None:
        args = (message, category, filename, lineno, file, line)
        shown = self.console or raised_by_popmarl(filename)
        with self._lock:
            self.hidden += not shown
            text = warnings.formatwarning(message, category, filename, lineno, line)
            if self.path is None:
                self._held.append(text)
                if not shown:
                    self._unshown.append(args)
            else:
                self._append(self.path, text)
        if shown:
            self._previous(*args)

    @staticmethod
    def _append(path: Path, text: str) -> None:
        try:
            with path.open("a", encoding="utf-8") as log:
                log.write(text)
        except OSError:  # a log that cannot be written must not stop the run
            pass
