"""The plugin's entry points: every solver is found by name and honours the contract."""

from __future__ import annotations

import numpy as np
import pytest
from solver_helpers import assert_mixtures, regret

import popmarl
from popmarl.interfaces.solver import MetaSolver, SolverResult

NAMES = ["nash", "prd", "rm", "alpharank", "fictitious_play", "uniform_biased", "cce", "ce"]
FAST = {"prd": {"iterations": 200}, "rm": {"iterations": 200}, "fictitious_play": {"iterations": 200}}


@pytest.mark.parametrize("name", NAMES)
def test_registered_and_loadable(name: str) -> None:
    assert name in popmarl.solvers.names()
    cls = popmarl.solvers.load(name)
    assert issubclass(cls, MetaSolver)
    solver = cls()
    assert solver.config == cls.Config()
    assert isinstance(cls(config=cls.Config()), cls)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(2, 1, 1), (2, 1, 3), (2, 4, 4), (2, 5, 2), (3, 1, 1, 1), (3, 2, 3, 2)])
def test_contract(name: str, shape: tuple[int, ...]) -> None:
    payoffs = np.random.default_rng(sum(shape)).uniform(-1, 1, shape)
    solver = popmarl.solvers.load(name)(**FAST.get(name, {}))
    result = solver.solve_detailed(payoffs)
    assert isinstance(result, SolverResult)
    assert_mixtures(payoffs, result.mixtures)
    assert_mixtures(payoffs, solver.solve(payoffs))
    metrics = result.metrics
    assert isinstance(metrics["solver_method"], str)
    assert metrics["solver_iterations"] >= 0
    assert abs(metrics["meta_nash_conv"] - regret(payoffs, result.mixtures)) < 1e-12


@pytest.mark.parametrize("name", NAMES)
def test_rejects_bad_payoffs(name: str) -> None:
    solver = popmarl.solvers.load(name)()
    for bad in (np.zeros((2, 3)), np.zeros((3, 2, 2)), np.full((2, 2, 2), np.inf)):
        with pytest.raises(ValueError):
            solver.solve(bad)
