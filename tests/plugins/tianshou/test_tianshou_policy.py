"""Units of the tianshou plugin: masked acting, weights, checkpoints, seeding, configs,
the masked DQN target and the Episode -> Batch conversion."""

from __future__ import annotations

import io
from pathlib import Path

import attrs
import numpy as np
import pytest
import torch
from tianshou_helpers import ACTOR_CRITIC, ALGORITHMS, BOX_SPACE, Bandit, algorithm, box_episodes, run_psro, space

import popmarl
from popmarl.errors import CheckpointError, ConfigError
from popmarl.interfaces.algorithm import TrainerContext
from popmarl.interfaces.policy import ExplicitPolicy
from popmarl.data.episodes import Episode, Observations
from popmarl.interfaces.spaces import Box, Discrete
from popmarl_tianshou import load_checkpoint, save_checkpoint
from popmarl_tianshou.batching import to_buffer, transitions
from popmarl_tianshou.dqn import DQNTrainer

DISCRETE = space(Box(shape=(3, 2)), Discrete(n=6))


def masked_batch(rows: int = 500, seed: int = 0) -> Observations:
    rng = np.random.default_rng(seed)
    mask = rng.random((rows, 6)) < 0.3
    mask[np.arange(rows), rng.integers(6, size=rows)] = True
    return Observations(obs=rng.standard_normal((rows, 3, 2)).astype(np.float32), mask=mask)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_illegal_actions_are_never_chosen(name):
    policy = algorithm(name).make_policy(space=DISCRETE, seed=0)
    if name == "dqn":
        policy.eps = 1.0  # explore uniformly: the random branch must respect the mask too
    batch = masked_batch()
    rng = np.random.default_rng(1)
    for explore in (True, False):
        for _ in range(5):
            actions = policy.act(batch, explore=explore, rng=rng)
            assert actions.shape == (len(batch),)
            assert batch.mask[np.arange(len(batch)), actions].all()
    probs = policy.probabilities(batch)
    assert probs.shape == (len(batch), 6)
    assert np.all(probs[~batch.mask] == 0.0)
    assert np.allclose(probs.sum(axis=1), 1.0)


def test_dqn_evaluates_greedily_and_explores_epsilon_greedily():
    policy = algorithm("dqn").make_policy(space=DISCRETE, seed=0)
    batch = masked_batch()
    probs = policy.probabilities(batch)
    assert set(np.unique(probs)) <= {0.0, 1.0}  # one-hot: the greedy legal action
    greedy = probs.argmax(axis=1)
    q = policy.q_values(batch)
    assert np.array_equal(greedy, np.where(batch.mask, q, -np.inf).argmax(axis=1))
    rng = np.random.default_rng(0)
    policy.eps = 0.0
    assert np.array_equal(policy.act(batch, explore=True, rng=rng), greedy)
    assert np.array_equal(policy.act(batch, explore=False, rng=rng), greedy)
    policy.eps = 1.0
    assert np.array_equal(policy.act(batch, explore=False, rng=rng), greedy)
    assert not np.array_equal(policy.act(batch, explore=True, rng=rng), greedy)


@pytest.mark.parametrize("name", ACTOR_CRITIC)
def test_actor_critic_probabilities_are_the_masked_softmax(name):
    policy = algorithm(name).make_policy(space=DISCRETE, seed=0)
    batch = masked_batch(rows=50)
    with torch.no_grad():
        logits = policy.actor(torch.as_tensor(batch.obs.reshape(50, -1)))[0].double().numpy()
    expected = np.where(batch.mask, np.exp(logits - logits.max(axis=1, keepdims=True)), 0.0)
    expected /= expected.sum(axis=1, keepdims=True)
    assert np.allclose(policy.probabilities(batch), expected)
    assert isinstance(policy, ExplicitPolicy)


@pytest.mark.parametrize("name", ACTOR_CRITIC)
def test_box_actions_are_the_gaussian_sample_unclipped(name):
    """The policy returns its own sample (the action PPO/A2C train on); the rollout,
    not the policy, clips what the env gets."""
    policy = algorithm(name, log_std_init=0.0).make_policy(space=BOX_SPACE, seed=0)
    batch = Observations(obs=np.eye(4, dtype=np.float32)[np.arange(400) % 4])
    rng = np.random.default_rng(0)
    actions = policy.act(batch, explore=True, rng=rng)
    assert actions.shape == (400, 1) and actions.dtype == np.float32
    assert np.unique(actions).size > 200  # sampled, not constant
    assert (np.abs(actions) > 1.0).sum() > 50  # std 1: many samples past the bounds, kept as drawn
    deterministic = algorithm(name, deterministic_eval=True).make_policy(space=BOX_SPACE, seed=0)
    first = deterministic.act(batch, explore=False, rng=rng)
    assert np.array_equal(first, deterministic.act(batch, explore=False, rng=rng))


@pytest.mark.parametrize("name", ALGORITHMS)
def test_the_initial_policy_is_uniform_over_the_legal_actions_and_stays_so_through_its_weights(name):
    algo = algorithm(name)
    initial = algo.initial_policy(space=DISCRETE, seed=0)
    batch = masked_batch(rows=600)
    uniform = batch.mask / batch.mask.sum(axis=1, keepdims=True)
    assert np.allclose(initial.probabilities(batch), uniform)
    all_legal = Observations(obs=np.zeros((6000, 3, 2), np.float32), mask=np.ones((6000, 6), bool))
    rng = np.random.default_rng(0)
    for explore in (True, False):
        actions = initial.act(batch, explore=explore, rng=rng)
        assert batch.mask[np.arange(len(batch)), actions].all()
        counts = np.bincount(initial.act(all_legal, explore=explore, rng=rng), minlength=6)
        assert np.all(np.abs(counts - 1000) < 150), counts  # 5 sigma of a uniform draw
    # Frozen policies travel as weights: rebuilt from them it is still uniform, and a
    # learner's weights loaded into the same object make it play its network again.
    fresh = algo.make_policy(space=DISCRETE, seed=0)
    assert not np.allclose(fresh.probabilities(batch), uniform)
    rebuilt = algo.make_policy(space=DISCRETE, seed=3)
    rebuilt.set_weights(initial.get_weights())
    assert np.allclose(rebuilt.probabilities(batch), uniform)
    rebuilt.set_weights(fresh.get_weights())
    assert np.array_equal(rebuilt.probabilities(batch), fresh.probabilities(batch))


@pytest.mark.parametrize("name", ACTOR_CRITIC)
def test_the_initial_box_policy_is_uniform_in_the_box(name):
    initial = algorithm(name).initial_policy(space=BOX_SPACE, seed=0)
    actions = initial.act(Observations(obs=np.zeros((4000, 4), np.float32)), explore=False,
                          rng=np.random.default_rng(0))
    assert actions.shape == (4000, 1) and actions.dtype == np.float32
    assert actions.min() >= -1.0 and actions.max() <= 1.0
    assert np.histogram(actions, bins=4, range=(-1.0, 1.0))[0].min() > 900  # ~1000 per quarter


@pytest.mark.parametrize("name", ALGORITHMS)
def test_weights_round_trip_as_plain_array_copies(name):
    algo = algorithm(name, hidden=[16, 8])
    a, b = algo.make_policy(space=DISCRETE, seed=0), algo.make_policy(space=DISCRETE, seed=1)
    batch = masked_batch(rows=64)
    weights = a.get_weights()
    assert all(isinstance(v, np.ndarray) for v in weights.values())
    buffer = io.BytesIO()
    np.savez(buffer, **weights)  # what the run directory stores
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as data:
        loaded = {k: data[k] for k in data.files}
    assert not np.allclose(a.probabilities(batch), b.probabilities(batch))
    b.set_weights(loaded)
    assert np.array_equal(a.probabilities(batch), b.probabilities(batch))
    # Copies: changing the policy afterwards leaves an earlier snapshot alone.
    snapshot = a.get_weights()
    for module in a.modules.values():
        with torch.no_grad():
            for p in module.parameters():
                p.add_(1.0)
    assert all(np.array_equal(snapshot[k], weights[k]) for k in weights)
    assert not all(np.array_equal(a.get_weights()[k], weights[k]) for k in weights)


def test_dqn_epsilon_travels_with_the_weights():
    algo = algorithm("dqn", eps_start=0.7)
    learner, actor = algo.make_policy(space=DISCRETE, seed=0), algo.make_policy(space=DISCRETE, seed=0)
    algo.make_trainer(policy=learner, space=DISCRETE, seed=0,
                      context=TrainerContext.alone(policy=learner, space=DISCRETE))
    actor.set_weights(learner.get_weights())
    assert actor.eps == pytest.approx(0.7)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_checkpoint_round_trip_with_weights_only(tmp_path: Path, name, monkeypatch):
    algo = algorithm(name)
    policy_space = DISCRETE if name == "dqn" else BOX_SPACE
    a, b = algo.make_policy(space=policy_space, seed=0), algo.make_policy(space=policy_space, seed=1)
    path = tmp_path / "policy.pt"
    save_checkpoint(a, path)
    calls = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *args, **kw: calls.append(kw) or real_load(*args, **kw))
    assert load_checkpoint(path, b) is b
    assert calls and calls[0]["weights_only"] is True
    wa, wb = a.get_weights(), b.get_weights()
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_checkpoint_errors(tmp_path: Path):
    q = algorithm("dqn").make_policy(space=DISCRETE, seed=0)
    actor = algorithm("ppo").make_policy(space=DISCRETE, seed=0)
    path = tmp_path / "q.pt"
    save_checkpoint(q, path)
    with pytest.raises(CheckpointError, match="QPolicy"):
        load_checkpoint(path, actor)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError):
        load_checkpoint(junk, q)
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "missing.pt", q)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_policies_and_training_are_deterministic_in_the_seed(name):
    bandit = Bandit.make()
    algo = algorithm(name, learning_starts=0) if name == "dqn" else algorithm(name)

    def trained(seed: int) -> dict[str, np.ndarray]:
        learner = algo.make_policy(space=bandit.space, seed=seed)
        trainer = algo.make_trainer(policy=learner, space=bandit.space, seed=seed,
                                    context=TrainerContext.alone(policy=learner, space=bandit.space))
        rng = np.random.default_rng(seed)
        for _ in range(3):
            trainer.update(bandit.episodes(learner, 200, rng))
        return dict(learner.get_weights())

    np.random.seed(123)
    first = trained(0)
    np.random.seed(456)  # the global generators must not matter
    torch.manual_seed(7)
    second = trained(0)
    other = trained(1)
    assert all(np.array_equal(first[k], second[k]) for k in first)
    assert not all(np.array_equal(first[k], other[k]) for k in first)


def test_updates_leave_the_global_numpy_generator_alone():
    bandit = Bandit.make()
    algo = algorithm("ppo")
    learner = algo.make_policy(space=bandit.space, seed=0)
    trainer = algo.make_trainer(policy=learner, space=bandit.space, seed=0,
                                context=TrainerContext.alone(policy=learner, space=bandit.space))
    episodes = bandit.episodes(learner, 300, np.random.default_rng(0))
    np.random.seed(5)
    trainer.update(episodes)
    after = np.random.random()
    np.random.seed(5)
    assert after == np.random.random()


def test_masked_target_ignores_illegal_next_actions():
    """The bootstrap target is Q of the best *legal* next action, double DQN or not."""
    policy_space = space(Box(shape=(2,)), Discrete(n=3))
    for double in (True, False):
        algo = algorithm("dqn", hidden=[4], double=double, target_update_freq=1)
        policy = algo.make_policy(space=policy_space, seed=0)
        last = policy.qnet.net[-1]
        with torch.no_grad():
            for p in policy.qnet.parameters():
                p.zero_()
            last.bias.copy_(torch.tensor([5.0, 1.0, 2.0]))  # Q = (5, 1, 2) everywhere
        trainer = algo.make_trainer(policy=policy, space=policy_space, seed=0,
                                    context=TrainerContext.alone(policy=policy, space=policy_space))
        assert isinstance(trainer, DQNTrainer)
        trainer.algorithm._update_lagged_network_weights()
        episode = Episode(agent="a", obs=np.zeros((2, 2), np.float32), actions=np.array([0, 1]),
                          rewards=np.array([0.0, 1.0], np.float32), masks=np.array([[1, 1, 1], [0, 1, 1]], bool),
                          terminated=True, truncated=False, episode_return=1.0)
        buffer = to_buffer(transitions([episode], policy_space))
        with torch.no_grad():
            target = trainer.algorithm._target_q(buffer, np.array([0]))
        assert float(target[0]) == pytest.approx(2.0)  # action 0 (Q=5) is illegal next


def test_transitions_follow_the_episode_contract():
    policy_space = space(Box(shape=(1,)), Discrete(n=2))
    episode = Episode(agent="a", obs=np.array([[1.0], [2.0], [3.0]], np.float32), actions=np.array([0, 1, 0]),
                      rewards=np.array([0.0, 0.5, 1.0], np.float32), masks=np.array([[1, 1], [0, 1], [1, 0]], bool),
                      terminated=True, truncated=False, episode_return=1.5)
    short = Episode(agent="a", obs=np.array([[9.0]], np.float32), actions=np.array([1]),
                    rewards=np.array([-1.0], np.float32), masks=None, terminated=False, truncated=True,
                    episode_return=-1.0, final_obs=np.array([7.0], np.float32), final_mask=np.array([False, True]))
    batch = transitions([episode, short], policy_space)
    assert batch.obs.obs[:, 0].tolist() == [1, 2, 3, 9]
    assert batch.obs_next.obs[:, 0].tolist() == [2, 3, 3, 7]  # a truncated episode's: the observation at the cut
    assert batch.obs_next.mask[:2].tolist() == [[False, True], [True, False]]
    assert batch.obs_next.mask[3].tolist() == [False, True]
    assert batch.obs.mask[3].tolist() == [True, True]  # no mask: every action legal
    assert batch.done.tolist() == [False, False, True, True]
    assert batch.terminated.tolist() == [False, False, True, False]
    assert batch.truncated.tolist() == [False, False, False, True]
    assert batch.rew.tolist() == [0.0, 0.5, 1.0, -1.0]
    assert batch.act.tolist() == [0, 1, 0, 1]


def test_box_transitions_keep_vector_actions():
    episodes = box_episodes(algorithm("ppo").make_policy(space=BOX_SPACE, seed=0), 5, np.random.default_rng(0))
    batch = transitions(episodes, BOX_SPACE)
    assert batch.act.shape == (5, 1) and batch.act.dtype == np.float32
    assert "mask" not in batch.obs.get_keys()


def test_dqn_rejects_box_actions():
    with pytest.raises(ConfigError, match="discrete actions"):
        algorithm("dqn").make_policy(space=BOX_SPACE, seed=0)


@pytest.mark.parametrize(("name", "params", "message"), [
    ("dqn", {"lr": 0}, "algorithm.params.lr: must be > 0"),
    ("dqn", {"hidden": [64, 0]}, "algorithm.params.hidden"),
    ("dqn", {"eps_end": 1.5}, "algorithm.params.eps_end"),
    ("dqn", {"gama": 0.9}, "did you mean 'gamma'"),
    ("ppo", {"clip": -0.1}, "algorithm.params.clip"),
    ("ppo", {"gae_lambda": 2}, "algorithm.params.gae_lambda"),
    ("a2c", {"epochs": 0}, "algorithm.params.epochs"),
])
def test_invalid_params_are_config_errors_with_their_path(tmp_path: Path, name, params, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        run_psro(tmp_path, "bad", env={"name": "matrix"}, algorithm={"name": name, "params": params})


def test_defaults_resolve_into_the_run_config(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("env: matrix\nalgorithm: {name: dqn, params: {lr: 0.01}}\n", encoding="utf-8")
    params = popmarl.load_config(str(path)).algorithm.params
    assert params["lr"] == 0.01 and params["hidden"] == [128, 128] and params["double"] is True


def _bootstrap_episodes(cut: bool) -> list[Episode]:
    """Two two-step episodes on Box observations, the second cut off (or not) after a
    reward of 1 on its last decision."""
    ended = Episode(agent="a", obs=np.array([[0.1, 0.2], [0.3, 0.4]], np.float32), actions=np.array([0, 1]),
                    rewards=np.array([0.0, 2.0], np.float32), masks=None, terminated=True, truncated=False,
                    episode_return=2.0)
    final = dict(final_obs=np.array([0.9, -0.5], np.float32), final_mask=np.array([True, False, True])) if cut else {}
    second = Episode(agent="a", obs=np.array([[0.5, 0.6], [0.7, 0.8]], np.float32), actions=np.array([2, 0]),
                     rewards=np.array([0.0, 1.0], np.float32), masks=None, terminated=not cut, truncated=cut,
                     episode_return=1.0, **final)
    return [ended, second]


@pytest.mark.parametrize("name", ACTOR_CRITIC)
def test_truncated_episodes_bootstrap_from_the_value_at_the_cut(name):
    """Tianshou's GAE returns: r + γ·V(observation at the cut) for the last transition of a
    truncated episode, r for a terminated one."""
    policy_space = space(Box(shape=(2,)), Discrete(n=3))
    algo = algorithm(name, gamma=0.9, gae_lambda=0.95)
    policy = algo.make_policy(space=policy_space, seed=0)
    trainer = algo.make_trainer(policy=policy, space=policy_space, seed=0,
                                context=TrainerContext.alone(policy=policy, space=policy_space))
    critic = trainer.algorithm.critic
    for cut in (True, False):
        batch = transitions(_bootstrap_episodes(cut), policy_space)
        buffer = to_buffer(batch)
        indices = np.arange(len(buffer))
        returns = trainer.algorithm._add_returns_and_advantages(buffer[indices], buffer, indices).returns.cpu().numpy()
        assert returns[1] == pytest.approx(2.0)  # the terminated episode: nothing after its last reward
        with torch.no_grad():
            v_cut = float(critic(torch.tensor([[0.9, -0.5]])).reshape(()))
        assert abs(v_cut) > 1e-3
        assert returns[3] == pytest.approx(1.0 + 0.9 * v_cut if cut else 1.0, rel=1e-5)


def test_dqn_bootstraps_truncated_episodes_from_the_cut_observation():
    """Tianshou's n-step target: r + γ·max over the legal actions at the cut of Q, for a
    truncated episode's last transition; r for a terminated one."""
    policy_space = space(Box(shape=(2,)), Discrete(n=3))
    algo = algorithm("dqn", gamma=0.9, n_step=2, target_update_freq=1)
    policy = algo.make_policy(space=policy_space, seed=0)
    trainer = algo.make_trainer(policy=policy, space=policy_space, seed=0,
                                context=TrainerContext.alone(policy=policy, space=policy_space))
    assert isinstance(trainer, DQNTrainer)
    trainer.algorithm._update_lagged_network_weights()
    with torch.no_grad():
        q_cut = policy.qnet(torch.tensor([[0.9, -0.5]]))[0].numpy()[0]
    best_legal = float(max(q_cut[0], q_cut[2]))  # action 1 is illegal at the cut
    assert abs(best_legal) > 1e-3
    for cut in (True, False):
        buffer = to_buffer(transitions(_bootstrap_episodes(cut), policy_space))
        indices = np.arange(len(buffer))
        returns = trainer.algorithm._preprocess_batch(buffer[indices], buffer, indices).returns.cpu().numpy().reshape(-1)
        assert returns[1] == pytest.approx(2.0)
        bootstrap = 0.9 * best_legal if cut else 0.0
        assert returns[3] == pytest.approx(1.0 + bootstrap, rel=1e-5)
        assert returns[2] == pytest.approx(0.9 * 1.0 + 0.9 * bootstrap, rel=1e-5)  # two steps, then the cut
    # Not the learner's move at the cut (a turn-based game's mask is all False then):
    # the bootstrap maximises over every action instead of over none.
    ended, second = _bootstrap_episodes(True)
    idle = attrs.evolve(second, final_mask=np.zeros(3, bool))
    buffer = to_buffer(transitions([ended, idle], policy_space))
    indices = np.arange(len(buffer))
    returns = trainer.algorithm._preprocess_batch(buffer[indices], buffer, indices).returns.cpu().numpy().reshape(-1)
    assert buffer.obs_next.mask[3].all()
    assert returns[3] == pytest.approx(1.0 + 0.9 * float(q_cut.max()), rel=1e-5)


@pytest.mark.parametrize("name", ACTOR_CRITIC)
def test_a_warm_started_actor_keeps_its_features_and_explores_again(name):
    """A new best response started from a near-deterministic policy gets a fresh output
    layer: near-uniform probabilities over the legal actions, the hidden layers kept."""
    algo = algorithm(name)
    trained = algo.make_policy(space=DISCRETE, seed=0)
    with torch.no_grad():
        trained.actor.net[-1].weight.mul_(1000.0)  # near-deterministic, as after long training
        trained.actor.net[-1].bias.copy_(30.0 * torch.arange(6.0))
    batch = masked_batch(rows=200)
    legal = batch.mask.sum(axis=1)
    assert trained.probabilities(batch).max(axis=1).mean() > 0.9
    policy = algo.make_policy(space=DISCRETE, seed=5)
    policy.set_weights(trained.get_weights())
    algo.warm_start(policy, seed=5)
    probs = policy.probabilities(batch)
    np.testing.assert_allclose(probs.max(axis=1), 1.0 / legal, rtol=0.05)
    assert np.all(probs[~batch.mask] == 0.0)
    for layer in (0, 2):
        torch.testing.assert_close(policy.actor.net[layer].weight, trained.actor.net[layer].weight)


def test_a_warm_started_gaussian_actor_gets_its_initial_standard_deviation():
    algo = algorithm("ppo", log_std_init=-0.5)
    trained = algo.make_policy(space=BOX_SPACE, seed=0)
    with torch.no_grad():
        trained.actor.log_std.fill_(-4.0)
    policy = algo.make_policy(space=BOX_SPACE, seed=1)
    policy.set_weights(trained.get_weights())
    algo.warm_start(policy, seed=1)
    torch.testing.assert_close(policy.actor.log_std, torch.full_like(policy.actor.log_std, -0.5))
