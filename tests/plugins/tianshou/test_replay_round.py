"""The DQN trainer's round of samples (:class:`popmarl_tianshou.replay.ReplayRound`)
equals Tianshou's per-step ``buffer.sample`` and ``_preprocess_batch`` on the same data:
the same rows, actions and n-step returns at every step while the networks learn, the
same losses and weights after, and the buffer's generator left where Tianshou leaves it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tianshou.algorithm import DQN as TianshouDQN
from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode
from tianshou_helpers import MASKED_SPACE, algorithm, masked_episodes

from popmarl.interfaces.algorithm import TrainerContext
from popmarl_tianshou.batching import append, transitions
from popmarl_tianshou.dqn import DQNTrainer
from popmarl_tianshou.replay import ReplayRound

SPACE = MASKED_SPACE


def trainer(**params: Any) -> DQNTrainer:
    algo = algorithm("dqn", hidden=[16], batch_size=32, buffer_size=300, device="cpu", **params)
    policy = algo.make_policy(space=SPACE, seed=3)
    made = algo.make_trainer(policy=policy, space=SPACE, seed=3,
                             context=TrainerContext.alone(policy=policy, space=SPACE))
    assert isinstance(made, DQNTrainer)
    return made


def fill(*trainers: DQNTrainer, rounds: int = 4) -> None:
    """The same episodes into every trainer's buffer (300 rows: it wraps around)."""
    rng = np.random.default_rng(0)
    for _ in range(rounds):
        batch = transitions(masked_episodes(40, rng), SPACE)
        for t in trainers:
            append(t.buffer, batch)


CASES = [
    {"n_step": 1, "gamma": 1.0},
    {"n_step": 3, "gamma": 0.9, "target_update_freq": 4},
    {"n_step": 2, "gamma": 0.95, "double": False},
    {"n_step": 1, "gamma": 0.99, "target_update_freq": 0},
    {"n_step": 4, "gamma": 0.8, "target_update_freq": 0, "double": False, "huber_delta": 1.0},
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_round_equals_tianshou_sample_and_preprocess(params: dict[str, Any]) -> None:
    reference, ours = trainer(**params), trainer(**params)
    fill(reference, ours)
    steps, batch_size = 12, reference.config.batch_size
    a, b = reference.algorithm, ours.algorithm
    with policy_within_training_step(a.policy), torch_train_mode(a), \
            policy_within_training_step(b.policy), torch_train_mode(b):
        replay = ReplayRound(ours.buffer, steps=steps, batch_size=batch_size, gamma=params["gamma"],
                             n_step=params["n_step"])
        for step in range(steps):
            sample, indices = reference.buffer.sample(batch_size)
            expected = a._preprocess_batch(sample, reference.buffer, indices)
            got = replay.batch(step, b.target_values)
            np.testing.assert_array_equal(np.asarray(got.obs.obs), expected.obs.obs)
            np.testing.assert_array_equal(got.obs.mask.numpy(), expected.obs.mask.astype(np.float32))
            np.testing.assert_array_equal(got.act, expected.act)
            assert got.returns.dtype == expected.returns.dtype and got.returns.shape == expected.returns.shape
            assert torch.equal(got.returns, expected.returns), step
            # Tianshou's own loss on each: the networks stay equal step after step.
            assert a._update_with_batch(expected).loss == b._update_with_batch(got).loss
    for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y)
    reference_rng, ours_rng = reference.buffer._random_state.get_state(), ours.buffer._random_state.get_state()
    np.testing.assert_array_equal(reference_rng[1], ours_rng[1])
    assert reference_rng[2:] == ours_rng[2:]


@pytest.mark.parametrize("params", [{"target_update_freq": 5}, {"target_update_freq": 0},
                                    {"double": False}, {"double": False, "target_update_freq": 0}],
                         ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_target_values_equal_tianshou_target_q(params: dict[str, Any]) -> None:
    """The bootstrap values from tensors equal Tianshou's ``DQN._target_q`` (double DQN:
    the target network's value of the online network's best legal action) or, without
    double Q-learning, the target network's best legal value through module calls."""
    t = trainer(n_step=1, gamma=1.0, **params)
    fill(t, rounds=2)
    a = t.algorithm
    with policy_within_training_step(a.policy), torch_train_mode(a):
        for _ in range(7):  # the target network lags behind
            sample, sampled = t.buffer.sample(32)
            a._update_with_batch(a._preprocess_batch(sample, t.buffer, sampled))
    indices = np.arange(len(t.buffer))
    obs_next = t.buffer.get(indices, "obs_next")
    with torch.no_grad():
        if a.is_double:
            expected = TianshouDQN._target_q(a, t.buffer, indices)
        else:
            network = a.policy.model if a.model_old is None else a.model_old
            expected = a.policy.compute_q_value(network(obs_next)[0], obs_next.mask).max(dim=1)[0]
        got = a.target_values(torch.from_numpy(obs_next.obs), torch.from_numpy(obs_next.mask).float())
    assert torch.equal(got, expected)


def test_trainer_update_equals_tianshou_loop() -> None:
    """``DQNTrainer.update`` takes the gradient steps Tianshou's ``update(buffer,
    batch_size)`` loop takes on the same episodes: equal losses, weights and counters."""
    params = {"learning_starts": 32, "n_step": 2, "gamma": 0.9, "updates_per_step": 0.25, "target_update_freq": 3}
    reference, ours = trainer(**params), trainer(**params)
    rng = np.random.default_rng(1)
    for _ in range(5):
        played = masked_episodes(30, rng)
        metrics = ours.update(played)
        batch = transitions(played, SPACE)
        append(reference.buffer, batch)
        reference.decisions += len(batch)
        a = reference.algorithm
        steps = int(len(batch) * reference.config.updates_per_step + reference._owed)
        reference._owed = len(batch) * reference.config.updates_per_step + reference._owed - steps
        losses = []
        with policy_within_training_step(a.policy):
            for _ in range(steps):
                losses.append(a.update(reference.buffer, reference.config.batch_size).loss)
        if losses:
            assert metrics["loss"] == float(np.mean(losses))
    for x, y in zip(reference.algorithm.state_dict().values(), ours.algorithm.state_dict().values(), strict=True):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y)
