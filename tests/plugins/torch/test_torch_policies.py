"""popmarl-torch's policies: masked acting, weights as arrays under each plugin's names, seat ids."""

from __future__ import annotations

import numpy as np
import pytest
from torch import nn

from popmarl.api import Box, Discrete, Observations, PolicySpace
from popmarl_torch.mlp import mlp
from popmarl_torch.nets import CategoricalActor, GaussianActor, QNet
from popmarl_torch.policies import UNIFORM_KEY, CategoricalPolicy, GaussianPolicy, QPolicy, uniform_initial
from popmarl_torch.seeding import seeded

OBS = Box(shape=(3,), low=-1.0, high=1.0)
DISCRETE = PolicySpace(population="p", agents=("a", "b"), observation_space=OBS, action_space=Discrete(n=4))
BOX = PolicySpace(population="p", agents=("a", "b"), observation_space=OBS, action_space=Box(shape=(2,), low=-1, high=1))


def batch(agent: str = "a", rows: int = 64) -> Observations:
    rng = np.random.default_rng(0)
    mask = rng.random((rows, 4)) < 0.5
    mask[:, 2] = True
    return Observations(obs=rng.uniform(-1, 1, (rows, 3)).astype(np.float32), mask=mask, agent=agent)


def test_weights_carry_each_plugins_names_and_round_trip() -> None:
    with seeded(0):
        tianshou = QPolicy(space=DISCRETE, qnet=QNet(3, 4, [8]))
        torchrl = QPolicy(space=DISCRETE, qnet=mlp(3, [8], 4), eps=0.5, uniform_mark=False, grouped=False)
    assert sorted(tianshou.get_weights()) == ["explore.eps", UNIFORM_KEY, "q.net.0.bias", "q.net.0.weight",
                                              "q.net.2.bias", "q.net.2.weight"]
    assert sorted(torchrl.get_weights()) == ["explore.eps", "q.0.bias", "q.0.weight", "q.2.bias", "q.2.weight"]
    with seeded(1):
        other = QPolicy(space=DISCRETE, qnet=mlp(3, [8], 4), uniform_mark=False, grouped=False)
    other.set_weights(torchrl.get_weights())
    assert other.eps == 0.5
    np.testing.assert_array_equal(other.q_values(batch()), torchrl.q_values(batch()))


def test_policies_never_choose_an_illegal_action() -> None:
    b = batch()
    legal = np.asarray(b.mask)
    rng = np.random.default_rng(1)
    with seeded(2):
        policies: list[QPolicy | CategoricalPolicy] = [QPolicy(space=DISCRETE, qnet=QNet(3, 4, [8]), eps=0.3),
                    CategoricalPolicy(space=DISCRETE, actor=CategoricalActor(3, 4, [8])),
                    uniform_initial(QPolicy(space=DISCRETE, qnet=QNet(3, 4, [8])))]
    for policy in policies:
        actions = policy.act(b, explore=True, rng=rng)
        assert legal[np.arange(len(b)), actions].all()
        probs = policy.probabilities(b)
        assert np.allclose(probs.sum(axis=1), 1.0) and not probs[~legal].any()


def test_the_uniform_mark_travels_with_the_weights_where_the_policy_carries_it() -> None:
    marked = uniform_initial(CategoricalPolicy(space=DISCRETE, actor=CategoricalActor(3, 4, [8])))
    fresh = CategoricalPolicy(space=DISCRETE, actor=CategoricalActor(3, 4, [8]))
    fresh.set_weights(marked.get_weights())
    assert fresh.uniform and fresh.group_key() is None  # uniform policies act alone
    unmarked = CategoricalPolicy(space=DISCRETE, actor=mlp(3, [8], 4), uniform_mark=False, grouped=False)
    unmarked.set_weights({**unmarked.get_weights(), UNIFORM_KEY: np.array(True)})
    assert not unmarked.uniform and UNIFORM_KEY not in unmarked.get_weights()


def test_only_grouped_relu_policies_have_a_group_key() -> None:
    grouped = QPolicy(space=DISCRETE, qnet=QNet(3, 4, [8]))
    assert grouped.group_key() is not None
    assert QPolicy(space=DISCRETE, qnet=mlp(3, [8], 4, activation=nn.ReLU), grouped=False).group_key() is None
    assert CategoricalPolicy(space=DISCRETE, actor=mlp(3, [8], 4, activation=nn.Tanh)).group_key() is None


def test_a_policy_with_seat_ids_reads_the_seat_of_the_batch() -> None:
    with seeded(3):
        policy = CategoricalPolicy(space=DISCRETE, actor=mlp(3 + 2, [8], 4), agent_id=True, uniform_mark=False,
                                   grouped=False)
    x = policy.inputs(batch("b", rows=2))
    assert x.shape == (2, 5) and x[:, 3:].tolist() == [[0.0, 1.0], [0.0, 1.0]]
    assert not np.allclose(policy.probabilities(batch("a")), policy.probabilities(batch("b")))
    with pytest.raises(ValueError, match=r"reads its seat's id, and the batch's agent 'c' is none of a, b$"):
        policy.inputs(batch("c"))


def test_a_gaussian_policy_samples_around_its_mean_and_plays_it_when_asked() -> None:
    with seeded(4):
        actor = GaussianActor(3, 2, [8], log_std_init=-3.0, activation=nn.Tanh, mean_key="mean")
    policy = GaussianPolicy(space=BOX, actor=actor, deterministic_eval=True, uniform_mark=False)
    b = Observations(obs=np.zeros((5, 3), np.float32), agent="a")
    mean = policy.act(b, explore=False, rng=np.random.default_rng(0))
    sample = policy.act(b, explore=True, rng=np.random.default_rng(0))
    assert mean.shape == sample.shape == (5, 2) and np.allclose(mean, mean[0]) and not np.allclose(sample, mean)
    assert np.abs(sample - mean).max() < 0.5
    assert sorted(policy.get_weights()) == ["actor.log_std", "actor.mean.0.bias", "actor.mean.0.weight",
                                            "actor.mean.2.bias", "actor.mean.2.weight"]
