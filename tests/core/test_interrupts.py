"""A stop signal inside :func:`popmarl.runs.interrupts.uninterrupted` waits for the block's end
(a checkpoint written whole): CI once saw a SIGTERM land inside ``np.savez`` during a
commit, and the zip file's cleanup turned the clean stop into a traceback."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from popmarl.errors import Terminated
from popmarl.runs.interrupts import uninterrupted
from popmarl.runs.rundir import RunDirectory


def _terminate(signum: int, frame: object) -> None:
    raise Terminated("SIGTERM")


def test_a_sigterm_inside_the_block_acts_when_it_ends() -> None:
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        done = []
        with pytest.raises(Terminated):
            with uninterrupted():
                os.kill(os.getpid(), signal.SIGTERM)
                done.append("after the signal")  # still inside: the block runs on
        assert done == ["after the signal"]
        assert signal.getsignal(signal.SIGTERM) is _terminate  # the handler is back
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_sigint_inside_a_commit_leaves_the_checkpoint_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import popmarl.runs.rundir as rundir

    write_npz = rundir.write_npz

    def interrupted_write(path: object, arrays: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # lands in the middle of the checkpoint
        write_npz(path, arrays)  # type: ignore[arg-type]

    monkeypatch.setattr(rundir, "write_npz", interrupted_write)
    run = RunDirectory(tmp_path / "run")
    run.create("seed: 0\n")
    with pytest.raises(KeyboardInterrupt):
        run.commit({"iteration": 1}, {"x": np.arange(3)})
    state, arrays = run.load_state()
    assert state["iteration"] == 1 and np.array_equal(arrays["x"], np.arange(3))


def test_a_sigterm_while_a_policy_is_saved_leaves_it_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run publishes each new policy to its run directory between commits: a SIGTERM that
    lands inside that write (seen in CI: inside ``np.savez_compressed``'s zip file, whose
    cleanup then failed with a ValueError and exit status 1 in place of a clean stop) waits
    for the file, then stops the run."""
    import popmarl.runs.rundir as rundir

    write_npz = rundir.write_npz

    def interrupted_write(path: object, arrays: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # lands in the middle of the policy's file
        write_npz(path, arrays, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rundir, "write_npz", interrupted_write)
    run = RunDirectory(tmp_path / "run")
    run.create("seed: 0\n")
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with pytest.raises(Terminated):
            run.save_policy("player_0/3", {"w": np.arange(4.0)})
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert np.array_equal(run.load_policy("player_0/3")["w"], np.arange(4.0))
