"""The on-policy trainers' update (:func:`popmarl_tianshou.actor_critic.on_policy_update`
with the unchecked :func:`~popmarl_tianshou.actor_critic.categorical` and
:func:`~popmarl_tianshou.actor_critic.gaussian` distributions) equals Tianshou's own
``update(to_buffer(batch), batch_size, repeat)`` with its default distribution on the
same data: the same statistics and weights, update after update."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from tianshou.utils.net.discrete import dist_fn_categorical_from_logits
from tianshou.utils.torch_utils import policy_within_training_step
from tianshou_helpers import BOX_SPACE, MASKED_SPACE, algorithm, box_episodes, masked_episodes

from popmarl.interfaces.algorithm import PolicySpace, TrainerContext
from popmarl.interfaces.policy import Policy
from popmarl.data.episodes import Episode
from popmarl_tianshou.actor_critic import OnPolicyTrainer, on_policy_update
from popmarl_tianshou.batching import numpy_random, numpy_random_state, to_buffer, transitions

Collect = Callable[[Policy, np.random.Generator], list[Episode]]


def masked(_policy: Policy, rng: np.random.Generator) -> list[Episode]:
    return masked_episodes(40, rng)


def box(policy: Policy, rng: np.random.Generator) -> list[Episode]:
    return box_episodes(policy, 60, rng)


CASES: list[tuple[str, dict[str, Any], PolicySpace, Collect]] = [
    ("ppo", {}, MASKED_SPACE, masked),
    ("ppo", {"value_clip": True, "advantage_normalization": False, "gamma": 0.9, "batch_size": 32, "epochs": 3},
     MASKED_SPACE, masked),
    ("a2c", {}, MASKED_SPACE, masked),
    ("a2c", {"batch_size": 16, "epochs": 2, "max_grad_norm": None, "gae_lambda": 1.0}, MASKED_SPACE, masked),
    ("ppo", {"batch_size": 32, "epochs": 2}, BOX_SPACE, box),
    ("a2c", {}, BOX_SPACE, box),
]


def make(name: str, params: dict[str, Any], space: PolicySpace) -> tuple[Policy, OnPolicyTrainer]:
    algo = algorithm(name, hidden=[16], device="cpu", **params)
    policy = algo.make_policy(space=space, seed=5)
    trainer = algo.make_trainer(policy=policy, space=space, seed=5,
                                context=TrainerContext.alone(policy=policy, space=space))
    assert isinstance(trainer, OnPolicyTrainer)
    return policy, trainer


@pytest.mark.parametrize(("name", "params", "space", "collect"), CASES,
                         ids=[f"{c[0]}-{c[2].action_space}-{i}" for i, c in enumerate(CASES)])
def test_on_policy_update_equals_tianshou_update(name: str, params: dict[str, Any], space: PolicySpace,
                                                  collect: Collect) -> None:
    policy, reference = make(name, params, space)
    _, ours = make(name, params, space)
    if space is MASKED_SPACE:  # Tianshou's default distribution, argument checks and all
        reference.algorithm.policy.dist_fn = dist_fn_categorical_from_logits
    rng = np.random.default_rng(0)
    ref_rng, our_rng = numpy_random_state(7), numpy_random_state(7)
    for update in range(4):
        batch = transitions(collect(policy, rng), space)
        torch.manual_seed(update)  # the distributions' samples (not read by the losses)
        with policy_within_training_step(reference.algorithm.policy), numpy_random(ref_rng):
            expected = reference.algorithm.update(to_buffer(batch), batch_size=reference.batch_size,
                                                  repeat=reference.epochs)
        torch.manual_seed(update)
        with policy_within_training_step(ours.algorithm.policy), numpy_random(our_rng):
            got = on_policy_update(ours.algorithm, batch, batch_size=ours.batch_size, repeat=ours.epochs)
        for field in ("loss", "actor_loss", "vf_loss", "ent_loss"):
            assert getattr(got, field).mean == getattr(expected, field).mean, (update, field)
        assert got.gradient_steps == expected.gradient_steps
        for x, y in zip(reference.algorithm.state_dict().values(), ours.algorithm.state_dict().values(), strict=True):
            if isinstance(x, torch.Tensor):
                assert torch.equal(x, y), update
    np.testing.assert_array_equal(ref_rng["np"][1], our_rng["np"][1])  # type: ignore[index]
