"""Ratings: Elo agrees with OpenSpiel's to round-off; Nash averaging is the maximum-entropy
equilibrium (OpenSpiel's where its program solves, and by its properties); α-Rank's mass."""

from __future__ import annotations

import numpy as np
import pytest

from popmarl.gametheory.ratings import elo, head_to_head
from popmarl_solvers import AlphaRank
from popmarl_solvers.ratings import alpharank_ratings, nash_averaging, nash_averaging_avt


def _random_counts(rng: np.random.Generator, n: int, with_draws: bool) -> tuple[np.ndarray, np.ndarray | None]:
    wins = rng.integers(0, 30, (n, n))
    wins[rng.random((n, n)) < 0.3] = 0  # some pairs never won (smoothing keeps the fit finite)
    np.fill_diagonal(wins, 0)
    if not with_draws:
        return wins, None
    draws = np.triu(rng.integers(0, 8, (n, n)), 1)
    return wins, draws + draws.T


def test_elo_matches_openspiel_on_random_integer_matrices() -> None:
    pytest.importorskip("open_spiel")
    from open_spiel.python.algorithms.elo import compute_ratings_from_matrices

    rng = np.random.default_rng(0)
    worst = 0.0
    for trial in range(200):
        wins, draws = _random_counts(rng, int(rng.integers(2, 13)), with_draws=trial % 2 == 1)
        ours, theirs = elo(wins, draws), compute_ratings_from_matrices(wins, draws)
        worst = max(worst, float(np.abs(ours - theirs).max()))
        assert ours.min() == 0.0
    assert worst < 1e-6, worst


def test_elo_anchor_shifts_only_and_orders_by_strength() -> None:
    wins = np.array([[0, 8, 9], [2, 0, 7], [1, 3, 0]])
    lowest, anchored = elo(wins), elo(wins, anchor=1)
    assert anchored[1] == 0.0
    np.testing.assert_allclose(lowest - lowest[1], anchored, atol=1e-9)
    assert lowest[0] > lowest[1] > lowest[2] == 0.0
    with pytest.raises(ValueError, match="anchor 3"):
        elo(wins, anchor=3)
    with pytest.raises(ValueError, match="symmetric"):
        elo(wins, np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]]))


def test_head_to_head_adds_both_seat_orders_or_builds_the_bipartite_table() -> None:
    w = np.array([[5, 3], [1, 0]])
    d = np.array([[0, 2], [4, 0]])
    lost = np.array([[5, 1], [2, 10]])
    won, drawn = head_to_head(w, d, lost, shared=True)
    # 0 beat 1 three times at seat 0 and twice at seat 1 (1 at seat 0 lost twice to 0).
    np.testing.assert_array_equal(won, [[0, 3 + 2], [1 + 1, 0]])
    np.testing.assert_array_equal(drawn, [[0, 6], [6, 0]])
    won, drawn = head_to_head(w, d, lost, shared=False)
    np.testing.assert_array_equal(won[:2, 2:], w)
    np.testing.assert_array_equal(won[2:, :2], lost.T)
    assert not won[:2, :2].any() and not won[2:, 2:].any()
    np.testing.assert_array_equal(drawn, drawn.T)


def _antisymmetric(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.normal(size=(n, n))
    return m - m.T


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def test_nash_averaging_matches_openspiel_and_is_an_equilibrium() -> None:
    pytest.importorskip("cvxpy")
    pytest.importorskip("open_spiel")
    from open_spiel.python.algorithms import nash_averaging as reference

    rng = np.random.default_rng(1)
    for _ in range(10):
        a = _antisymmetric(rng, int(rng.integers(2, 9)))
        p, rating = nash_averaging(a)
        theirs = reference._max_entropy_symmetric_nash(a, eps=0.0).ravel()
        np.testing.assert_allclose(p, theirs, atol=1e-6)
        assert rating.max() <= 1e-6  # no policy gains against the equilibrium: regret
        np.testing.assert_allclose(rating, a @ p)
        # Agent-vs-task on scores whose columns already span [0, 1] (OpenSpiel rescales them).
        s = rng.random((a.shape[0], a.shape[0] + 1))
        s = (s - s.min(axis=0)) / np.ptp(s, axis=0)
        (x, y), (agents, tasks) = nash_averaging_avt(s)
        (xo, yo), (agents_o, _) = reference.nash_averaging_avt_matrix(s)
        np.testing.assert_allclose(x, xo.ravel(), atol=1e-4)  # OpenSpiel's default tolerances
        np.testing.assert_allclose(y, yo.ravel(), atol=1e-4)
        np.testing.assert_allclose(agents, agents_o.ravel(), atol=1e-4)
        value = x @ s @ y
        assert agents.max() - value <= 1e-6 and value + tasks.max() <= 1e-6  # both regrets
        assert _entropy(x) >= _entropy(np.clip(xo.ravel(), 0, None)) - 1e-6


def test_nash_averaging_is_the_maximum_entropy_equilibrium_of_a_degenerate_game() -> None:
    """Rock-paper-scissors with a copy of rock: every split of rock's weight between the
    two copies is an equilibrium; the maximum-entropy one halves it (Nash averaging's
    invariance to copies). A policy beaten by everything gets weight 0 and rating -1."""
    pytest.importorskip("cvxpy")
    rps = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)
    a = np.zeros((5, 5))
    a[:4, :4] = rps[np.ix_([0, 0, 1, 2], [0, 0, 1, 2])]
    a[:4, 4], a[4, :4] = 1.0, -1.0
    p, rating = nash_averaging(a)
    np.testing.assert_allclose(p, [1 / 6, 1 / 6, 1 / 3, 1 / 3, 0], atol=1e-6)
    np.testing.assert_allclose(rating, [0, 0, 0, 0, -1], atol=1e-6)
    # Any other equilibrium (all of rock's weight on one copy) has lower entropy.
    assert _entropy(p) > _entropy(np.array([1 / 3, 1 / 3, 1 / 3])) + 0.1
    with pytest.raises(ValueError, match="antisymmetric"):
        nash_averaging(np.ones((2, 2)))


def test_alpharank_ratings_are_the_solvers_stationary_mass() -> None:
    rng = np.random.default_rng(2)
    m = rng.normal(size=(4, 4))
    (pi,) = alpharank_ratings(np.stack([m, m.T]), symmetric=True)
    assert pi.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(pi, AlphaRank(symmetric=True).solve(np.stack([m, m.T]))[0], atol=1e-12)
    # A policy dominated by all others holds (almost) no mass; a dominant one almost all.
    dominated = np.array([[0, -1, -1], [1, 0, 0], [1, 0, 0]], dtype=float)
    (pi,) = alpharank_ratings(np.stack([dominated, dominated.T]), symmetric=True)
    assert pi[0] < 1e-6 and pi[1] == pytest.approx(pi[2])
    r0, r1 = rng.normal(size=(2, 3, 2))
    rows, cols = alpharank_ratings(np.stack([r0, r1]), symmetric=False)
    np.testing.assert_allclose(rows, AlphaRank(symmetric=False).solve(np.stack([r0, r1]))[0], atol=1e-12)
    assert rows.sum() == pytest.approx(1.0) and cols.sum() == pytest.approx(1.0)
