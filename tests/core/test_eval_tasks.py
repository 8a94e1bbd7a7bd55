"""Evaluate tasks (``Backend.evaluate``): each seat's mean return and win / draw / loss,
seats played by fixed policies, mixtures drawn per episode or a joint distribution,
each task with its own episodes and seed; exact where the env allows, else sampled."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from popmarl.engine import executor
from popmarl.interfaces.backend import Components, RunSetup
from popmarl.builtin.exact_matrix_br import ExactMatrixBR
from popmarl.builtin.local_backend import LocalBackend
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.data.outcomes import outcome_counts, outcome_signs
from popmarl.data.population import AgentMapping
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import EvalTask
from popmarl.runs.runner import policy_spaces

#: Rock, paper, scissors, and the uniform mixture of the three (policy ids ``player_k/a``).
POLICIES = {0: [1, 0, 0], 1: [0, 1, 0], 2: [0, 0, 1], 3: [1 / 3, 1 / 3, 1 / 3]}


def rps_backend(exact: str = "auto", num_envs: int = 64) -> LocalBackend:
    """The local backend over rock-paper-scissors with :data:`POLICIES` in both seats."""
    env = MatrixEnv(game="rps")
    mapping = AgentMapping.resolve("per_player", env.agents)
    spaces = policy_spaces(env, mapping)
    setup = RunSetup(env_name="matrix", env_params={"game": "rps"}, mapping=mapping, spaces=spaces, seed=0,
                     algorithms={p: ("exact_matrix_br", {}) for p in spaces}, num_envs=num_envs,
                     exact_evaluation=exact)
    backend = LocalBackend()
    backend.start(setup, Components(env=env, algorithms={p: ExactMatrixBR() for p in spaces}))
    for population in spaces:
        for k, probs in POLICIES.items():
            backend.add_policy(f"{population}/{k}", {"probs": np.asarray(probs, dtype=float)})
    return backend


def mixture(seat: str, weights: dict[int, float]) -> MetaStrategy:
    return MetaStrategy.independent({seat: ([f"{seat}/{k}" for k in weights], list(weights.values()))})


def task(index: int = 0, episodes: int = 2000, seed: int = 0, **seats: Any) -> EvalTask:
    return EvalTask(index=(index,), episodes=episodes, seed=seed, **seats)


def test_outcome_signs_tell_win_draw_and_loss() -> None:
    returns = np.array([[1, -1], [0, 0], [3, 3], [2.0, 5.0]])
    assert outcome_signs(returns).tolist() == [[1, -1], [0, 0], [0, 0], [-1, 1]]
    # Three seats: the top seat wins only alone at the top; everyone below it loses.
    assert outcome_signs(np.array([[2, 2, 0], [3, 1, 0]])).tolist() == [[0, 0, -1], [1, -1, -1]]
    assert outcome_signs(np.array([[4.0]])).tolist() == [[0]]  # one seat: nobody to beat
    assert outcome_counts(returns).tolist() == [[1, 1], [2, 2], [1, 1]]


def test_sampled_outcomes_are_counts_over_the_episodes() -> None:
    backend = rps_backend(exact="never")
    (result,) = backend.evaluate([task(profile={"player_0": "player_0/0", "player_1": "player_1/3"}, episodes=3000)])
    assert not result.exact and not result.exact_outcomes and result.episodes == 3000
    counts = np.stack([result.wins, result.draws, result.losses])
    assert counts.sum(axis=0).tolist() == [3000, 3000]
    assert np.array_equal(counts[0], counts[2][::-1])  # one seat's win is the other's loss
    # rock against uniform: each outcome 1/3 (sd of a frequency ~0.0086)
    assert result.outcome_rates()[:, 0] == pytest.approx([1 / 3] * 3, abs=0.04)
    assert result.env_steps == 2 * 3000


def test_exact_outcomes_are_probabilities() -> None:
    (result,) = rps_backend().evaluate([task(profile={"player_0": "player_0/0", "player_1": "player_1/2"})])
    assert result.exact and result.exact_outcomes and result.episodes == 0
    assert result.returns.tolist() == [1.0, -1.0]  # rock beats scissors
    assert result.outcome_rates().tolist() == [[1, 0], [0, 0], [0, 1]]


def test_a_seat_mixture_is_drawn_per_episode_and_expanded_exactly() -> None:
    seats = {"profile": {"player_1": "player_1/0"}, "meta": mixture("player_0", {1: 0.75, 2: 0.25})}
    (exact,) = rps_backend().evaluate([task(**seats)])
    # paper (0.75) beats rock, scissors (0.25) loses to it
    assert exact.exact_outcomes and exact.returns.tolist() == [0.5, -0.5]
    assert exact.outcome_rates()[:, 0].tolist() == [0.75, 0.0, 0.25]
    (sampled,) = rps_backend(exact="never").evaluate([task(episodes=4000, **seats)])
    # sd of the mean return ~0.014, of a frequency ~0.007
    assert sampled.returns == pytest.approx([0.5, -0.5], abs=0.06)
    assert sampled.outcome_rates()[:, 0] == pytest.approx([0.75, 0.0, 0.25], abs=0.03)


def test_a_joint_distribution_draws_its_seats_together() -> None:
    # Half the games rock vs scissors, half scissors vs rock: always a decided game.
    joint = MetaStrategy.correlated(("player_0", "player_1"), (("player_0/0", "player_1/2"),
                                                               ("player_0/2", "player_1/0")), [0.5, 0.5])
    (exact,) = rps_backend().evaluate([task(meta=joint)])
    assert exact.outcome_rates()[:, 0].tolist() == [0.5, 0.0, 0.5]
    (sampled,) = rps_backend(exact="never").evaluate([task(meta=joint, episodes=2000)])
    assert sampled.draws.tolist() == [0, 0]  # drawn together: never rock vs rock
    assert sampled.wins[0] / 2000 == pytest.approx(0.5, abs=0.05)


def test_each_task_plays_its_own_episodes_and_seed() -> None:
    seats = {"profile": {"player_1": "player_1/3"}, "meta": mixture("player_0", {0: 0.5, 3: 0.5})}
    backend = rps_backend(exact="never")
    first, second, third = backend.evaluate([task(0, episodes=300, seed=1, **seats), task(1, episodes=700, seed=1, **seats),
                                             task(2, episodes=500, seed=2, **seats)])
    assert [r.episodes for r in (first, second, third)] == [300, 700, 500]
    assert [int(r.wins.sum() + r.draws.sum() + r.losses.sum()) for r in (first, second, third)] == [600, 1400, 1000]
    # A task of its own seed plays as when it is evaluated alone, whatever came with it.
    (alone,) = rps_backend(exact="never").evaluate([task(2, episodes=500, seed=2, **seats)])
    assert np.array_equal(alone.returns, third.returns) and np.array_equal(alone.wins, third.wins)
    (other_seed,) = rps_backend(exact="never").evaluate([task(2, episodes=500, seed=3, **seats)])
    assert not np.array_equal(other_seed.wins, third.wins)


def test_every_seat_is_named_once() -> None:
    with pytest.raises(ValueError, match="seat player_0 is named in both profile and meta"):
        task(profile={"player_0": "player_0/0"}, meta=mixture("player_0", {1: 1.0}))
    with pytest.raises(ValueError, match=r"missing \['player_1'\]"):
        rps_backend().evaluate([task(profile={"player_0": "player_0/0"})])


def test_psro_payoff_entries_skip_outcomes_on_an_exact_env() -> None:
    calls = []

    class Counting(MatrixEnv):
        def exact_outcomes(self, profiles):  # type: ignore[no-untyped-def]
            calls.append(len(profiles))
            return super().exact_outcomes(profiles)

    backend = rps_backend()
    backend._executor.env = Counting(game="rps")
    profile = {"player_0": "player_0/0", "player_1": "player_1/1"}
    (entry,) = backend.evaluate([task(profile=profile, outcomes=False)])
    assert entry.exact and entry.wins is None and entry.episodes == 0 and calls == []
    backend.evaluate([task(profile=profile)])
    assert calls == [1]


def test_mixtures_too_large_to_expand_are_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "EXACT_PROFILES", 3)
    both = (mixture("player_0", {0: 0.5, 1: 0.5}), mixture("player_1", {0: 0.5, 2: 0.5}))
    small, large = rps_backend().evaluate([task(0, meta=both[0], profile={"player_1": "player_1/0"}),
                                           task(1, meta=MetaStrategy.merged(*both), episodes=1000)])
    assert small.exact and small.exact_outcomes
    assert not large.exact and large.episodes == 1000
