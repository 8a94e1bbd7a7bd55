"""prd, rm, fictitious_play and uniform_biased: regret falls with iterations, OpenSpiel parity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from solver_helpers import (
    BIASED_RPS,
    MATCHING_PENNIES,
    RPS,
    assert_mixtures,
    regret,
    symmetric,
    zero_sum,
)

from popmarl_solvers import (
    FictitiousPlay,
    ProjectedReplicatorDynamics,
    RegretMatching,
    UniformBiased,
)

RANDOM_ZERO_SUM = zero_sum(np.random.default_rng(3).uniform(-1, 1, (8, 8)))

#: (solver class, few iterations, many iterations, extra params, regret bound on RPS/MP)
DYNAMICS = [
    (ProjectedReplicatorDynamics, 100, 5_000, {"dt": 1e-2}, 1e-3),
    (RegretMatching, 100, 5_000, {}, 1e-3),
    (RegretMatching, 100, 5_000, {"plus": True, "linear_averaging": True}, 1e-3),
    (FictitiousPlay, 30, 3_000, {}, 3e-2),  # ties make FP cycle around the equilibrium
]


@pytest.mark.parametrize(("cls", "few", "many", "params", "bound"), DYNAMICS)
@pytest.mark.parametrize("game", ["random_zero_sum", "biased_rps"])
def test_regret_falls_with_iterations(
    cls, few: int, many: int, params: dict, bound: float, game: str
) -> None:
    payoffs = RANDOM_ZERO_SUM if game == "random_zero_sum" else zero_sum(BIASED_RPS)
    short = cls(iterations=few, symmetric=False, **params).solve_detailed(payoffs)
    long = cls(iterations=many, symmetric=False, **params).solve_detailed(payoffs)
    assert_mixtures(payoffs, long.mixtures)
    assert regret(payoffs, long.mixtures) < regret(payoffs, short.mixtures) / 3
    assert regret(payoffs, long.mixtures) < 0.1
    assert abs(long.metrics["meta_nash_conv"] - regret(payoffs, long.mixtures)) < 1e-12
    assert long.metrics["solver_iterations"] == many


@pytest.mark.parametrize(("cls", "few", "many", "params", "bound"), DYNAMICS)
@pytest.mark.parametrize("matrix", [RPS, MATCHING_PENNIES], ids=["rps", "matching_pennies"])
def test_small_regret_on_classic_games(
    cls, few: int, many: int, params: dict, bound: float, matrix: np.ndarray
) -> None:
    payoffs = zero_sum(matrix)
    for option in (False, "auto"):
        mixtures = cls(iterations=many, symmetric=option, **params).solve(payoffs)
        assert regret(payoffs, mixtures) < bound


@pytest.mark.parametrize("cls", [ProjectedReplicatorDynamics, RegretMatching, FictitiousPlay])
def test_symmetric_option_gives_one_mixture(cls) -> None:
    payoffs = symmetric(np.random.default_rng(2).uniform(-1, 1, (5, 5)))
    result = cls(iterations=500, symmetric=True).solve_detailed(payoffs)
    np.testing.assert_array_equal(result.mixtures[0], result.mixtures[1])
    assert result.metrics["solver_symmetric"] == 1.0
    with pytest.raises(ValueError):
        cls(symmetric=True).solve(np.random.default_rng(0).uniform(size=(2, 3, 3)))


@pytest.mark.parametrize("cls", [ProjectedReplicatorDynamics, RegretMatching, FictitiousPlay, UniformBiased])
@pytest.mark.parametrize("shape", [(2, 1, 1), (2, 1, 4), (2, 6, 3), (3, 2, 3, 4), (4, 2, 2, 2, 2)])
def test_any_shape_gives_mixtures(cls, shape: tuple[int, ...]) -> None:
    payoffs = np.random.default_rng(len(shape)).uniform(-1, 1, shape)
    params = {} if cls is UniformBiased else {"iterations": 50}
    result = cls(**params).solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert {"meta_nash_conv", "solver_method", "solver_iterations"} <= set(result.metrics)
    assert abs(result.metrics["meta_nash_conv"] - regret(payoffs, result.mixtures)) < 1e-12


def test_prd_gamma_floor_and_last_iterate() -> None:
    payoffs = RANDOM_ZERO_SUM
    last = ProjectedReplicatorDynamics(iterations=2_000, dt=0.05, gamma=0.01, average_over_last=1)
    for m in last.solve(payoffs):
        assert m.min() >= 0.01 - 1e-12  # the last iterate lies on the γ-floored simplex
    approx = ProjectedReplicatorDynamics(iterations=2_000, dt=0.05, gamma=0.01, approximate_projection=True)
    assert_mixtures(payoffs, approx.solve(payoffs))


def test_prd_matches_openspiel() -> None:
    pytest.importorskip("open_spiel")
    from open_spiel.python.algorithms.projected_replicator_dynamics import (
        projected_replicator_dynamics,
    )

    rng = np.random.default_rng(0)
    for shape in [(2, 3, 4), (3, 2, 3, 4)]:
        payoffs = rng.uniform(-1, 1, shape)
        for window in (None, 50):
            for approx in (False, True):
                ours = ProjectedReplicatorDynamics(
                    iterations=300,
                    dt=0.05,
                    gamma=1e-2,
                    average_over_last=window,
                    approximate_projection=approx,
                    symmetric=False,
                ).solve(payoffs)
                theirs = projected_replicator_dynamics(
                    list(payoffs),
                    prd_iterations=300,
                    prd_dt=0.05,
                    prd_gamma=1e-2,
                    average_over_last_n_strategies=window,
                    use_approx=approx,
                )
                for a, b in zip(ours, theirs, strict=True):
                    np.testing.assert_allclose(a, b, atol=1e-10)


def test_rm_matches_openspiel_without_initial_regret_offset() -> None:
    """OpenSpiel seeds regrets with 1e-6; with many iterations both averages agree closely."""
    pytest.importorskip("open_spiel")
    from open_spiel.python.algorithms.regret_matching import regret_matching

    payoffs = RANDOM_ZERO_SUM
    ours = RegretMatching(iterations=3_000, symmetric=False).solve(payoffs)
    theirs = regret_matching(list(payoffs), iterations=3_000)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-3)


def test_fictitious_play_is_an_empirical_distribution() -> None:
    payoffs = zero_sum(BIASED_RPS)
    iterations = 99
    for m in FictitiousPlay(iterations=iterations, symmetric=False).solve(payoffs):
        counts = m * (iterations + 1)
        np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)


def test_uniform_biased_weights() -> None:
    payoffs = np.zeros((2, 4, 3))
    x, y = UniformBiased().solve(payoffs)  # geometric, ratio e: OpenSpiel's softmax over indices
    np.testing.assert_allclose(x, np.exp(np.arange(4)) / np.exp(np.arange(4)).sum())
    x, y = UniformBiased(scheme="linear").solve(payoffs)
    np.testing.assert_allclose(y, np.array([1, 2, 3]) / 6)
    x, _ = UniformBiased(ratio=1.0).solve(payoffs)
    np.testing.assert_allclose(x, np.full(4, 0.25))
    big = UniformBiased(ratio=10.0).solve(np.zeros((2, 500, 2)))[0]
    assert np.isfinite(big).all() and big[-1] == big.max()
    assert math.isclose(big.sum(), 1.0)
    with pytest.raises(ValueError):
        UniformBiased(ratio=0.5)
    with pytest.raises(ValueError):
        UniformBiased(scheme="exponential")


@pytest.mark.parametrize(
    ("cls", "bad"),
    [
        (ProjectedReplicatorDynamics, {"dt": 0.0}),
        (ProjectedReplicatorDynamics, {"gamma": 1.0}),
        (ProjectedReplicatorDynamics, {"iterations": 0}),
        (RegretMatching, {"iterations": -1}),
        (RegretMatching, {"gamma": -0.1}),
        (FictitiousPlay, {"iterations": -1}),
    ],
)
def test_config_ranges(cls, bad: dict) -> None:
    with pytest.raises(ValueError):
        cls(**bad)


@pytest.mark.parametrize("shape", [(3, 4, 5, 6), (4, 3, 2, 4, 3)])
def test_flat_deviations_of_n_player_games_equal_the_core_contraction(shape):
    """The iterative solvers' inner loop (one mat-vec per player against the others'
    outer-product mixture) gives every player's deviation payoffs."""
    from popmarl.gametheory.metagame import deviation_payoffs
    from popmarl_solvers.games import MetaGame

    rng = np.random.default_rng(0)
    payoffs = rng.normal(size=shape)
    mixtures = [rng.dirichlet(np.ones(k)) for k in shape[1:]]
    game = MetaGame(payoffs)
    flat = game.flat_deviations(np.concatenate(mixtures))
    for got, want in zip(game.split(flat), deviation_payoffs(payoffs, mixtures), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
