"""``popmarl rank``'s ratings come from the ``ratings`` registry, by name: the core's ``elo``
always, the others where a plugin registers them; one that is not installed is left out
and the report's note says which, and which plugin of the checkout adds it."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

import popmarl
from popmarl.api import CrossPlay, PopmarlError, Rating
from popmarl.gametheory.ratings import elo, head_to_head
from popmarl.plugins.registry import Registry
from popmarl.tools.tournament import Player, Tournament, format_ratings, ratings


def _tournament(shared: bool) -> Tournament:
    rng = np.random.default_rng(7)
    rows = tuple(Player(name=f"run:p0/{i}", run=0, policy_id=f"p0/{i}", seat=None if shared else "a") for i in range(3))
    columns = rows if shared else tuple(Player(name=f"run:p1/{j}", run=0, policy_id=f"p1/{j}", seat="b")
                                        for j in range(2))
    returns = rng.normal(size=(2, len(rows), len(columns)))
    outcomes = rng.integers(0, 10, size=(3, len(rows), len(columns))).astype(float)
    if shared:
        for table in (*returns, *outcomes):
            np.fill_diagonal(table, 0.0)
    return Tournament(runs=("run",), agents=("a", "b"), shared=shared, rows=rows, columns=columns, returns=returns,
                      outcomes=outcomes, exact=False, episodes=10, pairs=6, played=6)


class Wins(Rating):
    """A rating of this test's own: seat 0's wins per row player, then 0 for the columns'."""

    columns = ("wins",)

    def rate(self, play: CrossPlay) -> Mapping[str, np.ndarray]:
        wins = play.outcomes[0].sum(axis=1)
        return {"wins": wins if play.shared else np.concatenate([wins, np.zeros(play.outcomes.shape[2])])}


@pytest.mark.parametrize("shared", [True, False])
def test_elo_alone_is_the_fit_of_the_outcomes_and_the_rest_is_noted(shared: bool) -> None:
    t = _tournament(shared)
    only_elo = Registry(kind="ratings", entries={"elo": popmarl.ratings.entry("elo")})
    report = ratings(t, registries={"ratings": only_elo})
    np.testing.assert_array_equal([p["elo"] for p in report["players"]],
                                  elo(*head_to_head(*t.outcomes, shared=shared)))
    assert all(set(p) == {"player", "run", "policy", "seat", "elo"} for p in report["players"])
    assert report["note"].startswith("alpharank and nash_averaging need the popmarl-solvers plugin")
    assert "pip install ./plugins/popmarl-solvers" in report["note"]
    assert format_ratings(report).splitlines()[0].split() == ["player", "seat", "elo"]


def test_a_rating_is_asked_for_by_name_and_listed_after_the_usual_columns() -> None:
    t = _tournament(shared=False)
    found = popmarl.ratings.with_component("wins", Wins)
    report = ratings(t, ("elo", "wins"), registries={"ratings": found})
    assert report["note"] == ""
    assert [p["wins"] for p in report["players"]] == [*t.outcomes[0].sum(axis=1), 0.0, 0.0]
    assert format_ratings(report).splitlines()[0].split() == ["player", "seat", "elo", "wins"]
    missing = ratings(t, ("elo", "no_such_rating"), registries={"ratings": found})["note"]
    assert missing.startswith("no_such_rating left out: no rating of that name is installed")


class Short(Rating):
    """A broken rating: one figure too few."""

    columns = ("short",)

    def rate(self, play: CrossPlay) -> Mapping[str, np.ndarray]:
        return {"short": np.zeros(play.players - 1)}


def test_a_rating_that_answers_the_wrong_number_of_figures_fails_in_one_line() -> None:
    found = popmarl.ratings.with_component("short", Short)
    with pytest.raises(PopmarlError, match=r"^rating 'short': short must be one finite figure per player \(5\)"):
        ratings(_tournament(shared=False), ("elo", "short"), registries={"ratings": found})
