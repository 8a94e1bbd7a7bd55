"""Double oracle with ``nash`` on random 50×50 zero-sum games ends at an exact equilibrium.

A small loop written here (the core's PSRO loop may replace it): solve the restricted
game, add each player's best response to the other's restricted equilibrium, stop when
no best response improves — then the full game's NashConv must be ≤ 1e-8.
"""

from __future__ import annotations

import numpy as np
import pytest
from solver_helpers import regret, zero_sum

from popmarl_solvers import Nash


def double_oracle(a: np.ndarray, max_iterations: int = 200) -> tuple[np.ndarray, np.ndarray, int]:
    """Full-game mixtures found by double oracle on the zero-sum matrix ``a``."""
    rows, cols = [0], [0]
    solver = Nash()
    for iteration in range(1, max_iterations + 1):
        x_r, y_r = solver.solve(zero_sum(a[np.ix_(rows, cols)]))
        x = np.zeros(a.shape[0])
        y = np.zeros(a.shape[1])
        x[rows], y[cols] = x_r, y_r
        value = x @ a @ y
        row_br, col_br = int(np.argmax(a @ y)), int(np.argmin(x @ a))
        grew = False
        if (a @ y)[row_br] > value + 1e-12 and row_br not in rows:
            rows.append(row_br)
            grew = True
        if (x @ a)[col_br] < value - 1e-12 and col_br not in cols:
            cols.append(col_br)
            grew = True
        if not grew:
            return x, y, iteration
    raise AssertionError("double oracle did not converge")


@pytest.mark.parametrize("seed", range(4))
def test_double_oracle_reaches_exact_equilibrium(seed: int) -> None:
    a = np.random.default_rng(seed).uniform(-1, 1, (50, 50))
    x, y, iterations = double_oracle(a)
    assert regret(zero_sum(a), (x, y)) <= 1e-8
    assert iterations > 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_core_psro_with_exact_matrix_br_and_nash_is_double_oracle(tmp_path, seed) -> None:
    """The core's PSRO loop with ``exact_matrix_br`` + ``nash`` on a random 50×50 zero-sum
    game: it stops at the target with NashConv ≤ 1e-8, measured in the real game."""
    import yaml

    import popmarl

    config = {"env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 50, "seed": seed}},
              "algorithm": "exact_matrix_br", "solver": "nash",
              "stopping": {"max_iterations": 100, "target_nash_conv": 1.0e-9}, "trackers": []}
    path = tmp_path / "do.yaml"
    path.write_text(yaml.safe_dump(config))
    summary = popmarl.run(popmarl.load_config(str(path)), out=str(tmp_path / "run"))
    assert summary["status"] == "completed" and summary["stop_reason"] == "target_nash_conv"
    assert summary["nash_conv"] <= 1e-8
    assert summary["iterations"] < 50  # double oracle needs far fewer than all 50 strategies
