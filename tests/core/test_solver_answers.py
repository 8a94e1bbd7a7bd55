"""A meta-solver's answer is checked before PSRO uses it: one finite, non-negative mixture
per seat, of that seat's population's length, summing to 1 (a drift up to 1e-6 is
renormalised), and a joint solver's distribution of the table's shape summing to 1. A
wrong answer is the solver's bug: one line naming the solver, the seat and what is wrong,
a ``PopmarlError`` (not a ``UserError``: exit status 1), and a failed ``summary.json``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import popmarl
from popmarl.errors import PopmarlError, UserError
from popmarl.interfaces.solver import SolverResult, solution_metrics

from testkit.run_files import read_summary

BAD_SOLVER = '''
import attrs
import numpy as np
import popmarl


def answer(mode, sizes):
    """A wrong (or, for ``drift``, slightly off) answer of kind ``mode`` for populations of ``sizes``."""
    if mode == "ones":
        return tuple(np.ones(k) for k in sizes)
    if mode == "negative":
        return tuple(np.r_[np.full(k - 1, 2.0 / (k - 1)), -1.0] if k > 1 else np.ones(1) for k in sizes)
    if mode == "length":
        return tuple(np.full(k + 1, 1.0 / (k + 1)) for k in sizes)
    if mode == "one_for_all":
        return (np.full(sizes[0], 1.0 / sizes[0]),)
    if mode == "nan":
        return tuple(np.full(k, np.nan) for k in sizes)
    if mode == "drift":
        return tuple(np.full(k, 1.0 / k) * (1.0 + 5e-7) for k in sizes)
    raise AssertionError(mode)


class Bad(popmarl.MetaSolver):
    """Answers ``answer(mode, ...)`` (test only)."""

    @attrs.frozen(kw_only=True)
    class Config:
        mode: str = "ones"

    def solve(self, payoffs):
        return answer(self.config.mode, payoffs.shape[1:])
'''

#: mode -> what the one line says after "meta-solver bad gave an invalid answer: ".
WRONG = {
    "ones": r"seat player_0: the mixture sums to 2, not 1$",
    "negative": r"seat player_0: the mixture has a negative weight \(-1 at index 1\)$",
    "length": r"seat player_0: the mixture has 2 weights, not 1 \(one per policy of the seat's population\)$",
    "one_for_all": r"answer: 1 mixture for 2 seats; a solver answers one per seat$",
    "nan": r"seat player_0: the mixture has NaN or infinite weights$",
}


@pytest.fixture
def bad_solver(make_dist) -> Any:
    """The ``bad`` solver, installed (an entry point in a throwaway distribution)."""
    dist = make_dist("popmarl-bad-solver", entry_points={"popmarl.solvers": {"bad": "bad_solver_mod:Bad"}},
                     modules={"bad_solver_mod": BAD_SOLVER})
    import bad_solver_mod

    return dist, bad_solver_mod


def _found(cls: type, name: str = "bad") -> popmarl.Registries:
    return popmarl.Registries.current().with_component("solvers", name, cls)


def _run(tmp_path: Path, found: popmarl.Registries, solver: Any, **extra: Any) -> dict[str, Any]:
    config = popmarl.validate({"env": {"name": "matrix", "params": {"game": "rps"}}, "algorithm": "exact_matrix_br",
                               "solver": solver, "stopping": {"max_iterations": 3}, "trackers": [], **extra},
                              registries=found)
    return popmarl.run(config, out=str(tmp_path / "run"), registries=found)


def _fails(tmp_path: Path, found: popmarl.Registries, solver: Any, pattern: str, **extra: Any) -> str:
    """Run; check it fails with a PopmarlError that is no UserError, matching ``pattern``, one
    line, and that summary.json says failed with that reason; return the message."""
    with pytest.raises(PopmarlError) as caught:
        _run(tmp_path, found, solver, **extra)
    message = str(caught.value)
    assert not isinstance(caught.value, UserError), message
    assert "\n" not in message
    assert message.startswith(f"meta-solver {solver['name'] if isinstance(solver, dict) else solver} "
                              "gave an invalid answer: "), message
    assert caught.match(pattern)
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "failed"
    assert message in summary["stop_reason"]
    return message


@pytest.mark.parametrize("mode", sorted(WRONG))
def test_a_wrong_mixture_fails_the_run_naming_solver_and_seat(bad_solver, tmp_path: Path, mode: str) -> None:
    _, module = bad_solver
    _fails(tmp_path, _found(module.Bad), {"name": "bad", "params": {"mode": mode}}, WRONG[mode])


def test_a_drift_up_to_1e6_is_renormalised(bad_solver, tmp_path: Path) -> None:
    _, module = bad_solver
    summary = _run(tmp_path, _found(module.Bad), {"name": "bad", "params": {"mode": "drift"}})
    assert summary["status"] == "completed"
    for mixture in summary["meta_strategies"].values():
        assert sum(mixture) == pytest.approx(1.0, abs=1e-12)


class DetailedBad(popmarl.MetaSolver):
    """Overrides ``solve_detailed`` (as the solvers plugin does) and answers unnormalised mixtures."""

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(np.ones(k) for k in payoffs.shape[1:])

    def solve_detailed(self, payoffs: np.ndarray) -> SolverResult:
        mixtures = self.solve(payoffs)
        return SolverResult(mixtures=mixtures, metrics=solution_metrics(payoffs, mixtures))


def test_a_solver_overriding_solve_detailed_is_checked_too(tmp_path: Path) -> None:
    _fails(tmp_path, _found(DetailedBad, "detailed"), "detailed", r"seat player_0: the mixture sums to 2, not 1$")


def _joint(kind: str) -> Callable[[tuple[int, ...]], np.ndarray]:
    def make(shape: tuple[int, ...]) -> np.ndarray:
        if kind == "ones":
            return np.ones(shape)
        if kind == "shape":
            return np.full(shape[0], 1.0 / shape[0])
        if kind == "negative":
            if np.prod(shape) == 1:
                return np.ones(shape)
            joint = np.full(shape, 2.0 / (np.prod(shape) - 1))
            joint.flat[-1] = -1.0
            return joint
        if kind == "nan":
            return np.full(shape, np.nan)
        raise AssertionError(kind)

    return make


JOINT_WRONG = {
    "ones": r"answer: the joint distribution sums to 4, not 1$",
    "shape": r"answer: the joint distribution has shape \(1,\), not the meta-game's \(1, 1\)$",
    "negative": r"answer: the joint distribution has a negative probability \(-1 at profile \(1, 1\)\)$",
    "nan": r"answer: the joint distribution has NaN or infinite probabilities$",
}


@pytest.mark.parametrize("kind", sorted(JOINT_WRONG))
def test_a_wrong_joint_distribution_fails_the_run(tmp_path: Path, kind: str) -> None:
    make = _joint(kind)

    class BadJoint(popmarl.JointMetaSolver):
        @attrs.frozen(kw_only=True)
        class Config:
            pass

        def solve_joint(self, payoffs: np.ndarray) -> np.ndarray:
            return make(payoffs.shape[1:])

    _fails(tmp_path, _found(BadJoint, "bad_joint"), "bad_joint", JOINT_WRONG[kind])


def test_a_joint_result_is_checked_when_solve_detailed_is_overridden(tmp_path: Path) -> None:
    class DetailedJoint(popmarl.JointMetaSolver):
        def solve_joint(self, payoffs: np.ndarray) -> np.ndarray:
            return np.ones(payoffs.shape[1:])

        def solve_detailed(self, payoffs: np.ndarray) -> SolverResult:
            joint = self.solve_joint(payoffs)
            return SolverResult(mixtures=tuple(np.full(k, 1.0 / k) for k in joint.shape), joint=joint)

    _fails(tmp_path, _found(DetailedJoint, "detailed_joint"), "detailed_joint", r"joint distribution sums to 4, not 1$")


def test_the_cli_prints_one_line_and_exits_1(bad_solver, run_cli, write_config, tmp_path: Path) -> None:
    dist, _ = bad_solver
    path = write_config(solver={"name": "bad", "params": {"mode": "ones"}})
    result = run_cli("run", path, "--out", tmp_path / "run", pythonpath=[dist.site])
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result
    lines = [line for line in result.stderr.splitlines() if line.startswith("popmarl: error:")]
    assert lines == ["popmarl: error: meta-solver bad gave an invalid answer: seat player_0: the mixture sums to 2, "
                     "not 1"], result
    assert read_summary(tmp_path / "run")["status"] == "failed"


def test_builtin_solvers_still_answer_valid_meta_strategies(tmp_path: Path) -> None:
    for solver in ("uniform", "latest"):
        summary = _run(tmp_path / solver, popmarl.Registries.current(), solver)
        assert summary["status"] == "completed"
        for mixture in summary["meta_strategies"].values():
            assert min(mixture) >= 0 and sum(mixture) == pytest.approx(1.0)
