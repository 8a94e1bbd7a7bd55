"""``sac``: squashed actions inside the Box, a trainer that resumes bit-identically, and
PSRO and ``marl`` on a Cournot duopoly ending near its known equilibrium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tianshou_helpers import BOX_SPACE, TARGETS, algorithm, box_episodes, run_psro, train_loop
from test_tianshou_trainer_state import PARAMS, check_resume

import popmarl
from popmarl.api import Box, ConfigError, Discrete, Observations, PolicySpace
from popmarl.runs.rundir import RunDirectory
from popmarl_tianshou.sac import from_box, to_box
from popmarl_torch.policies import TorchPolicy
from testkit.cournot import Cournot, CournotConfig, best_response

BOX = Box(shape=(2,), low=[0.0, -3.0], high=[9.0, 1.0])
ONE = Observations(obs=np.ones((1, 1), np.float32))
#: Small, fast settings that still learn a duopoly's best response within 1,000 decisions.
FAST = {"hidden": [32, 32], "lr": 3e-3, "critic_lr": 3e-3, "updates_per_step": 2.0}


@pytest.fixture
def cournot(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Registers the test env ``cournot`` for one test."""
    monkeypatch.setattr(popmarl, "envs", popmarl.envs.with_component("cournot", Cournot))
    yield "cournot"


def space(action: Box | Discrete) -> PolicySpace:
    return PolicySpace(population="p", agents=("a",), observation_space=Box(shape=(1,), low=1.0, high=1.0),
                       action_space=action)


def test_actions_are_squashed_into_the_box_and_evaluation_is_deterministic() -> None:
    policy = algorithm("sac", hidden=[8]).make_policy(space=space(BOX), seed=0)
    rng = np.random.default_rng(0)
    batch = Observations(obs=np.ones((500, 1), np.float32))
    explored = policy.act(batch, explore=True, rng=rng)
    assert explored.shape == (500, 2) and explored.dtype == np.float32
    assert np.all(explored >= BOX.low) and np.all(explored <= BOX.high)  # the engine's clip changes nothing
    assert np.all(BOX.clip(explored) == explored)
    assert explored.std(axis=0).min() > 0.5  # a fresh actor explores the whole Box
    greedy = policy.act(batch, explore=False, rng=rng)
    assert np.all(greedy == greedy[0])  # the mean, squashed: the same action every time
    np.testing.assert_allclose(greedy[0], (BOX.low + BOX.high) / 2, atol=0.1)  # a fresh mean is near 0


def test_box_and_squashed_actions_map_onto_each_other() -> None:
    squashed = np.array([[-1.0, 1.0], [0.0, 0.5]])
    np.testing.assert_allclose(to_box(squashed, BOX), [[0.0, 1.0], [4.5, 0.0]])
    np.testing.assert_allclose(from_box(to_box(squashed, BOX), BOX), squashed)


def test_unbounded_or_discrete_actions_are_a_config_error() -> None:
    sac = algorithm("sac")
    with pytest.raises(ConfigError, match="finite bounds"):
        sac.make_policy(space=space(Box(shape=(1,), low=0.0)), seed=0)
    with pytest.raises(ConfigError, match="needs Box actions"):
        sac.make_policy(space=space(Discrete(n=3)), seed=0)


def test_sac_learns_a_continuous_bandit() -> None:
    """One-step episodes of reward ``-(a - target(context))**2``; the targets are inside (-1, 1)."""
    sac = algorithm("sac", **FAST, batch_size=64, learning_starts=64)
    policy = train_loop(sac, BOX_SPACE, lambda p, n, rng: box_episodes(p, n, rng), rounds=25, per_round=40)
    actions = policy.act(Observations(obs=np.eye(len(TARGETS), dtype=np.float32)), explore=False,
                         rng=np.random.default_rng(0))
    np.testing.assert_allclose(actions.ravel(), TARGETS, atol=0.1)


def test_a_rebuilt_sac_trainer_continues_bit_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    """Optimisers, critics, their targets, alpha, the buffer (wrapping around) and both
    generators are restored: the resumed trainer's metrics and weights stay equal."""
    monkeypatch.setitem(PARAMS, "sac", {"hidden": [16], "batch_size": 16, "learning_starts": 16, "buffer_size": 100,
                                        "updates_per_step": 0.5})
    check_resume("sac", BOX_SPACE, lambda policy, rng: box_episodes(policy, 40, rng))


def meta_mean_quantities(run_dir: Path, summary: dict[str, Any], name: str = "sac") -> dict[str, float]:
    """Each firm's mean quantity under its final meta-strategy: every policy's
    deterministic action (the uniform initial policy's mean, the Box's centre), weighted."""
    stored = RunDirectory(run_dir)
    algo = algorithm(name, **FAST)
    env = Cournot()
    means = {}
    for population, info in summary["populations"].items():
        policy_space = PolicySpace(population=population, agents=(population,),
                                   observation_space=env.observation_space(population),
                                   action_space=env.action_space(population))
        mean = 0.0
        for policy_id, weight in zip(info["policies"], info["meta_strategy"], strict=True):
            policy = algo.make_policy(space=policy_space, seed=0)
            policy.set_weights(stored.load_policy(policy_id))
            assert isinstance(policy, TorchPolicy)
            quantity = env.config.q_max / 2 if policy.uniform else float(
                policy.act(ONE, explore=False, rng=np.random.default_rng(0))[0, 0])
            mean += weight * quantity
        means[population] = mean
    return means


def test_psro_with_sac_ends_near_the_cournot_equilibrium(tmp_path: Path, cournot: str) -> None:
    """PSRO's best responses on a duopoly follow best-response dynamics, which halve the
    distance to ``q* = 3`` per iteration: after 5 iterations the meta-strategy's mean
    quantities are within 5% of it."""
    summary, run_dir = run_psro(
        tmp_path, "sac_cournot", env={"name": cournot}, algorithm={"name": "sac", "params": FAST},
        solver={"name": "nash"}, stopping={"max_iterations": 5},
        training={"max_env_steps": 1000, "num_envs": 32, "episodes_per_update": 32},
        evaluation={"episodes_per_entry": 32, "versus_random_every": 0}, seed=0,
    )
    assert summary["status"] == "completed" and summary["iterations"] == 5
    q_star = CournotConfig().equilibrium
    means = meta_mean_quantities(run_dir, summary)
    assert set(means) == {"firm_0", "firm_1"}
    for mean in means.values():
        assert abs(mean - q_star) <= 0.05 * q_star, means


def test_marl_with_sac_moves_towards_the_equilibrium(tmp_path: Path, cournot: str) -> None:
    """Co-trained independent learners start at the Box's centre (4.5, each other's best
    response being 2.25) and move towards ``q* = 3``."""
    summary, run_dir = run_psro(
        tmp_path, "sac_marl", scenario="marl", env={"name": cournot}, algorithm={"name": "sac", "params": FAST},
        stopping={"max_iterations": 2}, training={"max_env_steps": 600, "num_envs": 32, "episodes_per_update": 32},
    )
    assert summary["status"] == "completed" and summary["iterations"] == 2
    config = CournotConfig()
    start = config.q_max / 2
    for population, info in summary["populations"].items():
        policy = algorithm("sac", **FAST).make_policy(
            space=PolicySpace(population=population, agents=(population,),
                              observation_space=Box(shape=(1,), low=1.0, high=1.0),
                              action_space=Box(shape=(1,), low=0.0, high=config.q_max)), seed=0)
        policy.set_weights(RunDirectory(run_dir).load_policy(info["policies"][-1]))
        quantity = float(policy.act(ONE, explore=False, rng=np.random.default_rng(0))[0, 0])
        assert abs(quantity - config.equilibrium) < abs(start - config.equilibrium) - 0.5, (population, quantity)
        assert best_response(config, quantity) > 0  # a sane, interior quantity
