"""Recording a learner's own decisions during play, column-wise, into episodes.

The rollout engine keeps one :class:`EpisodeRecorder` per agent a learner may play: each
decision appends a block of rows, rewards go to each game's last row, and a finished
game's rows are filed for the learner that played them (or dropped). :func:`gather_episodes`
turns a learner's filed episodes into one :class:`~popmarl.data.episodes.EpisodeBatch`
with a few numpy calls. (The joint view, every seat's rows: :mod:`popmarl.engine.joint_recording`.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from popmarl.data.episodes import EMPTY_EPISODES, EpisodeBatch, Observations
from popmarl.engine.joint_recording import Cut
from popmarl.interfaces.env import Step


class EpisodeRecorder:
    """Records one agent's decisions in learner seats, column-wise: each ``decide``
    appends a block of rows tagged with the game slot's current episode id, a reward is
    added to the slot's last row, and finishing a slot's episode files it (or drops it)
    and opens a new id. :func:`gather_episodes` collects a learner's filed episodes in one sort."""

    def __init__(self, agent: str, num_envs: int) -> None:
        self.agent = agent
        self._obs: list[np.ndarray] = []
        self._actions: list[np.ndarray] = []
        self._masks: list[np.ndarray | None] = []  # one entry per block (None: the env gave no mask)
        self._ids: list[np.ndarray] = []
        self._rewards = np.zeros(1024, dtype=np.float64)
        self._rows = 0
        self._episode_of_slot = np.arange(num_envs, dtype=np.int64)
        self._next_id = num_envs
        self._last_row = np.full(num_envs, -1, dtype=np.int64)
        #: Filed episodes by id: (learner, position in its list, return, cut).
        self.filed: dict[int, tuple[int, int, float, Cut | None]] = {}

    def decide(self, env_ids: np.ndarray, batch: Observations, actions: np.ndarray) -> None:
        n = len(env_ids)
        # Copies: the env owns its step buffers and may reuse them.
        self._obs.append(np.array(batch.obs))
        self._actions.append(np.array(actions))
        self._masks.append(None if batch.mask is None else np.array(batch.mask))
        self._ids.append(self._episode_of_slot[env_ids])
        if self._rows + n > len(self._rewards):
            self._rewards = np.concatenate([self._rewards, np.zeros(max(self._rows + n, len(self._rewards)))])
        self._last_row[env_ids] = np.arange(self._rows, self._rows + n)
        self._rows += n

    def reward(self, slots: np.ndarray, rewards: np.ndarray) -> None:
        """Add each slot's reward to its episode's last decision (none yet: dropped)."""
        rows = self._last_row[slots]
        held = rows >= 0
        self._rewards[rows[held]] += rewards[held]

    def finish(self, slot: int, learner: int, position: int, episode_return: float, cut: Cut | None) -> int | None:
        """File the slot's episode for ``learner`` at ``position`` in its list (truncated
        with the observation ``cut`` when it was cut off with this agent in play) and
        return its id; None if this agent made no decision in it."""
        episode = int(self._episode_of_slot[slot]) if self._last_row[slot] >= 0 else None
        if episode is not None:
            self.filed[episode] = (learner, position, float(episode_return), cut)
        self.clear(slot)
        return episode

    def clear(self, slots: int | np.ndarray) -> None:
        """Drop the episode of ``slots`` (one or an array of them); their next decisions
        start new ones."""
        n = np.size(slots)
        self._episode_of_slot[slots] = np.arange(self._next_id, self._next_id + n) if n != 1 else self._next_id
        self._next_id += n
        self._last_row[slots] = -1

    def rows_of(self, learner: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
        """``learner``'s filed rows in time order: (position of their episode, obs,
        actions, masks, rewards)."""
        if not self._ids:
            empty = np.zeros(0, np.int64)
            return empty, np.zeros((0,)), empty, None, np.zeros(0)
        if len(self._ids) > 1:
            self._masks = [_joined_masks(self._masks, [len(block) for block in self._ids])]
            self._obs, self._actions, self._ids = ([np.concatenate(c)] for c in (self._obs, self._actions, self._ids))
        position = np.full(self._next_id, -1, dtype=np.int64)
        for episode, (k, at, _, _) in self.filed.items():
            if k == learner:
                position[episode] = at
        row_position = position[self._ids[0]]
        rows = np.flatnonzero(row_position >= 0)
        masks = None if self._masks[0] is None else self._masks[0][rows]
        return row_position[rows], self._obs[0][rows], self._actions[0][rows], masks, self._rewards[:self._rows][rows]


def _joined_masks(blocks: Sequence[np.ndarray | None], lengths: Sequence[int]) -> np.ndarray | None:
    """Blocks of masks (of ``lengths`` rows) as one array, a block without one filled
    with every action legal; None if no block has one."""
    width = next((b.shape[1] for b in blocks if b is not None), None)
    if width is None:
        return None
    return np.concatenate([np.ones((n, width), bool) if b is None else b for b, n in zip(blocks, lengths)])


def gather_episodes(recorders: Sequence[EpisodeRecorder], learner: int,
                    order: Sequence[tuple[EpisodeRecorder, int]]) -> EpisodeBatch:
    """``learner``'s episodes, in the order they finished (``order``: the recorder
    and episode id of each), as one column-wise batch."""
    if not order:
        return EMPTY_EPISODES
    parts = [r.rows_of(learner) for r in recorders]
    parts = [p for p in parts if len(p[0])]
    position = np.concatenate([p[0] for p in parts])
    # Rows by episode position; within an episode, one recorder's rows in time order.
    rows = np.argsort(position, kind="stable")
    joined_masks = _joined_masks([p[3] for p in parts], [len(p[0]) for p in parts])
    meta = [recorder.filed[episode] for recorder, episode in order]
    cuts = [cut for _, _, _, cut in meta]
    counts = np.bincount(position, minlength=len(order))
    return EpisodeBatch(
        agents=tuple(recorder.agent for recorder, _ in order),
        starts=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        obs=np.concatenate([p[1] for p in parts])[rows],
        actions=np.concatenate([p[2] for p in parts])[rows],
        rewards=np.concatenate([p[4] for p in parts])[rows].astype(np.float32),
        masks=None if joined_masks is None else joined_masks[rows],
        returns=np.asarray([ret for _, _, ret, _ in meta], dtype=np.float64),
        truncated=np.asarray([cut is not None for cut in cuts], dtype=bool),
        final_obs=tuple(None if cut is None else cut[0] for cut in cuts),
        final_masks=tuple(None if cut is None else cut[1] for cut in cuts),
    )


def cut_observations(step: Step) -> dict[tuple[str, int], Cut]:
    """``step.final`` by (agent, game): copies, since the env owns its buffers."""
    cuts: dict[tuple[str, int], Cut] = {}
    for agent, (env_ids, batch) in step.final.items():
        obs = np.array(batch.obs)
        masks = None if batch.mask is None else np.array(batch.mask)
        for row, slot in enumerate(env_ids.tolist()):
            cuts[(agent, int(slot))] = (obs[row], None if masks is None else masks[row])
    return cuts
