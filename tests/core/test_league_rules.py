"""The league's win-rate table, PFSP and role rules (AlphaStar's pseudocode), and the
record of who played whom that a train task returns."""

from __future__ import annotations

import numpy as np
import pytest

from popmarl.scenario.league.roles import (
    Frozen,
    LeagueExploitersConfig,
    MainAgentsConfig,
    MainExploitersConfig,
    Opposition,
    RoleConfig,
    opponents,
    ready_to_snapshot,
)
from popmarl.scenario.league.table import WinRates, pfsp
from popmarl.data.outcomes import PlayedGames


def test_pfsp_weightings_follow_the_pseudocode() -> None:
    rates = np.array([0.1, 0.5, 0.9])
    assert np.allclose(pfsp(rates, "squared"), np.array([0.81, 0.25, 0.01]) / 1.07)
    assert np.allclose(pfsp(rates, "variance"), np.array([0.09, 0.25, 0.09]) / 0.43)
    assert np.allclose(pfsp(rates, "linear"), np.array([0.9, 0.5, 0.1]) / 1.5)
    assert np.allclose(pfsp(rates, "linear_capped"), np.array([0.5, 0.5, 0.1]) / 1.1)
    assert np.allclose(pfsp(rates, "uniform"), np.full(3, 1 / 3))


def test_pfsp_over_opponents_it_always_beats_is_uniform() -> None:
    # (1 - p)^2 is zero everywhere: the draw is uniform, not 0/0.
    assert np.allclose(pfsp([1.0, 1.0], "squared"), [0.5, 0.5])
    assert np.allclose(pfsp([0.0, 1.0], "variance"), [0.5, 0.5])
    with pytest.raises(ValueError, match="pfsp weighting 'cubic' is not allowed; allowed: squared"):
        pfsp([0.5], "cubic")


def test_win_rates_are_half_unplayed_and_count_draws_half() -> None:
    table = WinRates(decay=1.0, players=["a", "b", "c"])
    assert table.win_rate("a", ["b", "c"]).tolist() == [0.5, 0.5]
    table.record("a", "b", wins=3, draws=2, losses=5)
    assert table.win_rate("a", ["b"])[0] == pytest.approx(0.4)
    assert table.win_rate("b", ["a"])[0] == pytest.approx(0.6)  # b sees the games reversed
    assert table.games("a", ["b", "c"]).tolist() == [10, 0]


def test_a_round_of_games_decays_as_the_games_one_by_one_on_average() -> None:
    decay = 0.9
    one_by_one = WinRates(decay=decay, players=["a", "b"])
    at_once = WinRates(decay=decay, players=["a", "b"])
    for table in (one_by_one, at_once):
        table.record("a", "b", wins=4, draws=0, losses=0)
    for _ in range(3):  # three losses, one at a time...
        one_by_one.record("a", "b", wins=0, draws=0, losses=1)
    at_once.record("a", "b", wins=0, draws=0, losses=3)  # ...or as one round
    for name in ("games", "wins", "losses"):
        assert at_once.counts[name][0, 1] == pytest.approx(one_by_one.counts[name][0, 1])
    # The old wins weigh decay^3 of what they did.
    assert at_once.counts["wins"][0, 1] == pytest.approx(4 * (1 - decay ** 4) / (4 * (1 - decay)) * decay ** 3)


def test_a_game_against_a_copy_of_oneself_is_even() -> None:
    table = WinRates(decay=0.99, players=["a"])
    table.record("a", "a", wins=7, draws=0, losses=1)
    assert table.win_rate("a", ["a"])[0] == pytest.approx(0.5)


def test_the_table_round_trips_and_grows() -> None:
    table = WinRates(decay=0.99, players=["a", "b"])
    table.record("a", "b", wins=1, draws=1, losses=0)
    table.add("c")
    copy = WinRates.from_arrays(decay=0.99, players=table.players, arrays=table.arrays())
    assert copy.players == ["a", "b", "c"]
    assert np.array_equal(copy.win_rate("a", ["b", "c"]), table.win_rate("a", ["b", "c"]))
    with pytest.raises(ValueError, match="player 'c' is already in the table"):
        table.add("c")


def _league(rates: dict[tuple[str, str], float], frozen: list[Frozen]) -> Opposition:
    players = ["main", "exploiter", "league"] + [f.policy_id for f in frozen]
    table = WinRates(decay=1.0, players=players)
    for (home, away), rate in rates.items():
        table.record(home, away, wins=100 * rate, draws=0, losses=100 * (1 - rate))
    return Opposition(frozen=frozen, main_agents=["main"], table=table)


FROZEN = [Frozen(policy_id="p/0", parent="main", role="main_agent"),
          Frozen(policy_id="p/1", parent="exploiter", role="main_exploiter"),
          Frozen(policy_id="p/2", parent="main", role="main_agent")]


def test_a_main_agent_mixes_pfsp_self_play_and_verification() -> None:
    # It beats the exploiter's snapshot and its own snapshots (rising): no verification
    # needed, so the verification share goes to self-play.
    league = _league({("main", "p/0"): 0.8, ("main", "p/1"): 0.9, ("main", "p/2"): 0.95}, FROZEN)
    mixture = opponents("main_agent", "main", MainAgentsConfig(), league)
    assert sum(mixture.values()) == pytest.approx(1.0)
    assert mixture["main"] == pytest.approx(0.35 + 0.15)  # win rate 0.5 against itself > 0.3
    squared = pfsp([0.8, 0.9, 0.95], "squared")
    assert [mixture[f.policy_id] for f in FROZEN] == pytest.approx(0.5 * squared)


def test_a_main_agent_verifies_against_an_exploiter_that_beats_it() -> None:
    league = _league({("main", "p/0"): 0.8, ("main", "p/1"): 0.2, ("main", "p/2"): 0.95}, FROZEN)
    mixture = opponents("main_agent", "main", MainAgentsConfig(), league)
    # The verification share all goes to the one main exploiter snapshot.
    assert mixture["p/1"] == pytest.approx(0.15 + 0.5 * pfsp([0.8, 0.2, 0.95], "squared")[1])
    assert mixture["main"] == pytest.approx(0.35)


def test_a_main_agent_verifies_against_snapshots_it_forgot() -> None:
    # Rates against its own snapshots p/0, p/2: 0.4 then 0.9 (rising): p/0 and p/2 both kept,
    # and 0.4 < 0.7, so verification plays them by PFSP squared.
    league = _league({("main", "p/0"): 0.4, ("main", "p/1"): 0.9, ("main", "p/2"): 0.9}, FROZEN)
    mixture = opponents("main_agent", "main", MainAgentsConfig(), league)
    verification = pfsp([0.4, 0.9], "squared")
    base = 0.5 * pfsp([0.4, 0.9, 0.9], "squared")
    assert mixture["p/0"] == pytest.approx(base[0] + 0.15 * verification[0])
    assert mixture["p/2"] == pytest.approx(base[2] + 0.15 * verification[1])


def test_a_main_agent_too_weak_for_self_play_meets_its_opponents_snapshots() -> None:
    league = _league({("main", "main"): 0.5}, FROZEN)
    # Against a copy of itself the rate is 0.5 by construction; a second main agent it
    # loses to sends self-play to that agent's snapshots by PFSP variance.
    table = league.table
    table.add("rival")
    frozen = [*FROZEN, Frozen(policy_id="r/0", parent="rival", role="main_agent")]
    table.add("r/0")
    table.record("main", "rival", wins=10, draws=0, losses=90)
    table.record("main", "r/0", wins=50, draws=0, losses=50)
    mixture = opponents("main_agent", "main", MainAgentsConfig(pfsp_share=1.0, self_play_share=0.0,
                                                                 verification_share=0.0),
                        Opposition(frozen=frozen, main_agents=["rival"], table=table))
    assert "rival" not in mixture
    mixture = opponents("main_agent", "main", MainAgentsConfig(pfsp_share=0.0, self_play_share=1.0,
                                                                 verification_share=0.0),
                        Opposition(frozen=frozen, main_agents=["rival"], table=table))
    assert mixture == {"r/0": pytest.approx(1.0)}


def test_a_main_exploiter_falls_back_to_snapshots_while_it_cannot_win() -> None:
    config = MainExploitersConfig()
    strong = _league({("exploiter", "main"): 0.3}, FROZEN)
    assert opponents("main_exploiter", "exploiter", config, strong) == {"main": 1.0}
    weak = _league({("exploiter", "main"): 0.05, ("exploiter", "p/0"): 0.5, ("exploiter", "p/2"): 0.1}, FROZEN)
    mixture = opponents("main_exploiter", "exploiter", config, weak)
    assert list(mixture) == ["p/0", "p/2"]
    assert [mixture["p/0"], mixture["p/2"]] == pytest.approx(pfsp([0.5, 0.1], "variance"))


def test_a_league_exploiter_plays_every_frozen_player_by_pfsp() -> None:
    league = _league({("league", "p/0"): 0.9, ("league", "p/1"): 0.2}, FROZEN)
    mixture = opponents("league_exploiter", "league", LeagueExploitersConfig(), league)
    assert list(mixture.values()) == pytest.approx(pfsp([0.9, 0.2, 0.5], "linear_capped"))


def test_snapshots_wait_for_min_steps_then_a_win_rate_or_max_steps() -> None:
    config = RoleConfig(min_snapshot_steps=100, max_snapshot_steps=500, snapshot_win_rate=0.7)
    beaten = _league({("main", "p/0"): 0.8, ("main", "p/1"): 0.75, ("main", "p/2"): 0.9}, FROZEN)
    not_yet = _league({("main", "p/0"): 0.8, ("main", "p/1"): 0.6, ("main", "p/2"): 0.9}, FROZEN)
    assert not ready_to_snapshot("main_agent", "main", config, beaten, 99)
    assert ready_to_snapshot("main_agent", "main", config, beaten, 100)
    assert not ready_to_snapshot("main_agent", "main", config, not_yet, 499)
    assert ready_to_snapshot("main_agent", "main", config, not_yet, 500)
    # A main exploiter compares with the current main agents only.
    exploiter = _league({("exploiter", "main"): 0.71}, FROZEN)
    assert ready_to_snapshot("main_exploiter", "exploiter", config, exploiter, 100)
    assert not ready_to_snapshot("league_exploiter", "exploiter", config, exploiter, 100)


def test_role_configs_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="pfsp_share \\+ self_play_share \\+ verification_share must be 1, got 1.1"):
        MainAgentsConfig(pfsp_share=0.6)
    with pytest.raises(ValueError, match="a league needs at least one main agent"):
        MainAgentsConfig(count=0)
    with pytest.raises(ValueError, match="'cubic' is not allowed; allowed: squared"):
        LeagueExploitersConfig(weighting="cubic")
    with pytest.raises(ValueError, match="max_snapshot_steps \\(10\\) is below min_snapshot_steps \\(20\\)"):
        RoleConfig(min_snapshot_steps=20, max_snapshot_steps=10)


def test_played_games_count_outcomes_per_seating() -> None:
    games = PlayedGames(players=(("a", "x"), ("x", "a"), ("a", "x")),
                        returns=np.array([[1.0, -1.0], [0.0, 0.0], [-2.0, 2.0]]))
    counts = games.counts()
    assert list(counts) == [("a", "x"), ("x", "a")]
    assert counts[("a", "x")].tolist() == [[1, 1], [0, 0], [1, 1]]  # win / draw / loss per seat
    assert counts[("x", "a")].tolist() == [[0, 0], [1, 1], [0, 0]]
    assert PlayedGames().team_returns.tolist() == []
    joined = PlayedGames.join([games, PlayedGames()])
    assert joined is games and games.team_returns.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="2 games named, 1 rows of returns"):
        PlayedGames(players=(("a",), ("b",)), returns=np.zeros((1, 1)))
