"""``--set KEY.name=NEW`` on a config whose ``KEY.params`` are the old component's (a saved
``config.yaml`` has every component's params written out): when they do not fit NEW, one
problem says so (not one "unknown key" per old param); with ``--resume``, the run's
"only stopping and trackers may change" comes first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import popmarl
from popmarl.config.schema import to_dict
from popmarl.errors import ConfigError

SAVED_ALGORITHM = ("--set algorithm.name=random: algorithm.params still hold exact_matrix_br's params, which random "
                   "does not take (initial); add --set algorithm.params={} for random's defaults, or set its params")


@pytest.fixture
def saved_run(run_inprocess, tmp_path: Path) -> Path:
    """A finished run (rock-paper-scissors, exact_matrix_br, uniform) and so its saved config.yaml."""
    run_inprocess(out="saved", stopping={"max_iterations": 1})
    return tmp_path / "saved"


def _one_line(result: Any) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr, result
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, f"not one line:\n{result}"
    return result.stderr.rstrip("\n")


def test_saved_config_with_another_algorithm_says_its_params_do_not_fit(saved_run: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        popmarl.load_config(str(saved_run / "config.yaml"), ["algorithm.name=random"])
    assert caught.value.problems == [SAVED_ALGORITHM]


def test_many_old_params_make_one_problem(write_config) -> None:
    """nash's 12 params, of which prd takes only ``symmetric``: one problem, not 11."""
    pytest.importorskip("popmarl_solvers")  # nash and prd: in tox's plugins env, not core's
    saved = to_dict(popmarl.validate({"env": "matrix", "algorithm": "exact_matrix_br", "solver": "nash"}))
    path = write_config(solver=saved["solver"])
    with pytest.raises(ConfigError) as caught:
        popmarl.load_config(str(path), ["solver.name=prd"])
    assert caught.value.problems == [
        "--set solver.name=prd: solver.params still hold nash's params, which prd does not take (tol, zero_sum_atol, "
        "lh_starts and 8 more); add --set solver.params={} for prd's defaults, or set its params"]


def test_other_problems_are_still_reported(saved_run: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        popmarl.load_config(str(saved_run / "config.yaml"), ["algorithm.name=random", "stopping.max_iterations=-1"])
    assert sorted(caught.value.problems) == sorted([SAVED_ALGORITHM, "stopping.max_iterations: must be >= 0, got -1"])


@pytest.mark.parametrize("extra", [["algorithm.params={}"], ["algorithm={name: random}"]])
def test_new_params_given_with_the_name_are_used(saved_run: Path, extra: list[str]) -> None:
    config = popmarl.load_config(str(saved_run / "config.yaml"), ["algorithm.name=random", *extra])
    assert config.algorithm == popmarl.validate({"env": "matrix", "algorithm": "random"}).algorithm


def test_params_of_the_new_name_are_still_checked_one_by_one(saved_run: Path) -> None:
    """An explicit params override is the user's: its own problems, key by key."""
    with pytest.raises(ConfigError, match=r"^algorithm\.params\.initial: unknown key"):
        popmarl.load_config(str(saved_run / "config.yaml"), ["algorithm.name=random", "algorithm.params.initial=first"])


def test_renaming_to_a_component_that_takes_the_old_params_works(saved_run: Path) -> None:
    config = popmarl.load_config(str(saved_run / "config.yaml"), ["solver.name=latest"])
    assert config.solver.name == "latest"


def test_cli_run_with_another_algorithm_is_one_line(saved_run: Path, run_cli, tmp_path: Path) -> None:
    result = run_cli("run", saved_run / "config.yaml", "--set", "algorithm.name=random", "--out", tmp_path / "new")
    assert _one_line(result) == f"popmarl: error: {SAVED_ALGORITHM}"
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("with_config", [False, True], ids=["resume", "config-and-resume"])
def test_resume_with_another_component_says_only_stopping_and_trackers_may_change(
        saved_run: Path, run_cli, with_config: bool) -> None:
    config = [saved_run / "config.yaml"] if with_config else []
    result = run_cli("run", *config, "--resume", saved_run, "--set", "algorithm.name=random")
    assert _one_line(result) == (f"popmarl: error: --resume {saved_run}: the run was made by a different config "
                                 "(differs in: algorithm.name); only stopping and trackers may change")
