"""cce and ce: answers are (coarse) correlated equilibria, each objective reaches its known
optimum, max Gini matches OpenSpiel's JPSRO solvers, epsilon loosens, configs are checked,
n players and degenerate games work, and a failed solve falls back to an equilibrium."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from solver_helpers import RPS, assert_mixtures, regret, zero_sum

import popmarl
from popmarl.gametheory.metagame import ce_gains, ce_gap, cce_gains, cce_gap, marginals
from popmarl.config.conversion import structure_attrs
from popmarl_solvers import correlated
from popmarl_solvers.correlated import CoarseCorrelated, Correlated, CorrelatedConfig, deviation_gains

OBJECTIVES = ["max_gini", "max_entropy", "max_welfare"]
SOLVERS = {"cce": CoarseCorrelated, "ce": Correlated}
GAP = {"cce": cce_gap, "ce": ce_gap}

CHICKEN_ROW = np.array([[6.0, 2.0], [7.0, 0.0]])  # 0 swerves, 1 dares
CHICKEN = np.stack([CHICKEN_ROW, CHICKEN_ROW.T])
#: Shapley's game: the only Nash equilibrium is uniform; CCEs and CEs differ.
SHAPLEY = np.stack([np.array([[0.0, 1, 0], [0, 0, 1], [1, 0, 0]]), np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]])])


def random_games() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "2p_5x5": rng.uniform(-1, 1, (2, 5, 5)),
        "2p_6x3_scaled": 100.0 * rng.uniform(-1, 1, (2, 6, 3)) + 40.0,
        "3p_3x3x3": rng.uniform(-1, 1, (3, 3, 3, 3)),
        "3p_4x2x3": rng.uniform(-1, 1, (3, 4, 2, 3)),
        "4p_2x2x2x2": rng.uniform(-1, 1, (4, 2, 2, 2, 2)),
        "4p_3x2x3x2": rng.integers(0, 3, (4, 3, 2, 3, 2)).astype(float),  # ties
        "shapley": SHAPLEY,
    }


GAMES = random_games()


def gap_bound(payoffs: np.ndarray) -> float:
    return 1e-6 * max(1.0, float(np.ptp(payoffs)))


@pytest.mark.parametrize("name", ["cce", "ce"])
@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("game", list(GAMES))
def test_answer_is_an_equilibrium(name: str, objective: str, game: str) -> None:
    payoffs = GAMES[game]
    solver = SOLVERS[name](objective=objective)
    result = solver.solve_detailed(payoffs)
    joint = result.joint
    assert joint is not None and joint.shape == payoffs.shape[1:]
    assert joint.min() >= 0.0 and joint.sum() == pytest.approx(1.0, abs=1e-12)
    assert GAP[name](payoffs, joint) <= gap_bound(payoffs)
    assert cce_gap(payoffs, joint) <= gap_bound(payoffs)  # a CE is a CCE
    assert_mixtures(payoffs, result.mixtures)
    for got, want in zip(result.mixtures, marginals(joint), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-15)
    m = result.metrics
    assert m["solver_objective"] == objective
    assert m["solver_method"] in {"clarabel_qp", "clarabel_exp_cone", "highs_lp+clarabel_qp", "unconstrained",
                                  "dual_polished", "highs_lp+dual_polished"}
    if name == "cce" and objective == "max_gini" and m["solver_method"] != "unconstrained":
        assert m["solver_method"] == "dual_polished"
    assert m["solver_iterations"] >= 0 and m["solver_constraints"] >= 0
    assert m["solver_violation"] <= gap_bound(payoffs)
    assert m["meta_cce_gap"] == pytest.approx(cce_gap(payoffs, joint), abs=1e-15)
    assert m["meta_ce_gap"] == pytest.approx(ce_gap(payoffs, joint), abs=1e-15)
    assert abs(m["meta_nash_conv"] - regret(payoffs, result.mixtures)) < 1e-12


def test_registered_and_conditional() -> None:
    assert popmarl.solvers.load("cce") is CoarseCorrelated
    assert popmarl.solvers.load("ce") is Correlated
    assert CoarseCorrelated.conditional is False and Correlated.conditional is True
    assert CoarseCorrelated().config == CorrelatedConfig(objective="max_gini", epsilon=0.0)
    joint = Correlated().solve_joint(CHICKEN)
    np.testing.assert_allclose(Correlated().solve_detailed(CHICKEN).joint, joint)
    for got, want in zip(Correlated().solve(CHICKEN), marginals(joint), strict=True):
        np.testing.assert_allclose(got, want)


# -- max welfare ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cce", "ce"])
def test_max_welfare_on_chicken(name: str) -> None:
    """The best CE of chicken: (swerve, swerve) 1/2, each one-sided dare 1/4: welfare 10.5."""
    result = SOLVERS[name](objective="max_welfare").solve_detailed(CHICKEN)
    assert result.metrics["meta_welfare"] == pytest.approx(10.5, abs=1e-6)
    np.testing.assert_allclose(result.joint, [[0.5, 0.25], [0.25, 0.0]], atol=1e-6)


def test_max_welfare_cce_at_least_ce_and_every_other_answer() -> None:
    for payoffs in GAMES.values():
        welfare = {
            (name, objective): SOLVERS[name](objective=objective).solve_detailed(payoffs).metrics["meta_welfare"]
            for name in SOLVERS
            for objective in OBJECTIVES
        }
        slack = gap_bound(payoffs) * payoffs.shape[0]
        assert welfare["cce", "max_welfare"] >= welfare["ce", "max_welfare"] - slack
        for (name, _), value in welfare.items():
            assert welfare[name, "max_welfare"] >= value - slack
            assert welfare["cce", "max_welfare"] >= value - slack


def test_max_welfare_tie_break() -> None:
    """Coordination: (0, 0) and (1, 1) both have welfare 2; max Gini splits them evenly,
    ``none`` returns one vertex; duplicated strategies share their mass."""
    coordination = np.stack([np.eye(2), np.eye(2)])
    tied = Correlated(objective="max_welfare").solve_detailed(coordination)
    np.testing.assert_allclose(tied.joint, [[0.5, 0.0], [0.0, 0.5]], atol=1e-7)
    assert tied.metrics["solver_method"] == "highs_lp+clarabel_qp"
    vertex = Correlated(objective="max_welfare", welfare_tie_break="none").solve_detailed(coordination)
    assert vertex.metrics["solver_method"] == "highs_lp"
    assert sorted(np.round(vertex.joint.ravel(), 9)) == [0.0, 0.0, 0.0, 1.0]
    assert vertex.metrics["meta_welfare"] == pytest.approx(2.0)
    duplicated = CHICKEN[:, [0, 0, 1], :][:, :, [0, 1, 1]]  # the row's swerve and the column's dare twice
    joint = Correlated(objective="max_welfare").solve_joint(duplicated)
    np.testing.assert_allclose(joint[0], joint[1], atol=1e-7)
    np.testing.assert_allclose(joint[:, 1], joint[:, 2], atol=1e-7)
    assert (duplicated.sum(axis=0) * joint).sum() == pytest.approx(10.5, abs=1e-6)


def test_max_welfare_matches_openspiel(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenSpiel's mwcce / mwce reach the same welfare (their LP is not unique, the value is).
    Their default LP solver (ECOS) is swapped for Clarabel, which cvxpy always has."""
    jpsro = pytest.importorskip("open_spiel.python.algorithms.jpsro")
    monkeypatch.setattr(jpsro, "DEFAULT_ECOS_SOLVER_KWARGS", {"solver": "CLARABEL"})
    for game in ("2p_5x5", "3p_3x3x3", "shapley"):
        payoffs = GAMES[game]
        repeats = [np.ones(k) for k in payoffs.shape[1:]]
        for name, theirs in (("cce", jpsro._mwcce), ("ce", jpsro._mwce)):
            their_joint, _ = theirs(payoffs, repeats, ignore_repeats=True)
            ours = SOLVERS[name](objective="max_welfare").solve_joint(payoffs)
            welfare = payoffs.sum(axis=0)
            assert (welfare * ours).sum() == pytest.approx((welfare * their_joint).sum(), abs=1e-6)


# -- max Gini ---------------------------------------------------------------------------


@pytest.mark.parametrize("game", ["2p_5x5", "2p_6x3_scaled", "3p_4x2x3", "4p_2x2x2x2", "4p_3x2x3x2"])
def test_max_gini_matches_openspiel(game: str) -> None:
    """OpenSpiel's JPSRO MG(C)CE (``_mgcce``, ``_mgce``; CVXOPT if installed, else OSQP) is
    the same distribution. (Not Shapley's game: degenerate, where every interior-point
    answer is ~1e-5 off; see :func:`test_shapley_answers`.)"""
    jpsro = pytest.importorskip("open_spiel.python.algorithms.jpsro")
    payoffs = GAMES[game] / max(1.0, float(np.ptp(GAMES[game])))  # OSQP's tolerances are absolute
    repeats = [np.ones(k) for k in payoffs.shape[1:]]
    for name, theirs in (("cce", jpsro._mgcce), ("ce", jpsro._mgce)):
        their_joint, _ = theirs(payoffs, repeats, ignore_repeats=True)
        ours = SOLVERS[name]().solve_joint(payoffs)
        np.testing.assert_allclose(ours, their_joint, atol=2e-5)


def test_shapley_answers() -> None:
    """Shapley's game: the uniform joint is the Nash product, so the MG(C)CE (Gini's global
    maximiser) — to ~sqrt(tol): every constraint is tight there with a zero multiplier,
    where interior points converge slowly. The welfare-1 (C)CEs live on the off-diagonal
    profiles; the cyclic symmetry and the constraints force the max-Gini one to be uniform there."""
    for cls in SOLVERS.values():
        np.testing.assert_allclose(cls().solve_joint(SHAPLEY), np.full((3, 3), 1 / 9), atol=1e-4)
        result = cls(objective="max_welfare").solve_detailed(SHAPLEY)
        assert result.metrics["meta_welfare"] == pytest.approx(1.0, abs=1e-7)
        np.testing.assert_allclose(result.joint, (1 - np.eye(3)) / 6, atol=1e-6)


def test_scale_and_shift_invariance() -> None:
    payoffs = GAMES["3p_3x3x3"]
    for cls in SOLVERS.values():
        base = cls().solve_joint(payoffs)
        moved = cls().solve_joint(1000.0 * payoffs - 3.0)
        np.testing.assert_allclose(moved, base, atol=1e-6)


# -- max entropy ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cce", "ce"])
def test_max_entropy_on_chicken(name: str) -> None:
    """With two strategies each, CE = CCE. By symmetry σ(swerve, dare) = σ(dare, swerve) = b;
    the constraint σ(dare, dare) <= b / 2 binds and stationarity of the entropy gives
    σ(swerve, swerve) = 2^(-1/5) b, so b = 1 / (5/2 + 2^(-1/5))."""
    b = 1.0 / (2.5 + 2 ** -0.2)
    want = np.array([[2 ** -0.2 * b, b], [b, b / 2]])
    result = SOLVERS[name](objective="max_entropy").solve_detailed(CHICKEN)
    np.testing.assert_allclose(result.joint, want, atol=1e-6)
    assert result.metrics["meta_joint_entropy"] == pytest.approx(-(want * np.log(want)).sum(), abs=1e-7)
    assert result.metrics["solver_method"] == "clarabel_exp_cone"


def test_max_entropy_of_a_game_without_incentives_is_uniform() -> None:
    """RPS: the uniform joint is the Nash product, so a CE of entropy log 9, the maximum."""
    for cls in SOLVERS.values():
        joint = cls(objective="max_entropy").solve_joint(zero_sum(RPS))
        np.testing.assert_allclose(joint, np.full((3, 3), 1 / 9), atol=1e-6)


# -- epsilon ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cce", "ce"])
def test_epsilon_loosens_the_constraints(name: str) -> None:
    cls = SOLVERS[name]
    exact = cls(objective="max_welfare").solve_detailed(CHICKEN)
    loose = cls(objective="max_welfare", epsilon=0.5).solve_detailed(CHICKEN)
    assert loose.metrics["meta_welfare"] > exact.metrics["meta_welfare"] + 0.1
    # every constraint (one per deviation, or per recommendation and deviation) gains <= epsilon
    assert np.all(cce_gains(CHICKEN, loose.joint) <= 0.5 + 1e-7)
    assert np.all(ce_gains(CHICKEN, loose.joint) <= 2 * 0.5 + 1e-7)
    assert GAP[name](CHICKEN, loose.joint) > 1e-3  # no longer an exact equilibrium
    ginis = [1 - (cls(epsilon=e).solve_joint(CHICKEN) ** 2).sum() for e in (0.0, 0.1, 0.3)]
    assert ginis[0] < ginis[1] < ginis[2]
    free = cls(epsilon=10.0).solve_detailed(CHICKEN)  # no deviation gains 10: every joint qualifies
    assert free.metrics["solver_method"] == "unconstrained"
    np.testing.assert_allclose(free.joint, np.full((2, 2), 0.25))


# -- configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "error", "field"),
    [
        ({"objective": "max_gin"}, ValueError, "objective"),
        ({"epsilon": -0.1}, ValueError, "epsilon"),
        ({"epsilon": "0.1"}, TypeError, "epsilon"),
        ({"epsilon": float("nan")}, TypeError, "epsilon"),
        ({"tol": 0.0}, ValueError, "tol"),
        ({"tol": 0.5}, ValueError, "tol"),
        ({"max_iterations": 0}, ValueError, "max_iterations"),
        ({"max_iterations": 2.5}, TypeError, "max_iterations"),
        ({"welfare_tie_break": "random"}, ValueError, "welfare_tie_break"),
    ],
)
def test_bad_config_names_the_field(params: dict, error: type[Exception], field: str) -> None:
    with pytest.raises(error, match=field):
        CorrelatedConfig(**params)
    with pytest.raises(error, match=field):
        Correlated(**params)


def test_config_from_yaml_reports_every_field() -> None:
    problems: list[str] = []
    raw = {"objective": "entropy", "epsilon": -1, "tol": "small", "max_iterations": 0}
    assert structure_attrs(CorrelatedConfig, raw, "solver.params", problems) is None
    assert [p.split(":")[0] for p in problems] == [
        "solver.params.objective",
        "solver.params.epsilon",
        "solver.params.tol",
        "solver.params.max_iterations",
    ]
    good = structure_attrs(CorrelatedConfig, {"objective": "max_welfare", "epsilon": 1}, "solver.params", problems)
    assert good == CorrelatedConfig(objective="max_welfare", epsilon=1.0)
    with pytest.raises(TypeError):
        CorrelatedConfig(gamma=1.0)  # type: ignore[call-arg]


# -- degenerate games and fallbacks -----------------------------------------------------


@pytest.mark.parametrize("name", ["cce", "ce"])
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_degenerate_games(name: str, objective: str) -> None:
    solver = SOLVERS[name](objective=objective)
    for shape in [(2, 1, 1), (3, 1, 1, 1), (4, 1, 1, 1, 1)]:
        result = solver.solve_detailed(np.random.default_rng(0).uniform(size=shape))
        assert result.metrics["solver_method"] == "trivial"
        np.testing.assert_array_equal(result.joint, np.ones(shape[1:]))
    for constant in (np.zeros((2, 3, 4)), np.full((3, 2, 3, 2), 7.0)):
        result = solver.solve_detailed(constant)
        assert result.metrics["solver_method"] == "unconstrained"
        np.testing.assert_allclose(result.joint, np.full(constant.shape[1:], 1 / constant[0].size))
    # 1 x k: the column player plays a best response; the row player has no choice.
    one_row = np.stack([np.zeros((1, 4)), np.array([[0.0, 3.0, 1.0, 3.0]])])
    joint = solver.solve_joint(one_row)
    assert joint[0, [0, 2]].sum() <= 1e-7
    if objective != "max_welfare":
        np.testing.assert_allclose(joint[0, [1, 3]], [0.5, 0.5], atol=1e-6)
    k_by_one = np.random.default_rng(3).uniform(-1, 1, (2, 5, 1))
    joint = solver.solve_joint(k_by_one)
    assert joint[:, 0].argmax() == k_by_one[0, :, 0].argmax() and joint.max() >= 1 - 1e-6


def test_deviation_gains_rows() -> None:
    """One row per player and deviation (CCE) or (recommendation, deviation) pair (CE);
    rows that cannot be violated are dropped."""
    a = deviation_gains(CHICKEN, conditional=False).toarray()
    # Row player "always dare": (7-6) on (swerve, swerve), (0-2) on (swerve, dare), 0 elsewhere.
    assert any(np.allclose(row, [1, -2, 0, 0]) for row in a)
    assert a.shape == (4, 4)
    assert deviation_gains(SHAPLEY, conditional=True).shape == (12, 9)
    assert deviation_gains(SHAPLEY, conditional=False).shape == (6, 9)
    assert deviation_gains(SHAPLEY, conditional=True, epsilon=1.0).shape == (0, 9)
    dominant = np.stack([np.array([[1.0, 1.0], [0.0, 0.0]]), np.zeros((2, 2))])
    assert deviation_gains(dominant, conditional=True).shape == (1, 4)  # only "told 1, play 0"


@pytest.mark.parametrize("name", ["cce", "ce"])
def test_failed_solve_falls_back_to_an_equilibrium(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(correlated, "_convex", lambda *args, **kwargs: None)
    monkeypatch.setattr(correlated, "_max_gini_dual", lambda *args, **kwargs: None)
    monkeypatch.setattr(correlated, "_max_welfare", lambda *args, **kwargs: None)
    solver = SOLVERS[name]()
    rps = solver.solve_detailed(zero_sum(RPS))  # the uniform joint is an equilibrium
    assert rps.metrics["solver_method"] == "uniform_fallback"
    np.testing.assert_allclose(rps.joint, np.full((3, 3), 1 / 9))
    payoffs = GAMES["2p_5x5"]
    assert GAP[name](payoffs, np.full((5, 5), 1 / 25)) > 1e-3
    result = solver.solve_detailed(payoffs)
    assert result.metrics["solver_method"] == "nash_fallback"
    assert GAP[name](payoffs, result.joint) <= gap_bound(payoffs)
    # the product of the marginals is the joint itself
    np.testing.assert_allclose(np.multiply.outer(*result.mixtures), result.joint, atol=1e-12)


def test_inaccurate_answer_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer that violates a constraint beyond tolerance is never returned as is."""
    monkeypatch.setattr(correlated, "_convex", lambda a, *args, **kwargs: (np.eye(a.shape[1])[0], 3))
    monkeypatch.setattr(correlated, "_max_gini_dual", lambda *args, **kwargs: None)
    result = CoarseCorrelated().solve_detailed(CHICKEN)  # all mass on (swerve, swerve): not a CCE
    assert result.metrics["solver_method"] in {"uniform_fallback", "nash_fallback"}
    assert cce_gap(CHICKEN, result.joint) <= 1e-6


def test_unusable_answer_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A solver answer of NaNs or all zeros is passed over, not divided by its sum."""
    for bad in (np.nan, 0.0):
        monkeypatch.setattr(correlated, "_convex", lambda a, *args, bad=bad, **kwargs: (np.full(a.shape[1], bad), 3))
        result = Correlated().solve_detailed(zero_sum(RPS))
        assert result.metrics["solver_method"] == "uniform_fallback"


def test_unconstrained_max_welfare() -> None:
    """Nothing to gain by deviating (epsilon covers it): every joint is a (C)CE, and the
    max-welfare answer is uniform over the best profiles, or one of them."""
    payoffs = np.stack([np.array([[1.0, 0.0], [3.0, 3.0]]), np.array([[1.0, 0.0], [0.0, 0.0]])])
    tied = CoarseCorrelated(objective="max_welfare", epsilon=10.0).solve_detailed(payoffs)
    assert tied.metrics["solver_method"] == "unconstrained"
    np.testing.assert_allclose(tied.joint, [[0, 0], [0.5, 0.5]])
    vertex = CoarseCorrelated(objective="max_welfare", epsilon=10.0, welfare_tie_break="none").solve_joint(payoffs)
    np.testing.assert_allclose(vertex, [[0, 0], [1, 0]])


#: The prisoner's dilemma: its only CCE is (defect, defect), where rows are tight with
#: multipliers that are not unique.
PRISONERS = np.stack([np.array([[3.0, 0.0], [5.0, 1.0]]), np.array([[3.0, 5.0], [0.0, 1.0]])])


def leduc3_meta(size: int) -> np.ndarray:
    """A 3-player Leduc PSRO meta-game saved from a run, its first ``size`` policies."""
    return np.load(Path(__file__).parent / "data" / "leduc3_meta_20.npy")[:, :size, :size, :size]


@pytest.mark.parametrize("game", ["prisoners", "leduc3_6", "leduc3_20"])
def test_max_gini_cce_from_its_dual_is_clarabels_optimum_polished(game: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dual's answer, polished on its support and active rows, is the maximum-Gini
    CCE Clarabel's QP finds, to the QP's accuracy, with the constraints held to rounding:
    on the prisoner's dilemma (one profile, degenerate multipliers: they must stay near
    the dual's) and on 6x6x6 and 20x20x20 3-player Leduc meta-games. An unconverged dual
    fails its KKT check instead of answering."""
    payoffs = PRISONERS if game == "prisoners" else leduc3_meta(int(game.split("_")[1]))
    dual = CoarseCorrelated().solve_detailed(payoffs)
    assert dual.metrics["solver_method"] == "dual_polished"
    assert cce_gap(payoffs, dual.joint) <= 1e-12 * np.ptp(payoffs)
    monkeypatch.setattr(correlated, "_max_gini_dual", lambda *args, **kwargs: None)
    qp = CoarseCorrelated().solve_detailed(payoffs)
    assert qp.metrics["solver_method"] == "clarabel_qp"
    np.testing.assert_allclose(dual.joint, qp.joint, atol=2e-6)
    # max Gini (min sum of squares), up to what Clarabel's tolerance lets its answer gain
    assert (dual.joint**2).sum() <= (qp.joint**2).sum() + 1e-9
    if game == "prisoners":
        np.testing.assert_allclose(dual.joint, [[0.0, 0.0], [0.0, 1.0]], atol=1e-15)
    if game == "leduc3_20":
        monkeypatch.undo()
        game_01 = (payoffs - payoffs.reshape(3, -1).min(axis=1)[:, None, None, None]) / np.ptp(payoffs)
        a = deviation_gains(game_01, conditional=False)
        assert correlated._max_gini_dual(a, 0.0, CorrelatedConfig()) is not None
        assert correlated._max_gini_dual(a, 0.0, CorrelatedConfig(max_iterations=1)) is None
