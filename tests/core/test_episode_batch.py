"""Episodes recorded column-wise (:class:`popmarl.data.episodes.EpisodeBatch`): what the
rollout engine hands a learner, row for row, and opponents drawn by cumulative
probabilities."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from popmarl.interfaces.env import Env, Step, VectorEnv
from popmarl.interfaces.policy import Policy
from popmarl.data.episodes import Episode, EpisodeBatch, Observations
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.interfaces.spaces import Box, Discrete


class _TaggedVector(VectorEnv):
    """Both agents decide every step; slot ``i``'s episodes last ``i % 3 + 1`` steps, so
    games finish out of step. An observation tags its slot, episode and step
    (``1000 * slot + 10 * episode + t``); ``a`` is rewarded 1 per step, ``b`` 2."""

    def __init__(self, num_envs: int, masks_from: int = 0) -> None:
        self.num_envs = num_envs
        self.masks_from = masks_from  # steps before it come without a mask
        self.steps = 0
        self.t = np.zeros(num_envs, np.int64)
        self.episode = np.zeros(num_envs, np.int64)
        self.length = np.arange(num_envs) % 3 + 1

    def _decisions(self) -> dict:
        ids = np.arange(self.num_envs)
        obs = (1000 * ids + 10 * self.episode + self.t).astype(np.float32).reshape(-1, 1)
        mask = np.tile([False, True], (self.num_envs, 1)) if self.steps >= self.masks_from else None
        return {a: (ids, Observations(obs=obs, mask=mask, agent=a)) for a in ("a", "b")}

    def reset(self) -> Step:
        self.t[:] = 0
        return Step(decisions=self._decisions(), rewards=np.zeros((self.num_envs, 2)), finished=np.zeros(0, np.int64),
                    returns=np.zeros((0, 2)), truncated=np.zeros(0, bool))

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        self.t += 1
        self.steps += 1
        done = np.flatnonzero(self.t >= self.length)
        returns = np.stack([self.length[done], 2 * self.length[done]], axis=1).astype(float)
        self.t[done] = 0
        self.episode[done] += 1
        rewards = np.tile([1.0, 2.0], (self.num_envs, 1))
        return Step(decisions=self._decisions(), rewards=rewards, finished=done, returns=returns,
                    truncated=np.zeros(len(done), bool))


class _Tagged(Env):
    def __init__(self, masks_from: int = 0) -> None:
        self.masks_from = masks_from

    @property
    def agents(self) -> tuple[str, ...]:
        return ("a", "b")

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(1,))

    def action_space(self, agent: str) -> Discrete:
        return Discrete(n=2)

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        return _TaggedVector(num_envs, self.masks_from)


class _Fixed(Policy):
    """Always ``action``."""

    def __init__(self, action: int = 0) -> None:
        self.action = action

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        return np.full(len(batch), self.action, dtype=np.int64)

    def get_weights(self) -> dict[str, np.ndarray]:
        return {}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        pass


def test_each_episode_is_one_agents_rows_of_one_game_in_time_order() -> None:
    learner, other = _Fixed(1), _Fixed(0)
    played = RolloutWorker(env=_Tagged(), num_envs=5).explore(
        learners=[Seating(policy=learner, seats=("a", "b")), Seating(policy=other, seats=())],
        opponents=OpponentDraw({}), max_episodes=40, max_steps=None, seed=0)
    batch, empty = played.episodes
    assert isinstance(batch, EpisodeBatch) and len(empty) == 0
    assert len(batch) == 2 * len(played.tags)  # one episode per seat per game
    seen = set()
    for episode in batch:
        tags = episode.obs[:, 0].astype(int)
        slot, number = tags[0] // 1000, tags[0] % 1000 // 10
        assert tags.tolist() == [1000 * slot + 10 * number + t for t in range(slot % 3 + 1)]
        assert (episode.agent, slot, number) not in seen
        seen.add((episode.agent, slot, number))
        per_step = 1.0 if episode.agent == "a" else 2.0
        assert episode.rewards.tolist() == [per_step] * len(tags)
        assert episode.episode_return == per_step * len(tags)
        assert episode.actions.tolist() == [1] * len(tags) and episode.terminated
    assert batch.decisions == int(np.diff(batch.starts).sum()) == len(batch.obs)
    assert batch.returns.tolist() == [e.episode_return for e in batch]


def test_episodes_are_handed_over_in_the_order_they_finished() -> None:
    played = RolloutWorker(env=_Tagged(), num_envs=3).explore(
        learners=[Seating(policy=_Fixed(), seats=("a",))], opponents=OpponentDraw({"b": ([_Fixed()], np.ones(1))}),
        max_episodes=12, max_steps=None, seed=0)
    (batch,) = played.episodes
    # Slots 0, 1, 2 play 1-, 2- and 3-step games: finishing times 1,2,3,... per slot.
    finished = [(int(e.obs[0, 0]) % 1000 // 10 + 1) * len(e.actions) for e in batch]
    assert finished == sorted(finished)


def test_decisions_without_a_mask_beside_masked_ones_count_every_action_legal() -> None:
    played = RolloutWorker(env=_Tagged(masks_from=2), num_envs=3).explore(
        learners=[Seating(policy=_Fixed(1), seats=("a",))], opponents=OpponentDraw({"b": ([_Fixed()], np.ones(1))}),
        max_episodes=9, max_steps=None, seed=0)
    (batch,) = played.episodes
    assert batch.masks is not None and len(batch.masks) == batch.decisions
    # Slot 0 plays 1-step games: its first two came without masks (all legal), the rest with.
    first_slot = [e.masks[0].tolist() for e in batch if e.obs[0, 0] < 1000]
    assert first_slot[:2] == [[True, True]] * 2 and first_slot[2:] == [[False, True]] * (len(first_slot) - 2)


def _episode(steps: int, *, masks: bool, truncated: bool = False) -> Episode:
    return Episode(agent="a", obs=np.arange(steps, dtype=np.float32).reshape(-1, 1), actions=np.ones(steps, np.int64),
                   rewards=np.full(steps, 0.5, np.float32), masks=np.ones((steps, 3), bool) if masks else None,
                   terminated=not truncated, truncated=truncated, episode_return=0.5 * steps,
                   final_obs=np.array([9.0], np.float32) if truncated else None)


def test_a_list_of_episodes_becomes_a_batch_and_back() -> None:
    episodes = [_episode(2, masks=True), _episode(3, masks=False, truncated=True),
                _episode(0, masks=True), _episode(1, masks=True)]
    batch = EpisodeBatch.of(episodes)
    assert len(batch) == 3 and batch.starts.tolist() == [0, 2, 5, 6]  # the empty one is dropped
    assert batch.masks is not None and batch.masks.all()  # no masks beside masked ones: all legal
    back = list(batch)
    assert [len(e.actions) for e in back] == [2, 3, 1]
    assert back[1].truncated and back[1].final_obs is not None and back[1].final_obs.tolist() == [9.0]
    assert [e.episode_return for e in back] == [1.0, 1.5, 0.5]
    assert EpisodeBatch.of(batch) is batch
    assert len(EpisodeBatch.of([])) == 0 and EpisodeBatch.of([_episode(1, masks=False)]).masks is None


def test_a_batch_checks_its_columns() -> None:
    good = EpisodeBatch.of([_episode(2, masks=False)])
    fields = {f: getattr(good, f) for f in ("agents", "starts", "obs", "actions", "rewards", "masks", "returns",
                                            "truncated", "final_obs", "final_masks")}
    with pytest.raises(ValueError, match="starts must run from 0 to the 2 rows"):
        EpisodeBatch(**{**fields, "starts": np.array([0, 1])})
    with pytest.raises(ValueError, match="returns needs one entry per episode"):
        EpisodeBatch(**{**fields, "returns": np.zeros(2)})
    with pytest.raises(ValueError, match="a truncated episode needs final_obs"):
        EpisodeBatch(**{**fields, "truncated": np.array([True])})
    with pytest.raises(ValueError, match="at least one decision"):
        EpisodeBatch(**{**fields, "agents": ("a", "a"), "starts": np.array([0, 2, 2]), "returns": np.zeros(2),
                        "truncated": np.zeros(2, bool), "final_obs": (None, None), "final_masks": (None, None)})


def test_opponents_follow_the_mixture_and_never_a_zero_probability_policy() -> None:
    pool = [_Fixed(k) for k in range(4)]
    draw = OpponentDraw({"b": (pool, np.array([0.0, 0.25, 0.75, 0.0]))})
    rng = np.random.default_rng(0)
    counts = np.bincount([pool.index(draw.draw(rng, ["b"])["b"]) for _ in range(20_000)], minlength=4)
    assert counts[0] == counts[3] == 0
    assert counts[1] / counts.sum() == pytest.approx(0.25, abs=0.015)
