"""The solvers plugin's ratings, as ``popmarl rank`` gets them (registered under
``popmarl.ratings``), are the functions of :mod:`popmarl_solvers.ratings` applied as rank
applies them: agent-vs-agent on the antisymmetric part of a shared pool's table, agent-vs-task
on the zero-sum part of a per-seat one; a report lists elo, alpharank, then nash_weight and
nash_averaging."""

from __future__ import annotations

import numpy as np
import pytest

import popmarl
from popmarl.api import CrossPlay
from popmarl.gametheory.ratings import elo, head_to_head
from popmarl.tools.tournament import Player, Tournament, ratings
from popmarl_solvers.ratings import alpharank_ratings, nash_averaging, nash_averaging_avt


def _play(shared: bool) -> CrossPlay:
    rng = np.random.default_rng(11)
    n0, n1 = (4, 4) if shared else (4, 3)
    returns = rng.normal(size=(2, n0, n1))
    returns[1] = -returns[0] + rng.normal(scale=0.1, size=(n0, n1))
    outcomes = rng.integers(0, 20, size=(3, n0, n1)).astype(float)
    if shared:
        for table in (*returns, *outcomes):
            np.fill_diagonal(table, 0.0)
    return CrossPlay(returns=returns, outcomes=outcomes, shared=shared)


def _expected(play: CrossPlay) -> dict[str, np.ndarray]:
    figures = {"elo": elo(*head_to_head(*play.outcomes, shared=play.shared))}
    if play.shared:
        m = (play.returns[0] + play.returns[1].T) / 2
        np.fill_diagonal(m, 0.0)
        (figures["alpharank"],) = alpharank_ratings(np.stack([m, m.T]), symmetric=True)
        figures["nash_weight"], figures["nash_averaging"] = nash_averaging((m - m.T) / 2)
    else:
        figures["alpharank"] = np.concatenate(alpharank_ratings(play.returns, symmetric=False))
        (x, y), (agents, tasks) = nash_averaging_avt((play.returns[0] - play.returns[1]) / 2)
        figures["nash_weight"], figures["nash_averaging"] = np.concatenate([x, y]), np.concatenate([agents, tasks])
    return figures


@pytest.mark.parametrize("shared", [True, False])
def test_the_registered_ratings_are_the_plugins_functions(shared: bool) -> None:
    play = _play(shared)
    expected = _expected(play)
    for name in ("elo", "alpharank", "nash_averaging"):
        rating = popmarl.ratings.load(name)()
        got = rating.rate(play)
        assert tuple(got) == rating.columns
        for column, values in got.items():
            np.testing.assert_array_equal(values, expected[column])
            assert len(values) == play.players

    n0, n1 = play.returns.shape[1:]
    rows = tuple(Player(name=f"r{i}", run=0, policy_id=f"a/{i}", seat=None if shared else "a") for i in range(n0))
    columns = rows if shared else tuple(Player(name=f"c{j}", run=0, policy_id=f"b/{j}", seat="b") for j in range(n1))
    report = ratings(Tournament(runs=("run",), agents=("a", "b"), shared=shared, rows=rows, columns=columns,
                                returns=play.returns, outcomes=play.outcomes, exact=True, episodes=20, pairs=1,
                                played=1))
    assert report["note"] == ""
    for n, player in enumerate(report["players"]):
        assert list(player) == ["player", "run", "policy", "seat", "elo", "alpharank", "nash_weight", "nash_averaging"]
        assert all(player[k] == float(v[n]) for k, v in expected.items())
