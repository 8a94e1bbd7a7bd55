"""Joint distributions over profiles (popmarl.gametheory.metagame): marginals, values, CCE/CE gains
and gaps on hand-computed examples and against a brute-force enumeration; the
:class:`popmarl.interfaces.solver.JointMetaSolver` contract. Core only: numpy and popmarl."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from popmarl.gametheory.metagame import (
    ce_gains,
    ce_gap,
    cce_gains,
    cce_gap,
    check_joint,
    joint_values,
    marginals,
    regrets,
)
from popmarl.interfaces.solver import JointMetaSolver

#: Chicken: strategy 0 swerves, 1 dares; the column player's payoffs are the row's transposed.
CHICKEN_ROW = np.array([[6.0, 2.0], [7.0, 0.0]])
CHICKEN = np.stack([CHICKEN_ROW, CHICKEN_ROW.T])


def joint2(*entries: float) -> np.ndarray:
    return np.array(entries, dtype=float).reshape(2, 2)


def brute_gains(payoffs: np.ndarray, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CCE and CE gains by enumerating every profile, deviation and recommendation."""
    n, shape = payoffs.shape[0], joint.shape
    cce, ce = np.zeros(n), np.zeros(n)
    profiles = list(itertools.product(*(range(k) for k in shape)))
    for k in range(n):
        value = sum(joint[s] * payoffs[k][s] for s in profiles)

        def swap(s: tuple[int, ...], d: int, k: int = k) -> tuple[int, ...]:
            return s[:k] + (d,) + s[k + 1 :]

        cce[k] = max(sum(joint[s] * payoffs[k][swap(s, d)] for s in profiles) for d in range(shape[k])) - value
        for r in range(shape[k]):
            told = [s for s in profiles if s[k] == r]
            ce[k] += max(sum(joint[s] * (payoffs[k][swap(s, d)] - payoffs[k][s]) for s in told) for d in range(shape[k]))
    return cce, ce


def test_marginals_of_a_known_joint() -> None:
    joint = np.array([[0.1, 0.2, 0.3], [0.4, 0.0, 0.0]])
    rows, cols = marginals(joint)
    np.testing.assert_allclose(rows, [0.6, 0.4])
    np.testing.assert_allclose(cols, [0.5, 0.2, 0.3])


def test_marginals_of_a_product_are_its_factors() -> None:
    rng = np.random.default_rng(0)
    factors = [rng.dirichlet(np.ones(k)) for k in (2, 3, 4)]
    joint = np.einsum("a,b,c->abc", *factors)
    for got, want in zip(marginals(joint), factors, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-15)


def test_chicken_correlated_equilibrium_has_no_gain() -> None:
    """(1/3, 1/3, 1/3, 0) on (swerve, swerve), (swerve, dare), (dare, swerve), (dare, dare)."""
    joint = joint2(1 / 3, 1 / 3, 1 / 3, 0)
    np.testing.assert_allclose(joint_values(CHICKEN, joint), [5.0, 5.0])
    gains = ce_gains(CHICKEN, joint)
    assert np.all(gains <= 1e-12) and np.all(gains >= 0.0)  # Σ_r max_d includes d = r
    assert ce_gap(CHICKEN, joint) <= 1e-12
    # CCE: deviating to either strategy regardless earns 14/3 against the others' marginal, 1/3 below 5.
    np.testing.assert_allclose(cce_gains(CHICKEN, joint), [-1 / 3, -1 / 3])
    assert cce_gap(CHICKEN, joint) == 0.0


def test_non_equilibrium_gains_are_the_hand_computed_ones() -> None:
    # Both swerve for sure: daring instead earns 7 rather than 6, told or not.
    swerve = joint2(1, 0, 0, 0)
    np.testing.assert_allclose(cce_gains(CHICKEN, swerve), [1.0, 1.0])
    np.testing.assert_allclose(ce_gains(CHICKEN, swerve), [1.0, 1.0])
    assert cce_gap(CHICKEN, swerve) == pytest.approx(2.0)
    assert ce_gap(CHICKEN, swerve) == pytest.approx(2.0)
    # Half (swerve, swerve), half (dare, dare): value 3; always swerving earns 4 (CCE gain 1);
    # told "swerve", dare: +0.5; told "dare", swerve: +1 (CE gain 1.5).
    coin = joint2(0.5, 0, 0, 0.5)
    np.testing.assert_allclose(joint_values(CHICKEN, coin), [3.0, 3.0])
    np.testing.assert_allclose(cce_gains(CHICKEN, coin), [1.0, 1.0])
    np.testing.assert_allclose(ce_gains(CHICKEN, coin), [1.5, 1.5])
    assert cce_gap(CHICKEN, coin) == pytest.approx(2.0)
    assert ce_gap(CHICKEN, coin) == pytest.approx(3.0)


@pytest.mark.parametrize("shape", [(2, 3, 4), (3, 2, 3, 2), (4, 2, 2, 2, 2)])
def test_gains_agree_with_enumeration(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape))
    payoffs = rng.uniform(-1, 1, shape)
    joint = rng.dirichlet(np.ones(int(np.prod(shape[1:])))).reshape(shape[1:])
    cce, ce = brute_gains(payoffs, joint)
    np.testing.assert_allclose(cce_gains(payoffs, joint), cce, atol=1e-12)
    np.testing.assert_allclose(ce_gains(payoffs, joint), ce, atol=1e-12)
    assert np.all(ce_gains(payoffs, joint) >= cce_gains(payoffs, joint) - 1e-12)  # every CE is a CCE
    assert cce_gap(payoffs, joint) == pytest.approx(np.maximum(cce, 0).sum())
    assert ce_gap(payoffs, joint) == pytest.approx(np.maximum(ce, 0).sum())
    values = [sum(joint[s] * payoffs[k][s] for s in np.ndindex(*shape[1:])) for k in range(shape[0])]
    np.testing.assert_allclose(joint_values(payoffs, joint), values)


def test_cce_gains_of_a_product_are_the_regrets() -> None:
    rng = np.random.default_rng(5)
    payoffs = rng.uniform(-1, 1, (3, 3, 2, 4))
    mixtures = [rng.dirichlet(np.ones(k)) for k in payoffs.shape[1:]]
    joint = np.einsum("a,b,c->abc", *mixtures)
    np.testing.assert_allclose(cce_gains(payoffs, joint), regrets(payoffs, mixtures), atol=1e-12)


def test_check_joint_accepts_and_cleans() -> None:
    joint = check_joint([[0.5, 0.5 + 1e-12], [-1e-12, 0.0]], (2, 2))
    assert joint.min() >= 0.0 and joint.sum() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize(
    ("joint", "match"),
    [
        (np.full((2, 3), 1 / 6), "shape"),
        (np.full(4, 0.25), "shape"),
        (np.array([[0.5, 0.6], [0.0, -0.1]]), "non-negative"),
        (np.array([[0.5, 0.6], [0.0, 0.0]]), "sum to 1"),
        (np.array([[np.nan, 0.5], [0.5, 0.0]]), "non-negative"),
    ],
)
def test_check_joint_errors(joint: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_joint(joint, (2, 2))


class _UniformJoint(JointMetaSolver):
    def solve_joint(self, payoffs: np.ndarray) -> np.ndarray:
        shape = payoffs.shape[1:]
        return np.full(shape, 1.0 / np.prod(shape))


def test_joint_meta_solver_contract() -> None:
    solver = _UniformJoint()
    assert solver.conditional is False
    result = solver.solve_detailed(CHICKEN)
    np.testing.assert_allclose(result.joint, np.full((2, 2), 0.25))
    for mixture in result.mixtures:
        np.testing.assert_allclose(mixture, [0.5, 0.5])
    for mixture in solver.solve(CHICKEN):
        np.testing.assert_allclose(mixture, [0.5, 0.5])
    m = result.metrics
    # Uniform: value 15/4 each; swerving regardless earns 4 (CCE gain 1/4); told "dare",
    # swerving earns 2 instead of 7/4 (CE gain 1/4: with two strategies the gains agree).
    assert m["meta_cce_gap"] == pytest.approx(0.5)
    assert m["meta_ce_gap"] == pytest.approx(0.5)
    assert m["meta_welfare"] == pytest.approx(7.5)
    assert m["meta_joint_entropy"] == pytest.approx(np.log(4))
    assert m["meta_nash_conv"] == pytest.approx(0.5)  # the marginals' product is the same uniform joint
    with pytest.raises(ValueError, match="shape"):
        solver.solve_detailed(np.zeros((2, 3)))
