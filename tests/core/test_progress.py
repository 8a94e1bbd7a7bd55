"""The stop rule of a training run (:mod:`popmarl.engine.progress`): limits, targets over the
return window, and the plateau rule's standard-error test."""

from __future__ import annotations

import numpy as np

from popmarl.engine.progress import TrainingProgress
from popmarl.data.tasks import TrainBudget


def progress(**budget: object) -> TrainingProgress:
    fields: dict[str, object] = {"max_env_steps": 10_000, "window": 4, **budget}
    return TrainingProgress(TrainBudget(**fields), ["a", "b"])  # type: ignore[arg-type]


def play_round(rule: TrainingProgress, a: list[float], b: list[float]) -> None:
    rule.played("a", a)
    rule.played("b", b)
    rule.round_done()


def test_limits_stop_whatever_the_returns() -> None:
    rule = progress(max_episodes=50, max_wall_time_s=5.0)
    assert not rule.spent(9_999, 49, 4.9)
    assert rule.spent(10_000, 0, 0.0) and rule.spent(0, 50, 0.0) and rule.spent(0, 0, 5.0)


def test_a_target_needs_every_learners_full_window() -> None:
    rule = progress(target_win_rate=0.75)
    play_round(rule, [1, 1, 1], [1, 1, 1, 1])
    assert not rule.spent(0, 0, 0.0)  # a's window holds 3 of 4 games
    play_round(rule, [1], [-1, -1])
    assert not rule.spent(0, 0, 0.0)  # b wins half of its last 4
    play_round(rule, [], [1, 1, 1])
    assert rule.spent(0, 0, 0.0)  # b: 3 of its last 4


def test_the_plateau_rule_counts_rounds_without_a_significant_improvement() -> None:
    rule = progress(patience=2, min_env_steps=100)
    play_round(rule, [0, 0, 0, 0], [0, 0, 0, 0])  # the first full window is the best so far
    play_round(rule, [1, 1, 1, 1], [2, 2, 2, 2])  # both improve
    assert [rule.learners[k].stale for k in "ab"] == [0, 0]
    # a: mean 1.25, error sqrt(0.1875 / 4) ~ 0.217: 1.25 > 1 + 0.217, an improvement;
    # b: mean 2.1 > 2, but not by its error (0.436 / 2 = 0.218 for [2, 2, 1.6, 2.8]): stale.
    play_round(rule, [1, 1, 1, 2], [2, 2, 1.6, 2.8])
    assert [rule.learners[k].stale for k in "ab"] == [0, 1]
    play_round(rule, [1, 1, 1, 1], [2, 2, 2, 2])
    play_round(rule, [1, 1, 1, 1], [2, 2, 2, 2])
    assert [rule.learners[k].stale for k in "ab"] == [2, 3]
    assert not rule.spent(99, 0, 0.0)  # both stale, but fewer than min_env_steps played
    assert rule.spent(100, 0, 0.0)


def test_one_learner_still_improving_keeps_the_run_going() -> None:
    rule = progress(patience=1)
    for k in range(6):
        play_round(rule, [0.0] * 4, [float(k)] * 4)
        assert not rule.spent(0, 0, 0.0)
    assert rule.learners["a"].stale == 5 and rule.learners["b"].stale == 0
    assert np.isclose(rule.learners["b"].metrics()["window_return"], 5.0)


def test_the_stop_reason_names_the_condition_that_held() -> None:
    rule = progress(max_episodes=50, max_wall_time_s=5.0, patience=1, target_return=5.0)
    assert rule.stop_reason(9_999, 49, 4.9) is None
    assert [rule.stop_reason(10_000, 0, 0.0), rule.stop_reason(0, 50, 0.0), rule.stop_reason(0, 0, 5.0)] == [
        "max_env_steps", "max_episodes", "max_wall_time_s"]
    play_round(rule, [6] * 4, [6] * 4)
    assert rule.stop_reason(0, 0, 0.0) == "target_return"
    rule = progress(patience=1)
    play_round(rule, [0] * 4, [0] * 4)
    play_round(rule, [0] * 4, [0] * 4)
    assert rule.stop_reason(0, 0, 0.0) == "plateau"


def test_several_rounds_delivered_at_once_count_as_that_many() -> None:
    """A feed whose workers played ahead (the ray backend's, for an off-policy learner)
    hands over several rounds' games in one update: the plateau rule judges them as that
    many consecutive rounds, as if they had come one by one (else a learner fed in few,
    large rounds never reached its patience and trained to its cap: 200,000 env steps
    on Leduc where the local backend stopped at the 20,000 minimum)."""
    one_by_one, at_once = progress(patience=3), progress(patience=3)
    rounds = [([0.0] * 4, [0.0] * 4), ([1.0] * 4, [1.0] * 4), ([1.0] * 4, [1.0] * 4), ([1.0] * 4, [1.0] * 4),
              ([1.0] * 4, [1.0] * 4)]
    for a, b in rounds:
        play_round(one_by_one, a, b)
    at_once.played("a", [r for a, _ in rounds for r in a])
    at_once.played("b", [r for _, b in rounds for r in b])
    at_once.round_done(len(rounds))
    for rule in (one_by_one, at_once):
        assert [rule.learners[k].stale for k in "ab"] == [3, 3]
        assert rule.stop_reason(0, 0, 0.0) == "plateau"
    lumped = progress(patience=3)  # the same games judged as one round: not a plateau
    lumped.played("a", [r for a, _ in rounds for r in a])
    lumped.played("b", [r for _, b in rounds for r in b])
    lumped.round_done()
    assert [lumped.learners[k].stale for k in "ab"] == [0, 0] and lumped.stop_reason(0, 0, 0.0) is None
