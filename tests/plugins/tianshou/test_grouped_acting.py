"""Grouped acting: frozen Q-policies (and categorical actors) of one network layout act in
one batched call (``Policy.group_key`` / ``act_grouped``) with the actions each would
choose alone, and rollouts that group them play the same games as rollouts that call
each policy alone, deterministically."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from tianshou_helpers import algorithm, metrics, requires_nash, requires_openspiel, run_psro, space

import popmarl
from popmarl.interfaces.policy import ActingAlone, Policy
from popmarl.data.population import AgentMapping
from popmarl.data.episodes import EpisodeBatch, Observations
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentCopy, OpponentDraw, Seating
from popmarl.runs.runner import policy_spaces
from popmarl.interfaces.spaces import Box, Discrete
from popmarl_torch.grouped import stacked_outputs
from popmarl_torch.policies import CategoricalPolicy, QPolicy, uniform_initial

OBS, ACTIONS = 7, 5
SPACE = space(Box(shape=(OBS,)), Discrete(n=ACTIONS))
COUNTS = [1, 3, 0, 2, 1, 5, 1, 4, 2, 1, 1, 3]


def _pool(name: str, n: int, hidden: Sequence[int] = (32, 32), first_seed: int = 0) -> list[Policy]:
    algo = algorithm(name, hidden=list(hidden))
    return [algo.make_policy(space=SPACE, seed=first_seed + k) for k in range(n)]


def _batches(counts: Sequence[int], seed: int, masked: bool = True) -> list[Observations]:
    rng = np.random.default_rng(seed)
    out = []
    for n in counts:
        mask = None
        if masked:
            mask = rng.random((n, ACTIONS)) < 0.6
            mask[np.arange(n), rng.integers(ACTIONS, size=n)] = True
        out.append(Observations(obs=rng.standard_normal((n, OBS)).astype(np.float32), mask=mask))
    return out


def _assert_same_greedy(pool: Sequence[Policy], batches: Sequence[Observations]) -> None:
    """Grouped Q-values agree with each policy's to 1e-5, and the actions are equal
    wherever the top two Q-values are more than 1e-4 apart."""
    qpolicies = [p for p in pool if isinstance(p, QPolicy)]
    grouped = QPolicy.act_grouped(pool, batches, rng=np.random.default_rng(0))
    # A policy's own act takes no empty batch (the rollout gives none); grouped, it may have one.
    alone_q = [p.q_values(b) if len(b) else np.zeros((0, ACTIONS), np.float32) for p, b in zip(qpolicies, batches)]
    np.testing.assert_allclose(stacked_outputs(qpolicies, [p.qnet.net for p in qpolicies], batches),
                               np.concatenate(alone_q), rtol=1e-5, atol=1e-5)
    clear = 0
    for policy, batch, actions, q in zip(pool, batches, grouped, alone_q):
        assert actions.shape == (len(batch),)
        if not len(batch):
            continue
        if batch.mask is not None:
            assert batch.mask[np.arange(len(batch)), actions].all()
        top2 = np.sort(np.where(np.isfinite(q), q, -1e30), axis=1)[:, -2:]
        wide = (top2[:, 1] - top2[:, 0]) > 1e-4
        clear += int(wide.sum())
        alone = policy.act(batch, explore=False, rng=np.random.default_rng(0))
        np.testing.assert_array_equal(actions[wide], alone[wide])
    assert clear > 0.9 * sum(len(b) for b in batches)


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("hidden", [(32, 32), (64,), ()])
def test_grouped_greedy_actions_equal_each_policys_own(masked, hidden) -> None:
    pool = _pool("dqn", len(COUNTS), hidden)
    for seed in range(3):
        _assert_same_greedy(pool, _batches(COUNTS, seed, masked))
    _assert_same_greedy(pool[:4], _batches([3, 3, 3, 3], 9, masked))  # equal rows: no padding


def test_grouped_acting_follows_loaded_weights() -> None:
    pool, other = _pool("dqn", 6), _pool("dqn", 6, first_seed=100)
    batches = _batches(COUNTS[:6], 1)
    QPolicy.act_grouped(pool, batches, rng=np.random.default_rng(0))  # looks the parameters up
    for policy, source in zip(pool, other):
        policy.set_weights(source.get_weights())
    _assert_same_greedy(pool, batches)


@pytest.mark.parametrize("name", ["ppo", "a2c"])
def test_grouped_categorical_samples_equal_sequential_calls(name) -> None:
    pool = _pool(name, len(COUNTS))
    batches = _batches(COUNTS, 4)
    grouped_rng, alone_rng = np.random.default_rng(7), np.random.default_rng(7)
    grouped = CategoricalPolicy.act_grouped(pool, batches, rng=grouped_rng)
    alone = [p.act(b, explore=False, rng=alone_rng) if len(b) else np.zeros(0, np.int64) for p, b in zip(pool, batches)]
    for g, a in zip(grouped, alone):
        np.testing.assert_array_equal(g, a)
    assert grouped_rng.random() == alone_rng.random()  # the same uniforms were drawn


def test_group_keys() -> None:
    dqn, wide, ppo = _pool("dqn", 2), _pool("dqn", 1, (64, 64)), _pool("ppo", 1)
    assert dqn[0].group_key() is not None and dqn[0].group_key() == dqn[1].group_key()
    assert wide[0].group_key() != dqn[0].group_key()
    assert ppo[0].group_key() not in (None, dqn[0].group_key())
    other_obs = algorithm("dqn", hidden=[32, 32]).make_policy(space=space(Discrete(n=OBS), Discrete(n=ACTIONS)), seed=0)
    assert other_obs.group_key() != dqn[0].group_key()  # one-hot features of the same width
    # Uniform policies sample with the generator: they act alone.
    assert uniform_initial(_pool("dqn", 1)[0]).group_key() is None
    loaded = _pool("dqn", 1)[0]
    loaded.set_weights(uniform_initial(_pool("dqn", 1)[0]).get_weights())
    assert loaded.group_key() is None
    gaussian = algorithm("ppo").make_policy(space=space(Box(shape=(2,)), Box(shape=(1,), low=-1.0, high=1.0)), seed=0)
    assert gaussian.group_key() is None
    assert OpponentCopy(dqn[0]).group_key() is None


# -- rollouts --------------------------------------------------------------------------------
class _Spy:
    """Counts the grouped calls (of at least two policies) of a policy class."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cls: type[Policy]) -> None:
        self.calls = 0
        original = cls.act_grouped

        def counted(owner: type[Policy], policies: Sequence[Policy], batches: Sequence[Observations], *,
                    rng: np.random.Generator) -> list[np.ndarray]:
            self.calls += len(policies) > 1
            return original.__func__(owner, policies, batches, rng=rng)  # type: ignore[attr-defined]

        monkeypatch.setattr(cls, "act_grouped", classmethod(counted))


def _leduc(name: str, opponents: int, uniform: bool = False):
    env = popmarl.envs.load("openspiel")(game="leduc_poker")
    algo = algorithm(name, hidden=[32, 32])
    spaces = policy_spaces(env, AgentMapping.resolve("per_player", env.agents))
    learner = algo.make_policy(space=spaces["player_0"], seed=0)
    pool = [algo.make_policy(space=spaces["player_1"], seed=1 + k) for k in range(opponents)]
    if uniform:
        pool.insert(opponents // 2, uniform_initial(algo.make_policy(space=spaces["player_1"], seed=99)))
    return env, learner, pool


def _explore(env, learner: Policy, pool: Sequence[Policy], *, seed: int = 5, opponent_epsilon: float = 0.0,
             episodes: int = 300):
    draw = OpponentDraw({"player_1": (list(pool), np.full(len(pool), 1.0 / len(pool)))})
    draw.names = {id(p): f"frozen/{k}" for k, p in enumerate(pool)}
    return RolloutWorker(env=env, num_envs=32).explore(
        learners=[Seating(policy=learner, seats=("player_0",))], opponents=draw, max_episodes=episodes,
        max_steps=None, seed=seed, opponent_epsilon=opponent_epsilon)


def _assert_same_rollouts(a, b) -> None:
    assert a.tags == b.tags and a.env_steps == b.env_steps
    np.testing.assert_array_equal(a.returns, b.returns)
    for x, y in zip(a.episodes, b.episodes):
        assert isinstance(x, EpisodeBatch) and isinstance(y, EpisodeBatch)
        for field in ("starts", "obs", "actions", "rewards", "masks"):
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))


@requires_openspiel
@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_a_rollout_that_groups_plays_the_games_of_one_that_does_not(name, monkeypatch) -> None:
    # Greedy Q-policies draw nothing: a uniform policy among them (drawing, acting alone)
    # sees the generator as before. Categorical policies draw their samples: acting as one
    # group they draw before the code order would have them, so none acts alone here.
    env, learner, pool = _leduc(name, 24, uniform=name == "dqn")
    if name == "dqn":
        learner.eps = 0.3  # the learner explores: it draws from the generator too
    spy = _Spy(monkeypatch, type(learner))
    grouped = _explore(env, learner, pool)
    assert spy.calls > 0
    calls = spy.calls
    alone = _explore(env, learner, [ActingAlone(p) for p in pool])
    assert spy.calls == calls
    assert len(grouped.tags) == 300
    _assert_same_rollouts(grouped, alone)


@requires_openspiel
def test_grouped_rollouts_with_opponent_epsilon_are_deterministic() -> None:
    env, learner, pool = _leduc("dqn", 24, uniform=True)
    learner.eps = 0.3
    first, again = (_explore(env, learner, pool, opponent_epsilon=0.2, seed=3) for _ in range(2))
    _assert_same_rollouts(first, again)
    alone = _explore(env, learner, [ActingAlone(p) for p in pool], opponent_epsilon=0.2, seed=3)
    assert len(first.tags) == len(alone.tags) == 300  # the same episodes (their moves may differ)


@requires_openspiel
def test_evaluation_play_groups_both_seats(monkeypatch) -> None:
    env, _, pool = _leduc("dqn", 12)
    spy = _Spy(monkeypatch, QPolicy)
    profiles = [{"player_0": a, "player_1": b} for a in pool[:6] for b in pool[6:]]
    grouped = RolloutWorker(env=env, num_envs=64).play([(p, 8) for p in profiles], seed=2)
    assert spy.calls > 0
    wrapped = {id(p): ActingAlone(p) for p in pool}
    alone = RolloutWorker(env=env, num_envs=64).play(
        [({a: wrapped[id(q)] for a, q in p.items()}, 8) for p in profiles], seed=2)
    assert len(grouped.tags) == len(profiles) * 8
    _assert_same_rollouts(grouped, alone)


# -- PSRO ------------------------------------------------------------------------------------
SMALL_DQN = {"name": "dqn", "params": {"hidden": [32], "learning_starts": 64, "batch_size": 32,
                                       "eps_decay_steps": 1_000, "target_update_freq": 20}}


@requires_openspiel
@requires_nash
def test_psro_with_dqn_is_deterministic_with_grouped_acting(tmp_path, monkeypatch) -> None:
    spy = _Spy(monkeypatch, QPolicy)
    config = {"scenario": "psro", "seed": 3, "env": {"name": "openspiel", "params": {"game": "kuhn_poker"}},
              "agents": {"mapping": "per_player"}, "algorithm": SMALL_DQN, "solver": {"name": "nash"},
              "stopping": {"max_iterations": 4},
              "training": {"max_env_steps": 800, "episodes_per_update": 32, "num_envs": 16},
              # Sampled payoff entries: evaluation plays the policies (grouped) too.
              "evaluation": {"exact": "never", "episodes_per_entry": 20, "num_envs": 16},
              "trackers": ["jsonl"]}
    runs = [metrics(run_psro(tmp_path, name, **config)[1]) for name in ("first", "second")]
    assert spy.calls > 0
    timeless = [[{k: v for k, v in m.items() if not k.endswith("_s") and "time" not in k and k != "steps_per_s"}
                 for m in run] for run in runs]
    assert timeless[0] and timeless[0] == timeless[1]
