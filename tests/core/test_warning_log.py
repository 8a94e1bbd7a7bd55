"""Python warnings raised during a run are appended to the run directory's ``log.txt``
(:mod:`popmarl.runs.warning_log`): ``popmarl run`` shows only popmarl's own on the console;
``popmarl.run`` in a program passes every one on as before, so its filters and
``pytest.warns`` see them."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import popmarl
from popmarl.runs.runner import run
from popmarl.runs.warning_log import WarningLog


class NoisySolver(popmarl.MetaSolver):
    """Uniform, warning on every solve as a library might (this file is not popmarl's)."""

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        warnings.warn("noisy solver: this call is deprecated", UserWarning, stacklevel=1)
        return tuple(np.full(n, 1.0 / n) for n in payoffs.shape[1:])


SOLVERS = {"solvers": popmarl.solvers.with_component("noisy", NoisySolver)}


def _run(write_config, tmp_path: Path, iterations: int, **kwargs) -> dict:
    path = write_config(solver="noisy", stopping={"max_iterations": iterations})
    config = popmarl.load_config(str(path), registries=SOLVERS)
    return run(config, registries=SOLVERS, **kwargs)


def test_a_run_logs_its_warnings_and_passes_them_on(write_config, tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="noisy solver"):
        summary = _run(write_config, tmp_path, 2, out=str(tmp_path / "run"))
    assert summary["status"] == "completed"
    log = (tmp_path / "run" / "log.txt").read_text(encoding="utf-8")
    assert log.count("UserWarning: noisy solver: this call is deprecated") == 3  # initial meta-game, 2 iterations
    # A resumed run appends to the same log.
    with pytest.warns(UserWarning, match="noisy solver"):
        _run(write_config, tmp_path, 3, resume=str(tmp_path / "run"))
    assert (tmp_path / "run" / "log.txt").read_text(encoding="utf-8").count("UserWarning: noisy solver") == 4


def test_quiet_console_keeps_library_warnings_in_the_log(write_config, tmp_path: Path, capsys) -> None:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        _run(write_config, tmp_path, 1, out=str(tmp_path / "run"), console_warnings=False)
    assert [str(w.message) for w in shown] == []
    log = tmp_path / "run" / "log.txt"
    assert log.read_text(encoding="utf-8").count("UserWarning: noisy solver") == 2
    assert f"popmarl: 2 Python warning(s) of the run's libraries in {log}" in capsys.readouterr().out


def test_popmarls_own_warnings_stay_on_the_console(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with WarningLog(console=False) as log:
            warnings.warn_explicit("from popmarl", UserWarning, popmarl.__file__, 1)
            warnings.warn_explicit("from a library", UserWarning, str(tmp_path / "lib.py"), 1)
            log.open(tmp_path / "log.txt")
    assert [str(w.message) for w in shown] == ["from popmarl"]
    text = (tmp_path / "log.txt").read_text(encoding="utf-8")
    assert "UserWarning: from popmarl" in text and "UserWarning: from a library" in text


def test_warnings_of_a_run_that_never_made_its_directory_are_not_lost(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError), WarningLog(console=False):
            warnings.warn_explicit("from a library", UserWarning, str(tmp_path / "lib.py"), 1)
            raise RuntimeError("the run failed before its directory existed")
    assert [str(w.message) for w in shown] == ["from a library"]
    assert list(tmp_path.iterdir()) == []
