"""A block that a stop signal does not cut short: a SIGINT or SIGTERM that arrives inside
:func:`uninterrupted` takes effect when the block ends. A checkpoint is written whole this
way; a stop raised in the middle of it (inside ``np.savez``'s zip file, say) could leave it
half-written and turn the clean stop into another error."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then act on the first that came as
    its handler would have (outside the main thread, where handlers cannot change: as is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[tuple[int, FrameType | None]] = []
    previous = {s: signal.getsignal(s) for s in _SIGNALS}
    for s in _SIGNALS:
        signal.signal(s, lambda signum, frame: held.append((signum, frame)))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if held:
            signum, frame = held[0]
            handler = previous[signal.Signals(signum)]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), signum)
