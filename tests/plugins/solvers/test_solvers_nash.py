"""The ``nash`` solver: every answer checked by its regret, computed here independently."""

from __future__ import annotations

import numpy as np
import pytest
from solver_helpers import (
    RPS,
    assert_mixtures,
    degenerate_games,
    regret,
    regrets,
    symmetric,
    zero_sum,
)

from popmarl_solvers import Nash, NashConfig
from popmarl_solvers.gambit import gambit_equilibria, strategic_game
from popmarl_solvers.lemke_howson import lemke_howson, lemke_howson_exact
from popmarl_solvers.support_search import pure_equilibrium


@pytest.mark.parametrize(
    ("rows", "cols"),
    [
        (1, 1),
        (1, 7),
        (7, 1),
        (2, 2),
        (3, 5),
        (10, 10),
        (25, 40),
        (50, 50),
        (100, 100),
        (200, 200),
        (200, 150),
    ],
)
def test_zero_sum_is_exact(rows: int, cols: int) -> None:
    rng = np.random.default_rng(rows * 1000 + cols)
    payoffs = zero_sum(rng.uniform(-1, 1, (rows, cols)))
    result = Nash().solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert regret(payoffs, result.mixtures) <= 1e-8
    assert result.metrics["solver_method"] in ("zero_sum_lp", "trivial")
    assert abs(result.metrics["meta_nash_conv"] - regret(payoffs, result.mixtures)) < 1e-12


def test_constant_sum_and_scaled_payoffs() -> None:
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (30, 20))
    payoffs = np.stack([1000.0 * a + 3.0, 5.0 - 1000.0 * a])  # constant-sum, large scale
    result = Nash().solve_detailed(payoffs)
    assert result.metrics["solver_method"] == "zero_sum_lp"
    assert regret(payoffs, result.mixtures) <= 1e-8 * 2000.0


@pytest.mark.parametrize("seed", range(40))
def test_general_sum_is_exact(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(2, 11, size=2)
    payoffs = rng.uniform(-1, 1, (2, rows, cols))
    result = Nash().solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert regret(payoffs, result.mixtures) <= 1e-6
    assert regret(payoffs, result.mixtures) <= 1e-8  # what the solver actually promises
    assert "lemke_howson" in str(result.metrics["solver_method"])


def test_general_sum_large_game() -> None:
    rng = np.random.default_rng(11)
    payoffs = rng.uniform(-1, 1, (2, 120, 100))
    result = Nash().solve_detailed(payoffs)
    assert regret(payoffs, result.mixtures) <= 1e-8


def test_long_lemke_howson_paths_do_not_stall() -> None:
    """On this game the path from label 0 takes ~15 000 pivots, others under 100: the
    labels are raced, so the answer comes from a short one."""
    rng = np.random.default_rng(2024)
    for n in (6, 50, 100, 200):
        rng.uniform(-1, 1, (n, n))
    for n in (6, 10, 25, 50, 100):
        payoffs = rng.uniform(-1, 1, (2, n, n))
    result = Nash().solve_detailed(payoffs)
    assert regret(payoffs, result.mixtures) <= 1e-8
    assert result.metrics["solver_iterations"] < 1_000


@pytest.mark.parametrize("name", sorted(degenerate_games(np.random.default_rng(0))))
def test_degenerate_games(name: str) -> None:
    payoffs = degenerate_games(np.random.default_rng(0))[name]
    result = Nash(symmetric=False).solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert regret(payoffs, result.mixtures) <= 1e-9, result.metrics


@pytest.mark.parametrize("name", sorted(degenerate_games(np.random.default_rng(1))))
def test_exact_lemke_howson_from_every_label(name: str) -> None:
    payoffs = degenerate_games(np.random.default_rng(1))[name]
    a, b = payoffs
    for label in range(sum(a.shape)):
        found = next(lemke_howson_exact(a, b, [label]), None)
        assert found is not None
        x, y, _ = found
        assert regret(payoffs, (x, y)) <= 1e-12, (name, label)


def test_float_lemke_howson_answers_are_checked() -> None:
    """Whatever the float path returns from any label, ``nash`` only keeps a verified one."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        payoffs = rng.integers(0, 2, (2, 5, 5)).astype(float)
        for x, y, _ in lemke_howson(*payoffs, labels=range(10)):
            assert x.min() >= 0 and y.min() >= 0
        assert regret(payoffs, Nash(symmetric=False).solve(payoffs)) <= 1e-9


def test_bad_float_answers_fall_back_to_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """A floating-point answer above tolerance is not returned: exact LH takes over."""
    import popmarl_solvers.nash as nash_module

    def wrong(a, b, labels, max_pivots):  # a "path" that ends at a non-equilibrium
        yield np.eye(a.shape[0])[0], np.eye(a.shape[1])[0], 1

    monkeypatch.setattr(nash_module, "lemke_howson", wrong)
    payoffs = degenerate_games(np.random.default_rng(2))["ties_three_values"]
    result = Nash(symmetric=False).solve_detailed(payoffs)
    assert result.metrics["solver_method"] == "lemke_howson_exact"
    assert regret(payoffs, result.mixtures) <= 1e-12
    sym = symmetric(np.random.default_rng(3).uniform(-1, 1, (5, 5)))
    result = Nash(symmetric=True).solve_detailed(sym)
    assert result.metrics["solver_method"] == "symmetric_lemke_howson_exact"
    assert regret(sym, result.mixtures) <= 1e-12


def test_symmetric_games_give_one_mixture() -> None:
    rng = np.random.default_rng(3)
    for _ in range(10):
        payoffs = symmetric(rng.uniform(-1, 1, (6, 6)))
        for option in (True, "auto"):
            result = Nash(symmetric=option).solve_detailed(payoffs)
            x, y = result.mixtures
            np.testing.assert_array_equal(x, y)
            assert regret(payoffs, result.mixtures) <= 1e-8
            assert str(result.metrics["solver_method"]).startswith("symmetric_")
    rps = Nash(symmetric=True).solve(symmetric(RPS))
    np.testing.assert_allclose(rps[0], np.full(3, 1 / 3), atol=1e-12)


def test_symmetric_degenerate_game() -> None:
    a = np.repeat(np.repeat(np.array([[1.0, 0.0], [0.0, 1.0]]), 2, 0), 2, 1)  # duplicates
    for payoffs in (symmetric(a), symmetric(np.zeros((3, 3))), symmetric(np.ones((4, 4)))):
        x, y = Nash(symmetric=True).solve(payoffs)
        np.testing.assert_array_equal(x, y)
        assert regret(payoffs, (x, y)) <= 1e-9


def test_symmetric_true_rejects_asymmetric_games() -> None:
    with pytest.raises(ValueError, match="symmetric"):
        Nash(symmetric=True).solve(np.random.default_rng(0).uniform(size=(2, 3, 3)))


@pytest.mark.parametrize("seed", range(12))
def test_three_players(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    size = int(rng.integers(3, 5))
    payoffs = rng.uniform(-1, 1, (3, size, size, size))
    result = Nash().solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    reached = regret(payoffs, result.mixtures)
    assert reached <= result.metrics["solver_tolerance"] <= 1e-3
    assert abs(result.metrics["meta_nash_conv"] - reached) < 1e-12


def test_n_player_mixed_only_game() -> None:
    """Three-player matching pennies (Jordan 1993): its only equilibrium is fully mixed."""
    payoffs = np.zeros((3, 2, 2, 2))
    for s in np.ndindex(2, 2, 2):
        payoffs[(0, *s)] = 1.0 if s[0] == s[1] else -1.0  # 1 matches 2
        payoffs[(1, *s)] = 1.0 if s[1] == s[2] else -1.0  # 2 matches 3
        payoffs[(2, *s)] = 1.0 if s[2] != s[0] else -1.0  # 3 mismatches 1
    result = Nash().solve_detailed(payoffs)
    assert str(result.metrics["solver_method"]).startswith("gambit_")
    assert regret(payoffs, result.mixtures) <= 1e-9
    for m in result.mixtures:
        np.testing.assert_allclose(m, [0.5, 0.5], atol=1e-9)


def test_four_players_and_uneven_sizes() -> None:
    rng = np.random.default_rng(9)
    for shape in [(4, 2, 2, 2, 2), (3, 2, 3, 4), (3, 1, 4, 2)]:
        payoffs = rng.uniform(-1, 1, shape)
        result = Nash().solve_detailed(payoffs)
        assert_mixtures(payoffs, result.mixtures)
        assert regret(payoffs, result.mixtures) <= 1e-6


def test_n_player_fallback_reports_what_it_reached() -> None:
    """With Gambit and the support search switched off, the answer still comes, with its real regret."""
    payoffs = np.random.default_rng(4).uniform(-1, 1, (3, 3, 3, 3))
    result = Nash(gambit=False, max_support_profiles=0, replicator_iterations=2_000).solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert str(result.metrics["solver_method"]).startswith(("replicator", "pure"))
    assert abs(result.metrics["meta_nash_conv"] - regret(payoffs, result.mixtures)) < 1e-12


def test_trivial_and_invalid_inputs() -> None:
    assert Nash().solve(np.zeros((2, 1, 1))) == (np.ones(1), np.ones(1))
    assert Nash().solve(np.zeros((3, 1, 1, 1)))[2].tolist() == [1.0]
    with pytest.raises(ValueError):
        Nash().solve(np.zeros((3, 2, 2)))
    with pytest.raises(ValueError):
        Nash().solve(np.array([[[np.nan]], [[0.0]]]))


def test_config_is_validated() -> None:
    assert Nash().config == NashConfig()
    assert Nash(config=NashConfig(tol=1e-10)).config.tol == 1e-10
    with pytest.raises(ValueError):
        NashConfig(tol=-1.0)
    with pytest.raises(ValueError):
        NashConfig(symmetric="sometimes")
    with pytest.raises(TypeError):
        NashConfig(1e-8)  # keyword-only
    with pytest.raises(TypeError):
        Nash(no_such_option=1)


def test_regret_helper_is_independent_and_right() -> None:
    """Sanity of the test's own regret: matching pennies at (H, H) vs the uniform profile."""
    payoffs = zero_sum(np.array([[1.0, -1.0], [-1.0, 1.0]]))
    np.testing.assert_allclose(regrets(payoffs, (np.array([1.0, 0]), np.array([1.0, 0]))), [0.0, 2.0])
    assert regret(payoffs, (np.full(2, 0.5), np.full(2, 0.5))) == 0.0


@pytest.mark.parametrize(("players", "size"), [(3, 8), (3, 10), (4, 5)])
def test_gambit_answers_random_n_player_games(players: int, size: int) -> None:
    """Random n-player games with no pure equilibrium to stop at go through Gambit."""
    rng = np.random.default_rng(players * 100 + size)
    payoffs = rng.uniform(-3, 5, (players, *[size] * players))
    while pure_equilibrium(payoffs, 1e-9) is not None:
        payoffs = rng.uniform(-3, 5, (players, *[size] * players))
    result = Nash().solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert str(result.metrics["solver_method"]).startswith("gambit_")
    assert regret(payoffs, result.mixtures) <= 1e-8 * 8
    assert abs(result.metrics["meta_nash_conv"] - regret(payoffs, result.mixtures)) < 1e-12


def test_degenerate_n_player_game_still_answers() -> None:
    """Constant and duplicated-strategy payoffs: every profile ties, yet an equilibrium comes."""
    payoffs = np.ones((3, 3, 3, 3))
    payoffs[0, 1] = payoffs[0, 0]
    result = Nash().solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert regret(payoffs, result.mixtures) <= 1e-12
    tied = np.random.default_rng(3).integers(0, 2, (3, 4, 4, 4)).astype(float)
    result = Nash().solve_detailed(tied)
    assert regret(tied, result.mixtures) <= 1e-6


def test_gambit_solves_a_15_cubed_game_exactly() -> None:
    """The issue's target: a random 15x15x15 game, regret <= 1e-8 (well under 1 s here)."""
    rng = np.random.default_rng(15)
    payoffs = rng.uniform(0, 1, (3, 15, 15, 15))
    while pure_equilibrium(payoffs, 1e-9) is not None:
        payoffs = rng.uniform(0, 1, (3, 15, 15, 15))
    result = Nash().solve_detailed(payoffs)
    assert str(result.metrics["solver_method"]).startswith("gambit_")
    assert regret(payoffs, result.mixtures) <= 1e-8


def test_kuhn3_meta_game_where_ipa_and_default_gnm_fail() -> None:
    """3-player Kuhn's 12x12x12 PSRO meta-game: IPA finds nothing and GNM from the default
    (centroid) perturbation finds nothing; this took ~60-90 s through support search and
    replicator dynamics and stopped at regret 1e-3. Logit tracing answers at once."""
    from pathlib import Path

    payoffs = np.load(Path(__file__).parent / "data" / "kuhn3_meta_12.npy")
    result = Nash().solve_detailed(payoffs)
    assert str(result.metrics["solver_method"]).startswith("gambit_logit")  # not the slow fallbacks
    assert regret(payoffs, result.mixtures) <= result.metrics["solver_tolerance"] <= 1e-5


@pytest.mark.parametrize("shape", [(3, 2, 3, 4), (4, 3, 2, 2, 5), (2, 4, 3)])
def test_gambit_game_from_nfg_text_has_the_payoffs(shape: tuple[int, ...]) -> None:
    """The .nfg text lists profiles with player 1 fastest: Gambit reads back every payoff
    (to the 2^-30 rounding) in each player's own axis order, as ``from_arrays`` does."""
    import pygambit

    payoffs = np.random.default_rng(len(shape)).uniform(0, 1, shape)
    game = strategic_game(payoffs)
    read = np.array([np.asarray(a, dtype=float) for a in game.to_arrays(dtype=float)])
    assert read.shape == payoffs.shape
    np.testing.assert_allclose(read, payoffs, rtol=0, atol=2.0**-31)
    reference = pygambit.StrategicGame.from_arrays(*payoffs).to_arrays(dtype=float)
    np.testing.assert_allclose(read, np.array([np.asarray(a, dtype=float) for a in reference]), rtol=0, atol=2.0**-31)


@pytest.mark.parametrize("method", ["logit", "ipa", "gnm"])
def test_each_gambit_method_answers_a_random_game(method: str) -> None:
    """Every Gambit route works on its own (GNM from its seeded random perturbation)."""
    payoffs = np.random.default_rng(21).uniform(0, 1, (3, 4, 4, 4))
    found = gambit_equilibria(payoffs, method)  # type: ignore[arg-type]
    assert found
    assert min(regret(payoffs, m) for m in found) <= 1e-5


class TickingTime:
    """``time`` for the solver modules: each reading of the clock is 10 ms later than the
    last, so a deadline passes after a fixed number of readings, however fast the machine."""

    def __init__(self) -> None:
        self.now, self.readings = 0.0, 0

    def monotonic(self) -> float:
        self.now += 1e-2
        self.readings += 1
        return self.now


def test_n_player_fallbacks_stop_at_max_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Gambit, support search and replicator dynamics give up after ``max_seconds``
    with the best answer seen (and its real regret), instead of running for minutes."""
    from pathlib import Path

    from popmarl_solvers import nash as nash_module
    from popmarl_solvers import support_search as support_search_module

    clock = TickingTime()
    monkeypatch.setattr(nash_module, "time", clock)
    monkeypatch.setattr(support_search_module, "time", clock)
    payoffs = np.load(Path(__file__).parent / "data" / "kuhn3_meta_12.npy")
    result = Nash(gambit=False, max_seconds=1.0).solve_detailed(payoffs)
    assert 100 <= clock.readings <= 105  # stopped by the deadline, a reading or a few past it
    assert result.metrics["solver_method"] in ("replicator", "replicator_polished", "support_search")
    assert_mixtures(payoffs, result.mixtures)
    assert abs(result.metrics["meta_nash_conv"] - regret(payoffs, result.mixtures)) < 1e-12
    with pytest.raises(ValueError, match="max_seconds"):
        NashConfig(max_seconds=0)


@pytest.mark.parametrize("size", [9, 12])
def test_degenerate_meta_game_equilibrium_is_polished_to_machine_precision(size: int) -> None:
    """3-player Kuhn PSRO meta-games have a continuum of equilibria on logit's supports:
    Newton (hybr) slid along it to negative mixtures and the answer stayed at logit's
    ~5e-7; minimum-norm Newton steps stay by the start and reach round-off."""
    from pathlib import Path

    payoffs = np.load(Path(__file__).parent / "data" / f"kuhn3_meta_{size}.npy")
    result = Nash().solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert result.metrics["solver_method"] == "gambit_logit_polished"
    assert regret(payoffs, result.mixtures) <= 1e-12


def test_large_n_player_tables_are_solved_on_subgames() -> None:
    """Above ``restrict_above`` strategies, double oracle over subgames: a 3-player Leduc
    PSRO meta-game (20 policies a seat, small supports) is solved on subgames, and the
    answer is an equilibrium of the whole table (its regret is measured there). A random
    game, whose supports are large, gives up on subgames and is solved whole;
    ``restrict_above: 0`` always solves it whole."""
    from pathlib import Path

    payoffs = np.load(Path(__file__).parent / "data" / "leduc3_meta_20.npy")
    result = Nash().solve_detailed(payoffs)
    assert str(result.metrics["solver_method"]).startswith("restricted_gambit_logit")
    assert 1 <= result.metrics["solver_iterations"] < 20
    assert regret(payoffs, result.mixtures) <= 1e-12
    whole = Nash(restrict_above=0).solve_detailed(payoffs)
    assert not str(whole.metrics["solver_method"]).startswith("restricted_")
    assert regret(payoffs, whole.mixtures) <= 1e-12
    rng = np.random.default_rng(20)
    random_game = rng.uniform(-1, 1, (3, 20, 20, 20))
    while pure_equilibrium(random_game, 1e-9) is not None:
        random_game = rng.uniform(-1, 1, (3, 20, 20, 20))
    result = Nash().solve_detailed(random_game)
    assert not str(result.metrics["solver_method"]).startswith("restricted_")
    assert regret(random_game, result.mixtures) <= 1e-8
    with pytest.raises(ValueError, match="restrict_above"):
        NashConfig(restrict_above=-1)


def test_gambit_ipa_failure_falls_through() -> None:
    """A 3-player Kuhn PSRO meta-game (9 policies each) on which Gambit's IPA finds nothing."""
    from pathlib import Path

    payoffs = np.load(Path(__file__).parent / "data" / "kuhn3_meta_9.npy")
    result = Nash().solve_detailed(payoffs)
    assert_mixtures(payoffs, result.mixtures)
    assert regret(payoffs, result.mixtures) <= result.metrics["solver_tolerance"]
