"""The ``pettingzoo`` env's vectors, checked against the real envs step by step."""

from __future__ import annotations

import pickle
import sys
import types
from collections.abc import Callable
from typing import Any

import gymnasium.spaces as gs
import numpy as np
import popmarl
import pytest
from popmarl.interfaces.algorithm import PolicySpace
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.interfaces.spaces import Box, Discrete
from popmarl_pettingzoo import PettingZooEnv
from popmarl_pettingzoo.spaces import ObservationCodec

from pz_guards import Ledger, random_actions

pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")

Play = Callable[..., list[tuple[int, np.ndarray, bool]]]

#: guarded env name -> (kwargs, vector steps)
CASES: dict[str, tuple[dict[str, Any], int]] = {
    "tictactoe": ({}, 120),
    "connect_four": ({}, 120),
    "leduc": ({}, 120),
    "rps": ({"max_cycles": 4}, 40),
    "spread": ({"max_cycles": 5, "N": 2}, 30),
    "spread_aec": ({"max_cycles": 5, "N": 2}, 60),
    "adversary": ({"max_cycles": 5, "continuous_actions": True}, 30),
    "kaz": ({"num_archers": 1, "num_knights": 1, "line_death": True, "max_cycles": 40}, 200),
}


def _env(name: str, **params: Any) -> PettingZooEnv:
    kwargs, _ = CASES[name]
    return PettingZooEnv(module=f"pz_guard:{name}", kwargs={**kwargs, **params.pop("kwargs", {})}, **params)


def _check_against_env(env: PettingZooEnv, vec: Any, done: list[tuple[int, np.ndarray, bool]]) -> None:
    """Every finished episode's returns and truncation equal what the env itself produced."""
    for copy in range(vec.num_envs):
        ours = [(r, t) for i, r, t in done if i == copy]
        theirs = vec.envs[copy].episodes
        assert ours, f"copy {copy} finished no episode"
        assert len(theirs) >= len(ours)
        for (returns, truncated), (totals, env_truncated, _) in zip(ours, theirs):
            np.testing.assert_allclose(returns, [totals.get(a, 0.0) for a in env.agents])
            assert truncated == env_truncated


@pytest.mark.parametrize("name", list(CASES))
def test_returns_masks_and_truncation_match_the_env(name: str, ledger: Ledger, play: Play) -> None:
    env = _env(name)
    vec = env.vector(num_envs=3, seed=0)
    done = play(env, vec, CASES[name][1])
    assert ledger.violations == []
    _check_against_env(env, vec, done)
    vec.close()


def test_classic_games_end_terminated_with_zero_sum_returns(ledger: Ledger, play: Play) -> None:
    env = _env("connect_four")
    done = play(env, env.vector(num_envs=4, seed=1), 200)
    assert len(done) > 4
    assert not any(t for _, _, t in done)
    assert all(abs(r.sum()) < 1e-9 and set(r.tolist()) <= {-1.0, 0.0, 1.0} for _, r, _ in done)


def test_env_max_cycles_truncates_every_episode_at_that_length(ledger: Ledger, play: Play) -> None:
    env = _env("spread", kwargs={"max_cycles": 7})
    vec = env.vector(num_envs=2, seed=0)
    done = play(env, vec, 21)
    assert len(done) == 6 and all(t for _, _, t in done)
    assert {steps for guard in vec.envs for _, _, steps in guard.episodes} == {7}


@pytest.mark.parametrize("name", ["tictactoe", "spread", "spread_aec"])
def test_max_steps_cuts_episodes_off_as_truncated(name: str, ledger: Ledger, play: Play) -> None:
    """AEC games count agent moves, Parallel games joint steps; rewards owed at the cut count."""
    env = _env(name, max_steps=3, kwargs={"max_cycles": 25} if name.startswith("spread") else {})
    vec = env.vector(num_envs=2, seed=0)
    done = play(env, vec, 9 if name == "spread" else 30)
    assert done and all(t for _, _, t in done)  # tic-tac-toe needs 5 moves to end
    _check_against_env(env, vec, done)
    assert {steps for guard in vec.envs for _, _, steps in guard.episodes} == {3}


def test_agents_that_leave_are_never_asked_to_act(ledger: Ledger) -> None:
    env = _env("kaz")
    vec = env.vector(num_envs=3, seed=0)
    rng = np.random.default_rng(0)
    step = vec.reset()
    for _ in range(300):
        for agent, (ids, _) in step.decisions.items():
            for i in ids.tolist():
                raw = vec.envs[i].unwrapped
                assert agent in raw.agents and not (raw.terminations[agent] or raw.truncations[agent])
        step = vec.step(random_actions(env, step, rng))
    assert ledger.left_early > 0 and ledger.violations == []


def test_aec_batches_hold_each_copy_once_with_its_mask(ledger: Ledger) -> None:
    env = _env("tictactoe")
    vec = env.vector(num_envs=5, seed=0)
    rng = np.random.default_rng(0)
    step = vec.reset()
    for _ in range(20):
        ids = np.concatenate([ids for ids, _ in step.decisions.values()])
        assert sorted(ids.tolist()) == list(range(5))
        for agent, (ids, batch) in step.decisions.items():
            assert batch.agent == agent and batch.obs.dtype == np.float32 and batch.obs.shape == (len(ids), 18)
            assert batch.mask is not None and batch.mask.dtype == bool
            for row, i in enumerate(ids.tolist()):
                obs = vec.envs[i].observe(agent)
                np.testing.assert_array_equal(batch.mask[row], obs["action_mask"].astype(bool))
                np.testing.assert_array_equal(batch.obs[row], obs["observation"].reshape(-1))
        step = vec.step(random_actions(env, step, rng))


def test_parallel_batches_hold_every_live_agent_of_every_copy() -> None:
    env = PettingZooEnv(module="mpe2.simple_adversary_v3", kwargs={"max_cycles": 3})
    assert env.api == "parallel"
    vec = env.vector(num_envs=4, seed=0)
    step = vec.reset()
    assert set(step.decisions) == set(env.agents)
    for ids, batch in step.decisions.values():
        assert ids.tolist() == [0, 1, 2, 3] and batch.mask is None


def test_copies_are_seeded_with_seed_plus_index() -> None:
    env = PettingZooEnv(module="mpe2.simple_spread_v3", kwargs={"N": 2})
    first = env.vector(num_envs=3, seed=10).reset().decisions["agent_0"][1].obs
    again = env.vector(num_envs=3, seed=10).reset().decisions["agent_0"][1].obs
    shifted = env.vector(num_envs=2, seed=11).reset().decisions["agent_0"][1].obs
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first[1:], shifted)
    assert not np.array_equal(first[0], first[1])


def test_spaces_map_to_popmarl_spaces() -> None:
    discrete = PettingZooEnv(module="pettingzoo.classic.connect_four_v3")
    assert discrete.agents == ("player_0", "player_1")
    assert discrete.action_space("player_0") == Discrete(n=7)
    assert discrete.observation_space("player_0") == Box(shape=(84,), low=0.0, high=1.0)
    shaped = PettingZooEnv(module="pettingzoo.classic.connect_four_v3", flatten=False)
    assert shaped.observation_space("player_0").shape == (6, 7, 2)
    assert shaped.vector(num_envs=2, seed=0).reset().decisions["player_0"][1].obs.shape == (2, 6, 7, 2)
    box = PettingZooEnv(module="mpe2.simple_spread_v3", kwargs={"continuous_actions": True, "N": 2})
    assert box.action_space("agent_0") == Box(shape=(5,), low=0.0, high=1.0, dtype="float32")


def test_box_actions_are_clipped_to_the_space() -> None:
    env = PettingZooEnv(module="mpe2.simple_spread_v3", kwargs={"continuous_actions": True, "N": 2, "max_cycles": 3})
    vec = env.vector(num_envs=2, seed=0)
    step = vec.reset()
    for _ in range(6):  # out-of-bounds actions would fail the env's own bounds check
        step = vec.step({a: np.full((len(ids), 5), 7.0) for a, (ids, _) in step.decisions.items()})
    assert len(step.finished) == 2 and step.truncated.all()


def test_info_masks_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """An env that keeps its legal actions in ``info["action_mask"]`` (plain Box obs)."""
    from pettingzoo.classic import rps_v2
    from pettingzoo.utils.wrappers import BaseParallelWrapper

    class InfoMask(BaseParallelWrapper):  # type: ignore[misc]
        def observation_space(self, agent: str) -> Any:
            return self.env.observation_space(agent)

        def _masked(self, infos: dict[str, Any]) -> dict[str, Any]:
            return {a: {**i, "action_mask": np.array([0, 1, 1], np.int8)} for a, i in infos.items()}

        def reset(self, seed: int | None = None, options: Any = None) -> Any:
            obs, infos = self.env.reset(seed=seed, options=options)
            return obs, self._masked(infos)

        def step(self, actions: Any) -> Any:
            assert all(a != 0 for a in actions.values()), actions
            *rest, infos = self.env.step(actions)
            return (*rest, self._masked(infos))

    monkeypatch.setitem(sys.modules, "pz_info", types.SimpleNamespace(parallel_env=lambda: InfoMask(rps_v2.parallel_env())))
    env = PettingZooEnv(module="pz_info")
    vec = env.vector(num_envs=3, seed=0)
    step = vec.reset()
    rng = np.random.default_rng(0)
    for _ in range(10):
        for _, batch in step.decisions.values():
            assert batch.mask is not None and not batch.mask[:, 0].any() and batch.mask[:, 1:].all()
        step = vec.step(random_actions(env, step, rng))


def test_env_pickles_as_its_config() -> None:
    env = PettingZooEnv(module="pettingzoo.classic.tictactoe_v3", max_steps=4)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.config == env.config and clone.agents == env.agents


@pytest.mark.parametrize("module,kwargs", [("pettingzoo.classic.tictactoe_v3", {}),
                                           ("pettingzoo.classic.leduc_holdem_v4", {}),
                                           ("mpe2.simple_spread_v3", {"N": 2, "max_cycles": 4})])
def test_explore_rewards_add_up_to_the_returns(module: str, kwargs: dict[str, Any]) -> None:
    """Rewards since the last call land on the learner's transitions; they sum to its return."""
    env = PettingZooEnv(module=module, kwargs=kwargs, api="aec")
    agent = env.agents[0]
    space = PolicySpace(population="p", agents=(agent,), observation_space=env.observation_space(agent),
                        action_space=env.action_space(agent))
    random = popmarl.algorithms.load("random")()
    policy, opponent = random.make_policy(space=space, seed=0), random.make_policy(space=space, seed=1)
    opponents = OpponentDraw({a: ([opponent], np.ones(1)) for a in env.agents})
    played = RolloutWorker(env=env, num_envs=4).explore(
        learners=[Seating(policy=policy, seats=(agent,))], opponents=opponents, max_episodes=12, max_steps=None, seed=0)
    (episodes,), steps = played.episodes, played.env_steps
    # An episode in which the learner never acts (the opponent folds first in Leduc)
    # leaves no trajectory: at most one per episode played.
    assert 0 < len(episodes) <= 12 and steps > 0
    for episode in episodes:
        assert episode.rewards.sum() == pytest.approx(episode.episode_return)
        assert episode.obs.dtype == np.float32 and len(episode.obs) == len(episode.actions)
        if episode.masks is not None:
            assert episode.masks[np.arange(len(episode.actions)), episode.actions].all()
    assert any(e.episode_return != 0 for e in episodes)


def test_dict_and_tuple_observations_are_flattened() -> None:
    space = gs.Dict({"pos": gs.Box(-1, 1, (2,)), "kind": gs.Discrete(3), "action_mask": gs.MultiBinary(4)})
    codec = ObservationCodec("a", space, mask_source="obs", n_actions=4, flatten=True)
    assert codec.space == Box(shape=(5,), low=[0, 0, 0, -1, -1], high=1.0)  # one-hot kind, then pos
    raw = {"pos": np.array([0.5, -0.5], np.float32), "kind": 2, "action_mask": np.array([1, 0, 1, 0], np.int8)}
    batch = codec.batch([raw, raw], None)
    np.testing.assert_array_equal(batch.obs, [[0.0, 0.0, 1.0, 0.5, -0.5]] * 2)  # keys sorted: kind, pos
    np.testing.assert_array_equal(batch.mask, [[True, False, True, False]] * 2)
    nested = ObservationCodec("b", gs.Dict({"observation": gs.Tuple((gs.Discrete(2), gs.Box(0, 1, (1,)))),
                                            "action_mask": gs.MultiBinary(2)}),
                              mask_source="obs", n_actions=2, flatten=True)
    obs = nested.batch([{"observation": (1, np.array([0.25], np.float32)), "action_mask": np.ones(2)}], None).obs
    np.testing.assert_array_equal(obs, [[0.0, 1.0, 0.25]])


def _play_zeros(vec: Any, steps: int) -> list[np.ndarray]:
    """The observations of ``steps`` steps of action 0 everywhere."""
    step, seen = vec.reset(), []
    for _ in range(steps):
        seen += [np.array(batch.obs) for _, (_, batch) in sorted(step.decisions.items())]
        step = vec.step({a: np.zeros(len(ids), np.int64) for a, (ids, _) in step.decisions.items()})
    return seen


def test_a_closed_vectors_copies_are_reused_and_play_as_fresh_ones() -> None:
    kwargs = {"N": 2, "max_cycles": 25}  # random initial positions: the env's own generator matters
    env = PettingZooEnv(module="mpe2.simple_spread_v3", kwargs=kwargs)
    first = env.vector(num_envs=3, seed=7)
    copies = {id(e) for e in first.envs}
    _play_zeros(first, 4)  # left mid-episode
    first.close()
    again = env.vector(num_envs=3, seed=11)
    assert {id(e) for e in again.envs} == copies
    fresh = PettingZooEnv(module="mpe2.simple_spread_v3", kwargs=kwargs).vector(num_envs=3, seed=11)
    assert not copies & {id(e) for e in fresh.envs}
    for reused, new in zip(_play_zeros(again, 6), _play_zeros(fresh, 6), strict=True):
        np.testing.assert_array_equal(reused, new)
    again.close()
    again.close()  # twice: the copies are handed back once
    assert len(env._idle) == 3


@pytest.mark.parametrize("module", ["pettingzoo.classic.tictactoe_v3", "pettingzoo.classic.connect_four_v3"])
def test_games_behind_pettingzoos_guards_play_the_same_without_them(module: str, play: Play,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from popmarl_pettingzoo import vector

    env = PettingZooEnv(module=module)
    guarded = env.vector(num_envs=4, seed=3)
    assert all(p is e.unwrapped for p, e in zip(guarded._play, guarded.envs))  # stepped directly
    direct = [(i, r.tolist(), t) for i, r, t in play(env, guarded, 150, seed=5)]
    monkeypatch.setattr(vector, "guards_only", lambda env: False)
    wrapped = env.vector(num_envs=4, seed=3)
    assert all(p is e for p, e in zip(wrapped._play, wrapped.envs))
    assert [(i, r.tolist(), t) for i, r, t in play(env, wrapped, 150, seed=5)] == direct and direct


def test_a_wrapper_that_is_no_guard_is_stepped_through() -> None:
    from popmarl_pettingzoo.vector import guards_only
    from pettingzoo.classic import leduc_holdem_v4, tictactoe_v3
    from pettingzoo.utils.wrappers import BaseWrapper, OrderEnforcingWrapper

    assert guards_only(tictactoe_v3.env()) and guards_only(tictactoe_v3.raw_env())
    assert guards_only(leduc_holdem_v4.env())
    assert not guards_only(BaseWrapper(tictactoe_v3.env()))
    assert not guards_only(OrderEnforcingWrapper(BaseWrapper(tictactoe_v3.raw_env())))  # one inside a guard


@pytest.mark.parametrize("name", ["tictactoe", "rps", "spread"])
def test_stopped_restarts_leave_each_copy_finished_once(name: str, ledger: Ledger) -> None:
    """After ``stop_restarts`` every copy ends the episode it is in and asks for nothing
    more (AEC and Parallel games); a reset starts them all again."""
    env = _env(name)
    vec = env.vector(num_envs=4, seed=0)
    rng = np.random.default_rng(0)
    step = vec.step(random_actions(env, vec.reset(), rng))
    assert vec.stop_restarts() is True
    finished = step.finished.tolist()
    for _ in range(200):
        if not step.decisions:
            break
        step = vec.step(random_actions(env, step, rng))
        finished.extend(step.finished.tolist())
    assert not step.decisions and sorted(finished) == [0, 1, 2, 3]
    assert len(vec.step({}).finished) == 0
    step = vec.reset()
    assert set(np.concatenate([ids for ids, _ in step.decisions.values()]).tolist()) == {0, 1, 2, 3}
    assert ledger.violations == []
    vec.close()
