"""``td3``: a deterministic actor squashed into the Box, exploration noise inside it, a
trainer that resumes bit-identically, and PSRO on a Cournot duopoly ending near its
known equilibrium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from testkit.cournot import Cournot, CournotConfig
from tianshou.data import Batch
from tianshou_helpers import BOX_SPACE, algorithm, box_episodes, run_psro
from test_sac import FAST, meta_mean_quantities
from test_tianshou_trainer_state import PARAMS, check_resume

import popmarl
from popmarl.api import Box, ConfigError, Discrete, Observations, PolicySpace, TrainerContext
from popmarl_tianshou.td3 import DeterministicBoxPolicy, TD3Trainer

BOX = Box(shape=(2,), low=[0.0, -3.0], high=[9.0, 1.0])
TD3_FAST = {**FAST, "updates_per_step": 1.0}


@pytest.fixture
def cournot(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Registers the test env ``cournot`` for one test."""
    monkeypatch.setattr(popmarl, "envs", popmarl.envs.with_component("cournot", Cournot))
    yield "cournot"


def space(action: Box | Discrete) -> PolicySpace:
    return PolicySpace(population="p", agents=("a",), observation_space=Box(shape=(4,), low=0.0, high=1.0),
                       action_space=action)


def test_actions_stay_in_the_box_and_evaluation_is_deterministic() -> None:
    td3 = algorithm("td3", hidden=[8], exploration_noise=0.5)
    policy = td3.make_policy(space=space(BOX), seed=0)
    assert isinstance(policy, DeterministicBoxPolicy)
    with torch.no_grad():  # an actor far from the centre: noise would push half its actions out
        policy.actor.net[-1].bias.copy_(torch.tensor([3.0, -3.0]))
    rng = np.random.default_rng(0)
    batch = Observations(obs=np.random.default_rng(1).uniform(size=(500, 4)).astype(np.float32))
    explored = policy.act(batch, explore=True, rng=rng)
    assert explored.shape == (500, 2) and explored.dtype == np.float32
    assert np.all(BOX.clip(explored) == explored)  # the engine's clip changes nothing
    greedy = policy.act(batch, explore=False, rng=rng)
    np.testing.assert_array_equal(greedy, policy.act(batch, explore=False, rng=np.random.default_rng(5)))
    assert np.all(BOX.clip(greedy) == greedy)
    assert np.abs(explored - greedy).max(axis=0).min() > 0.1  # exploring adds noise; evaluating does not
    np.testing.assert_allclose(greedy.mean(axis=0), [np.tanh(3.0) * 4.5 + 4.5, 2 * np.tanh(-3.0) - 1.0], atol=0.05)


def test_unbounded_or_discrete_actions_are_a_config_error() -> None:
    td3 = algorithm("td3")
    with pytest.raises(ConfigError, match="algorithm td3: .*finite bounds"):
        td3.make_policy(space=space(Box(shape=(1,), low=0.0)), seed=0)
    with pytest.raises(ConfigError, match="algorithm td3: .*needs Box actions"):
        td3.make_policy(space=space(Discrete(n=3)), seed=0)


def test_the_actor_waits_for_every_second_critic_update() -> None:
    """Delayed policy updates: 10 gradient steps change the critics 10 times and the
    actor (and the target networks) 5 times; the smoothed target action stays in [-1, 1]."""
    td3 = algorithm("td3", hidden=[8], batch_size=8, learning_starts=8, updates_per_step=0.25, policy_noise=5.0,
                    noise_clip=0.0)
    policy = td3.make_policy(space=BOX_SPACE, seed=0)
    trainer = td3.make_trainer(policy=policy, space=BOX_SPACE, seed=0,
                               context=TrainerContext.alone(policy=policy, space=BOX_SPACE))
    assert isinstance(trainer, TD3Trainer)
    metrics = trainer.update(box_episodes(policy, 40, np.random.default_rng(0)))
    assert metrics["gradient_steps"] == 10 and trainer.algorithm._cnt == 10
    algo = trainer.algorithm
    adam_steps = {name: {float(slot["step"]) for slot in optim._optim.state.values()}
                  for name, optim in (("actor", algo.policy_optim), ("critic", algo.critic_optim))}
    assert adam_steps == {"actor": {5.0}, "critic": {10.0}}
    action = algo._target_q_compute_action(Batch(obs=Batch(obs=torch.eye(4)), info=Batch())).act
    assert action.abs().max() == 1.0  # noise of deviation 5, unclipped, then the squashed Box's bound


def test_a_rebuilt_td3_trainer_continues_bit_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    """Optimisers, critics, their targets, the target actor, the delay counter, the
    buffer (wrapping around) and both generators are restored: the resumed trainer's
    metrics and weights stay equal."""
    monkeypatch.setitem(PARAMS, "td3", {"hidden": [16], "batch_size": 16, "learning_starts": 16, "buffer_size": 100,
                                        "updates_per_step": 0.125, "update_actor_freq": 3})
    check_resume("td3", BOX_SPACE, lambda policy, rng: box_episodes(policy, 40, rng))


@pytest.mark.slow
def test_psro_with_td3_ends_near_the_cournot_equilibrium(tmp_path: Path, cournot: str) -> None:
    """PSRO's best responses on a duopoly follow best-response dynamics, which halve the
    distance to ``q* = 3`` per iteration: after 5 iterations the meta-strategy's mean
    quantities are within 5% of it. A deterministic actor explores only near its own
    action, so each best response gets more decisions than ``sac``'s (and as many
    gradient steps: one per decision)."""
    summary, run_dir = run_psro(
        tmp_path, "td3_cournot", env={"name": cournot}, algorithm={"name": "td3", "params": TD3_FAST},
        solver={"name": "nash"}, stopping={"max_iterations": 5},
        training={"max_env_steps": 2000, "num_envs": 32, "episodes_per_update": 32},
        evaluation={"episodes_per_entry": 32, "versus_random_every": 0}, seed=0,
    )
    assert summary["status"] == "completed" and summary["iterations"] == 5
    q_star = CournotConfig().equilibrium
    means = meta_mean_quantities(run_dir, summary, "td3")
    assert set(means) == {"firm_0", "firm_1"}
    for mean in means.values():
        assert abs(mean - q_star) <= 0.05 * q_star, means
