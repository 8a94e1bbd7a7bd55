"""α-Rank: OpenSpiel's stationary distribution to 1e-6, answers where it fails, speed."""

from __future__ import annotations

import contextlib
import io
import time
import warnings

import numpy as np
import pytest
from solver_helpers import assert_mixtures, regret, symmetric, zero_sum

from popmarl_solvers import AlphaRank, AlphaRankConfig
from popmarl_solvers.markov import gth, stationary_distribution


def _openspiel_pi(tables: list[np.ndarray], **kwargs) -> np.ndarray | None:
    """OpenSpiel's ``alpharank.compute``'s π, or None where its eigen-solver gives up."""
    from open_spiel.python.egt import alpharank

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # its overflowing exp()s
        try:
            return alpharank.compute(tables, **kwargs)[2]
        except ValueError:
            return None


def _ours_joint(payoffs: np.ndarray, single: bool, **config) -> np.ndarray:
    solver = AlphaRank(symmetric=single, **config)
    c = solver.config
    return solver.stationary(payoffs, single, c.alpha, c.infinite_alpha, c.epsilon)[0]


@pytest.mark.parametrize("alpha", [0.1, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("local", [True, False])
def test_single_population_matches_openspiel(alpha: float, local: bool) -> None:
    pytest.importorskip("open_spiel")
    rng = np.random.default_rng(int(alpha * 10) + local)
    for n in (2, 5, 8):
        a = rng.uniform(-1, 1, (n, n))
        for m in (a, a - a.T):  # general and constant-sum (OpenSpiel's closed form)
            theirs = _openspiel_pi([m], alpha=alpha, m=20, use_local_selection_model=local)
            ours = _ours_joint(symmetric(m), True, alpha=alpha, population_size=20, local_selection=local)
            if theirs is not None:
                np.testing.assert_allclose(ours, theirs, atol=1e-6)
            assert abs(ours.sum() - 1.0) < 1e-12 and ours.min() >= 0.0


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 6, 6), (3, 2, 3, 4), (3, 3, 3, 3)])
@pytest.mark.parametrize("alpha", [0.1, 1.0, 5.0])
def test_multi_population_matches_openspiel(shape: tuple[int, ...], alpha: float) -> None:
    pytest.importorskip("open_spiel")
    payoffs = np.random.default_rng(sum(shape)).uniform(-1, 1, shape)
    theirs = _openspiel_pi(list(payoffs), alpha=alpha, m=50)
    assert theirs is not None
    ours = _ours_joint(payoffs, False, alpha=alpha, population_size=50)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    # The solver's answer is the per-population marginal of that joint distribution.
    mixtures = AlphaRank(alpha=alpha, symmetric=False).solve(payoffs)
    joint = theirs.reshape(shape[1:])
    for k, mixture in enumerate(mixtures):
        axes = tuple(j for j in range(joint.ndim) if j != k)
        np.testing.assert_allclose(mixture, joint.sum(axis=axes), atol=1e-6)


def test_infinite_alpha_matches_openspiel() -> None:
    pytest.importorskip("open_spiel")
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (6, 6))
    theirs = _openspiel_pi([a], use_inf_alpha=True, inf_alpha_eps=0.01)
    ours = _ours_joint(symmetric(a), True, infinite_alpha=True, epsilon=0.01)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    payoffs = rng.uniform(-1, 1, (2, 4, 5))
    theirs = _openspiel_pi(list(payoffs), use_inf_alpha=True, inf_alpha_eps=1e-3)
    ours = _ours_joint(payoffs, False, infinite_alpha=True, epsilon=1e-3)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 5, 5), (2, 3, 4)])
def test_epsilon_sweep_matches_openspiel(shape: tuple[int, ...]) -> None:
    pytest.importorskip("open_spiel")
    from open_spiel.python.egt import alpharank

    payoffs = np.random.default_rng(8).uniform(-1, 1, shape)
    single = shape[1] == shape[2]
    if single:
        payoffs = symmetric(payoffs[0])
    tables = [payoffs[0]] if single else list(payoffs)
    with contextlib.redirect_stdout(io.StringIO()):
        theirs, their_eps = alpharank.sweep_pi_vs_epsilon(tables, return_epsilon=True)
    result = AlphaRank(sweep="epsilon", symmetric=single).solve_detailed(payoffs)
    our_eps = result.metrics["alpharank_epsilon"]
    assert result.metrics["alpharank_converged"] == 1.0
    ours = _ours_joint(payoffs, single, infinite_alpha=True, epsilon=our_eps)
    # Same ε schedule: the same ε where OpenSpiel's eigen-solver holds, the same π there.
    at_our_eps = _openspiel_pi(tables, use_inf_alpha=True, inf_alpha_eps=our_eps)
    np.testing.assert_allclose(ours, at_our_eps, atol=1e-6)
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
    if their_eps == our_eps:
        np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_alpha_sweep_matches_openspiel() -> None:
    pytest.importorskip("open_spiel")
    from open_spiel.python.egt import alpharank

    a = np.random.default_rng(0).uniform(-1, 1, (4, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs, their_alpha = alpharank.sweep_pi_vs_alpha([a], return_alpha=True)
    result = AlphaRank(sweep="alpha").solve_detailed(symmetric(a))
    assert result.metrics["alpharank_alpha"] == pytest.approx(their_alpha)
    np.testing.assert_allclose(result.mixtures[0], theirs, atol=1e-6)


def test_answers_where_the_eigen_solver_gives_up() -> None:
    """Large α: rates span e^-700; OpenSpiel raises, the answer here is still exact."""
    payoffs = np.random.default_rng(1).uniform(-1, 1, (2, 6, 6))
    result = AlphaRank(alpha=1e4, symmetric=False).solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert result.metrics["alpharank_closed_classes"] >= 1
    assert abs(result.metrics["meta_nash_conv"] - regret(payoffs, result.mixtures)) < 1e-12


def test_dominant_profile_takes_all_mass() -> None:
    """Prisoner's dilemma: defection is the unique sink, so α-Rank puts its mass there."""
    pd = np.array([[3.0, 0.0], [5.0, 1.0]])
    for payoffs, option in ((symmetric(pd), True), (symmetric(pd), False)):
        x, y = AlphaRank(alpha=50.0, symmetric=option).solve(payoffs)
        np.testing.assert_allclose(x, [0.0, 1.0], atol=1e-9)
        np.testing.assert_allclose(y, [0.0, 1.0], atol=1e-9)


def test_rps_is_uniform() -> None:
    rps = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
    for option in (True, False):
        for mixture in AlphaRank(symmetric=option).solve(zero_sum(rps)):
            np.testing.assert_allclose(mixture, np.full(3, 1 / 3), atol=1e-9)


def test_gth_and_closed_classes() -> None:
    rng = np.random.default_rng(0)
    rates = rng.uniform(size=(7, 7))
    pi = gth(rates)
    generator = rates - np.diag(np.diag(rates)) - np.diag(rates.sum(1) - np.diag(rates))
    np.testing.assert_allclose(pi @ generator, 0.0, atol=1e-14)
    # Two absorbing states 0 and 2 reachable from 1: not unique, so their average.
    rows, cols = np.array([1, 1]), np.array([0, 2])
    pi, closed = stationary_distribution(rows, cols, np.zeros(2), 3)
    assert closed == 2
    np.testing.assert_allclose(pi, [0.5, 0.0, 0.5])


def test_fast_on_large_populations() -> None:
    rng = np.random.default_rng(0)
    single = symmetric(rng.uniform(-1, 1, (100, 100)))
    start = time.perf_counter()
    assert_mixtures(single, AlphaRank(alpha=1.0).solve(single))
    assert time.perf_counter() - start < 2.0
    two = rng.uniform(-1, 1, (2, 20, 20))  # 400 joint profiles
    start = time.perf_counter()
    mixtures = AlphaRank(alpha=1.0).solve(two)
    assert time.perf_counter() - start < 5.0  # OpenSpiel: 5-25 s (python loops + eig)
    assert_mixtures(two, mixtures)


def test_config_validation() -> None:
    assert AlphaRank().config == AlphaRankConfig()
    for bad in ({"alpha": 0.0}, {"population_size": 1}, {"epsilon": 1.0}, {"sweep": "beta"}):
        with pytest.raises(ValueError):
            AlphaRankConfig(**bad)
