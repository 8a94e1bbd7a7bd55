"""What the rollout engine records for learners: truncation (with the observation at the
cut, to bootstrap from) versus termination, and Box actions (per-entry bounds; the env
gets them clipped, the episode keeps the policy's own action)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from popmarl.interfaces.env import Env, Step, VectorEnv
from popmarl.interfaces.policy import Policy
from popmarl.data.episodes import Episode, Observations
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.interfaces.spaces import Box, Discrete


def _step(decisions: dict, rewards: np.ndarray, finished: list[int], n_agents: int, *, truncated: bool,
          final: dict | None = None) -> Step:
    return Step(decisions=decisions, rewards=rewards, finished=np.array(finished, dtype=np.int64),
                returns=np.ones((len(finished), n_agents)), truncated=np.full(len(finished), truncated),
                final=final or {})


class _ClockVector(VectorEnv):
    """Both agents act each step (observation: the step count); reward 1 to each per
    step; the episode ends after ``length`` steps, cut off (only agent ``a`` is still in
    play at the cut: ``b`` counts as terminated) or terminated."""

    def __init__(self, num_envs: int, length: int, truncate: bool) -> None:
        self.num_envs, self.length, self.truncate = num_envs, length, truncate
        self.t = np.zeros(num_envs, dtype=np.int64)

    def _decisions(self) -> dict:
        ids = np.arange(self.num_envs)
        obs = self.t.astype(np.float32).reshape(-1, 1)
        mask = np.ones((self.num_envs, 2), bool)
        return {a: (ids, Observations(obs=obs, mask=mask, agent=a)) for a in ("a", "b")}

    def reset(self) -> Step:
        self.t[:] = 0
        return _step(self._decisions(), np.zeros((self.num_envs, 2)), [], 2, truncated=False)

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        self.t += 1
        done = np.flatnonzero(self.t >= self.length)
        final = {}
        if self.truncate and len(done):
            mask = np.zeros((len(done), 2), bool)
            mask[:, 1] = True  # only action 1 legal at the cut: shows the mask travels
            final = {"a": (done, Observations(obs=self.t[done].astype(np.float32).reshape(-1, 1), mask=mask,
                                              agent="a"))}
        self.t[done] = 0
        return _step(self._decisions(), np.ones((self.num_envs, 2)), done.tolist(), 2, truncated=self.truncate,
                     final=final)


class _Clock(Env):
    def __init__(self, *, length: int = 3, truncate: bool = True) -> None:
        self.length, self.truncate = length, truncate

    @property
    def agents(self) -> tuple[str, ...]:
        return ("a", "b")

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(1,))

    def action_space(self, agent: str) -> Discrete:
        return Discrete(n=2)

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        return _ClockVector(num_envs, self.length, self.truncate)


class _First(Policy):
    """Always action 0."""

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        return np.zeros(len(batch), dtype=np.int64)

    def get_weights(self) -> dict[str, np.ndarray]:
        return {}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        pass


def _explore(env: Env, seat: str, learner: Policy, opponent: Policy, episodes: int = 5) -> list[Episode]:
    opponents = OpponentDraw({a: ([opponent], np.ones(1)) for a in env.agents})
    played = RolloutWorker(env=env, num_envs=2).explore(
        learners=[Seating(policy=learner, seats=(seat,))], opponents=opponents, max_episodes=episodes,
        max_steps=None, seed=0)
    (collected,) = played.episodes
    assert len(collected) >= episodes
    return collected


def test_a_cut_off_episode_is_truncated_and_keeps_the_observation_at_the_cut() -> None:
    for episode in _explore(_Clock(length=3), "a", _First(), _First()):
        assert episode.truncated and not episode.terminated
        assert episode.obs[:, 0].tolist() == [0, 1, 2]  # one row per decision
        assert episode.final_obs is not None and episode.final_obs.tolist() == [3.0]
        assert episode.final_mask is not None and episode.final_mask.tolist() == [False, True]
        assert episode.rewards.tolist() == [1, 1, 1]


def test_an_agent_not_in_play_at_the_cut_and_an_ended_episode_are_terminated() -> None:
    for env, seat in ((_Clock(length=3), "b"), (_Clock(length=3, truncate=False), "a")):
        for episode in _explore(env, seat, _First(), _First()):
            assert episode.terminated and not episode.truncated
            assert episode.final_obs is None and episode.final_mask is None


def test_episode_flags_must_be_consistent() -> None:
    kwargs = dict(agent="a", obs=np.zeros((1, 1)), actions=np.zeros(1), rewards=np.zeros(1), masks=None,
                  episode_return=0.0)
    with pytest.raises(ValueError, match="needs final_obs"):
        Episode(terminated=False, truncated=True, **kwargs)
    with pytest.raises(ValueError, match="exactly one of terminated and truncated"):
        Episode(terminated=True, truncated=True, final_obs=np.zeros(1), **kwargs)


# -- Box actions with per-entry bounds -------------------------------------------------------
DIAL = Box(shape=(2,), low=[0.0, -1.0], high=[1.0, 5.0])


class _DialVector(VectorEnv):
    """One decision per episode for agent ``a`` (``b`` only watches); keeps every action
    it receives."""

    def __init__(self, num_envs: int, received: list[np.ndarray]) -> None:
        self.num_envs = num_envs
        self.received = received

    def _decisions(self) -> dict:
        return {"a": (np.arange(self.num_envs), Observations(obs=np.zeros((self.num_envs, 1), np.float32), agent="a"))}

    def reset(self) -> Step:
        return _step(self._decisions(), np.zeros((self.num_envs, 2)), [], 2, truncated=False)

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        self.received.append(np.array(actions["a"]))
        return _step(self._decisions(), np.zeros((self.num_envs, 2)), list(range(self.num_envs)), 2, truncated=False)


class _Dial(Env):
    def __init__(self) -> None:
        self.received: list[np.ndarray] = []

    @property
    def agents(self) -> tuple[str, ...]:
        return ("a", "b")

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(1,))

    def action_space(self, agent: str) -> Box:
        return DIAL

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        return _DialVector(num_envs, self.received)


class _Constant(Policy):
    """Always ``action``, wherever the bounds are (as a Gaussian's sample may be)."""

    def __init__(self, action: list[float]) -> None:
        self.action = np.asarray(action, np.float32)

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        return np.tile(self.action, (len(batch), 1))

    def get_weights(self) -> dict[str, np.ndarray]:
        return {}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        pass


def test_box_bounds_are_per_entry() -> None:
    assert DIAL.low.tolist() == [0.0, -1.0] and DIAL.high.tolist() == [1.0, 5.0]
    assert DIAL == Box(shape=(2,), low=np.array([0, -1]), high=[1, 5]) and hash(DIAL) == hash(Box(shape=(2,), low=[0, -1], high=[1, 5]))
    assert DIAL != Box(shape=(2,), low=-1.0, high=5.0)
    assert Box(shape=(2, 2), low=0.0, high=1.0).low.shape == (2, 2)  # a scalar is every entry's bound
    assert repr(Box(shape=(3,), low=0.0, high=1.0)) == "Box(shape=(3,), low=0.0, high=1.0, dtype='float32')"
    draws = DIAL.sample(np.random.default_rng(0), n=2000)
    assert draws.shape == (2000, 2) and draws.dtype == np.float32
    assert draws[:, 0].min() >= 0 and draws[:, 0].max() <= 1 and draws[:, 1].min() >= -1 and draws[:, 1].max() <= 5
    assert draws[:, 1].max() > 4  # uniform over each entry's own range
    half = Box(shape=(2,), low=[0.0, 0.0], high=[1.0, np.inf]).sample(np.random.default_rng(0), n=500)
    assert half.min() >= 0 and half[:, 1].max() > 1  # unbounded above: normal draws, clipped below
    np.testing.assert_array_equal(DIAL.clip([[3.0, -4.0], [0.5, 9.0]]), [[1.0, -1.0], [0.5, 5.0]])
    with pytest.raises(ValueError, match="does not broadcast"):
        Box(shape=(2,), low=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="exceeds high"):
        Box(shape=(2,), low=[0.0, 2.0], high=1.0)


def test_the_env_gets_clipped_box_actions_and_the_episode_keeps_the_policys_own() -> None:
    env = _Dial()
    episodes = _explore(env, "a", _Constant([3.0, -4.0]), _Constant([0.0, 0.0]), episodes=4)
    applied = np.concatenate(env.received)
    np.testing.assert_array_equal(applied, np.tile([1.0, -1.0], (len(applied), 1)))  # each entry its own bounds
    for episode in episodes:
        np.testing.assert_array_equal(episode.actions, [[3.0, -4.0]])


def test_opponent_noise_and_idle_games_respect_each_entrys_bounds() -> None:
    env = _Dial()
    opponents = OpponentDraw({a: ([_Constant([0.5, 4.0])], np.ones(1)) for a in env.agents})
    # Seat "a" is the opponent's: every decision replaced by a uniform draw from the Box.
    RolloutWorker(env=env, num_envs=8).explore(learners=[Seating(policy=_Constant([0.5, 4.0]), seats=("b",))],
                                               opponents=opponents, max_episodes=3, max_steps=None, seed=0,
                                               opponent_epsilon=1.0)
    applied = np.concatenate(env.received)
    assert applied[:, 0].min() >= 0 and applied[:, 0].max() <= 1
    assert applied[:, 1].min() >= -1 and applied[:, 1].max() <= 5
    assert len(np.unique(applied[:, 1])) > 3  # random draws (idle games play a fixed legal action)


def test_an_opponent_draw_chosen_as_indices_is_the_draw_and_takes_the_same_random_numbers() -> None:
    """``choose`` then ``profile`` gives what ``draw`` gives, from the same generator state,
    and leaves the generator where ``draw`` leaves it (explore caches profiles by choice)."""
    pool = [_First() for _ in range(4)]
    joint = (("a",), [[pool[0]], [pool[1]]], np.array([0.4, 0.6]))
    for draw in (OpponentDraw({"a": (pool[:3], np.array([0.2, 0.3, 0.5])), "b": (pool[1:], np.full(3, 1 / 3))}),
                 OpponentDraw({"b": (pool, np.full(4, 0.25))}, joint)):
        for seed in range(20):
            by_draw, by_index = np.random.default_rng(seed), np.random.default_rng(seed)
            drawn = draw.draw(by_draw, ["a", "b"])
            chosen = draw.choose(by_index, ["a", "b"])
            assert draw.profile(chosen, ["a", "b"]) == drawn
            assert by_draw.random() == by_index.random()


def test_explore_seats_episodes_with_equal_draws_under_one_profile() -> None:
    """Episodes that draw the same opponents share one profile object and tag, and every
    learner episode is kept (the cache does not merge or drop games)."""
    env = _Clock(length=2, truncate=False)
    learner, others = _First(), [_First(), _First()]
    draw = OpponentDraw({a: (others, np.array([0.5, 0.5])) for a in env.agents})
    draw.names = {id(others[0]): "x", id(others[1]): "y"}
    played = RolloutWorker(env=env, num_envs=3).explore(
        learners=[Seating(policy=learner, seats=("a", "b"), one_seat=True)], opponents=draw, max_episodes=40,
        max_steps=None, seed=3)
    assert len(played.tags) == 40 and len(played.episodes[0]) == 40
    assert len(set(played.tags)) == 4  # the learner's seat (2) times its opponent (2)
    assert len({id(tag) for tag in played.tags}) == 4
