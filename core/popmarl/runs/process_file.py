"""``.process.json``: which process is running a run, so that a reader can tell a run that
is going from one that was killed.

A session of a run (``popmarl run``, a resume) writes the file into the run directory
before its first checkpoint and removes it once ``summary.json`` is written, whatever the
run's end (a hidden file: bookkeeping, which trackers that upload the run's files skip). A kill (``kill -9``, a crash of the machine) leaves it behind. A reader that
finds it asks whether the process it names is still alive: on the same host, by its pid
and its start time as the OS counts it (so a pid the OS has since given to another
process does not pass for the run), where the OS lets it know; on another host it cannot
tell, and says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import attrs

from popmarl.data.atomic import write_json

#: The file's name in the run directory.
PROCESS_FILE = ".process.json"


@attrs.frozen(kw_only=True)
class ProcessRecord:
    """A running session: its ``pid`` on ``host`` and the process's ``start`` (Linux: boot
    id and start time in clock ticks; None where the OS does not tell); ``written_ns``: the
    file's modification time, to compare with ``summary.json``'s."""

    pid: int
    host: str
    start: str | None
    written_ns: int = 0


def this_process() -> ProcessRecord:
    """The record of the calling process."""
    return ProcessRecord(pid=os.getpid(), host=socket.gethostname(), start=process_start(os.getpid()))


def process_start(pid: int) -> str | None:
    """``boot id:start time`` of process ``pid`` where ``/proc`` tells it (Linux), else
    None; None also for a process that is gone or a zombie (it runs no more)."""
    stat = _proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X", "x"):
        return None
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        boot = ""
    return f"{boot}:{stat[19]}"


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields if len(fields) > 19 else None


def is_alive(record: ProcessRecord) -> bool | None:
    """Whether the process of ``record`` still runs: True or False, or None where this
    process cannot tell (another host; an OS without ``/proc`` nor a harmless signal 0)."""
    if record.host != socket.gethostname():
        return None
    if Path("/proc/self/stat").is_file():  # Linux: the pid, its state and its start time
        if not _running(record.pid):
            return False
        return record.start is None or process_start(record.pid) == record.start
    if record.pid == os.getpid():
        return True
    if os.name != "posix":  # Windows' os.kill would end the process
        return None
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:
        return None
    return True


def _running(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X", "x")


def read_record(run_path: Path) -> ProcessRecord | None:
    """The run's :data:`PROCESS_FILE`, or None where there is none (no session is going, or the
    last ended cleanly) or it cannot be read as one (a kill while it was written)."""
    try:
        with open(run_path / PROCESS_FILE, "rb") as f:
            written = os.fstat(f.fileno()).st_mtime_ns
            data = json.loads(f.read().decode("utf-8"))
        return ProcessRecord(pid=int(data["pid"]), host=str(data["host"]),
                             start=None if data.get("start") is None else str(data["start"]), written_ns=written)
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def session(run_path: Path) -> Iterator[None]:
    """Mark the run directory as run by this process for the block (the file is written
    atomically; it stays behind where the process is killed)."""
    me = this_process()
    write_json(run_path / PROCESS_FILE, {"pid": me.pid, "host": me.host, "start": me.start})
    try:
        yield
    finally:
        (run_path / PROCESS_FILE).unlink(missing_ok=True)
