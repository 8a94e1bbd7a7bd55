"""Recording the joint view during play: every seat's rows, one block per env step.

The rollout engine makes a :class:`JointRecorder` only when a learner of the task reads
the joint view (:attr:`~popmarl.interfaces.algorithm.Algorithm.joint_view`): each step it opens a
block with a row per game in play (its episode id, the state), adds each acting seat's
observations and chosen actions to it, and the rewards the step returned; a finished game
is filed for the joint learners that played in it. :meth:`JointRecorder.gather` turns a
learner's filed games into one :class:`~popmarl.data.trajectories.JointEpisodes` with a few
numpy calls per block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from popmarl.data.episodes import Observations
from popmarl.interfaces.spaces import Box, Space
from popmarl.data.trajectories import JointEpisodes, SeatRows

#: An agent's observation (and legal-action mask) when its game was cut off.
Cut = tuple[np.ndarray, "np.ndarray | None"]


@attrs.define
class _Block:
    """One env step of every game in play: rows in the order of ``slots``."""

    slots: np.ndarray
    ids: np.ndarray
    state: np.ndarray | None
    rewards: np.ndarray | None = None
    #: Per agent: (rows that acted, obs, actions, masks).
    seats: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]] = attrs.field(factory=dict)


@attrs.frozen
class _Game:
    """A finished game as filed: its returns, cut, final state and observations, the
    policy (name index) of each seat, and which seats each learner played."""

    returns: np.ndarray
    truncated: bool
    final_state: np.ndarray | None
    cuts: Mapping[str, Cut]
    policies: tuple[int, ...]
    own: Mapping[int, np.ndarray]


class JointRecorder:
    """Every seat's rows of the games in play, for the joint-view learners of one run."""

    def __init__(self, *, agents: Sequence[str], num_envs: int, observation_spaces: Mapping[str, Space],
                 action_spaces: Mapping[str, Space], state_space: Space | None) -> None:
        self.agents = tuple(agents)
        self._observation_spaces = observation_spaces
        self._action_spaces = action_spaces
        self._state_space = state_space
        self._blocks: list[_Block] = []
        self._row_of_slot = np.full(num_envs, -1, dtype=np.int64)
        self._episode_of_slot = np.arange(num_envs, dtype=np.int64)
        self._next_id = num_envs
        self._names: dict[str, int] = {}
        self._games: dict[int, _Game] = {}
        #: Per learner: the ids of the games filed for it, in the order they finished.
        self.filed: dict[int, list[int]] = {}

    def begin(self, slots: np.ndarray, state: np.ndarray | None) -> None:
        """A new step of the games in ``slots`` (the state of every game: ``state``)."""
        self._row_of_slot[:] = -1
        self._row_of_slot[slots] = np.arange(len(slots))
        self._blocks.append(_Block(slots=slots, ids=self._episode_of_slot[slots],
                                   state=None if state is None else np.array(state[slots])))

    def decide(self, agent: str, env_ids: np.ndarray, batch: Observations, chosen: np.ndarray) -> None:
        """``agent`` acted with ``chosen`` in games ``env_ids`` (those in play are kept)."""
        rows = self._row_of_slot[env_ids]
        keep = rows >= 0
        if not keep.any():
            return
        # Copies: the env owns its step buffers and may reuse them.
        take = slice(None) if keep.all() else np.flatnonzero(keep)
        self._blocks[-1].seats[agent] = (
            rows[take], np.array(batch.obs[take]), np.array(chosen[take]),
            None if batch.mask is None else np.array(batch.mask[take]))

    def reward(self, rewards: np.ndarray) -> None:
        """The step's rewards (``[num_envs, n_agents]``) for this block's games."""
        block = self._blocks[-1]
        block.rewards = np.array(rewards[block.slots], dtype=np.float32)

    def finish(self, slot: int, *, returns: np.ndarray, truncated: bool, final_state: np.ndarray | None,
               cuts: Mapping[str, Cut], policies: Sequence[str], own: Mapping[int, np.ndarray]) -> None:
        """File the slot's game for each learner in ``own`` (the seats it played), then
        open a new game in the slot."""
        if own:
            episode = int(self._episode_of_slot[slot])
            codes = tuple(self._names.setdefault(name, len(self._names)) for name in policies)
            self._games[episode] = _Game(returns=np.array(returns, dtype=float), truncated=truncated,
                                         final_state=None if final_state is None else np.array(final_state),
                                         cuts=cuts, policies=codes, own=own)
            for learner in own:
                self.filed.setdefault(learner, []).append(episode)
        self.clear(slot)

    def clear(self, slot: int) -> None:
        """Drop the slot's game; its next rows start a new one."""
        self._episode_of_slot[slot] = self._next_id
        self._next_id += 1

    def gather(self, learner: int) -> JointEpisodes:
        """``learner``'s games in the order they finished, every seat's rows aligned by step."""
        games = self.filed.get(learner, [])
        position = np.full(self._next_id, -1, dtype=np.int64)
        position[np.asarray(games, dtype=np.int64)] = np.arange(len(games))
        sizes = [len(b.ids) for b in self._blocks]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        ids = np.concatenate([b.ids for b in self._blocks]) if self._blocks else np.zeros(0, np.int64)
        row_position = position[ids]
        rows = np.flatnonzero(row_position >= 0)
        order = rows[np.argsort(row_position[rows], kind="stable")]  # by game; within one, in time order
        out_of = np.full(len(ids), -1, dtype=np.int64)
        out_of[order] = np.arange(len(order))
        n = len(order)
        counts = np.bincount(row_position[order], minlength=len(games))
        rewards = (np.concatenate([b.rewards if b.rewards is not None else np.zeros((len(b.ids), len(self.agents)),
                                                                                    np.float32)
                                   for b in self._blocks])[order] if self._blocks
                   else np.zeros((0, len(self.agents)), np.float32))
        filed = [self._games[g] for g in games]
        seat_rows = {}
        for k, agent in enumerate(self.agents):
            seat_rows[agent] = self._seat(agent, out_of, offsets, n, rewards[:, k], filed)
        state = None
        final_state = None
        if self._state_space is not None and all(b.state is not None for b in self._blocks):
            shape = tuple(self._state_space.shape)
            state = (np.concatenate([b.state for b in self._blocks if b.state is not None])[order]
                     if self._blocks else np.zeros((0, *shape), np.float32))
            final_state = np.stack([g.final_state if g.final_state is not None else np.zeros(shape, np.float32)
                                    for g in filed]) if filed else np.zeros((0, *shape), np.float32)
        names = sorted(self._names, key=self._names.__getitem__)
        return JointEpisodes(
            seats=self.agents,
            starts=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            rows=seat_rows, state=state, final_state=final_state,
            returns=np.stack([g.returns for g in filed]) if filed else np.zeros((0, len(self.agents))),
            truncated=np.asarray([g.truncated for g in filed], dtype=bool),
            policy_names=tuple(names),
            policies=np.asarray([g.policies for g in filed], dtype=np.int64).reshape(len(filed), len(self.agents)),
            own=np.asarray([g.own[learner] for g in filed], dtype=bool).reshape(len(filed), len(self.agents)),
        )

    def _seat(self, agent: str, out_of: np.ndarray, offsets: np.ndarray, n: int, rewards: np.ndarray,
              filed: Sequence[_Game]) -> SeatRows:
        """``agent``'s dense columns over the ``n`` gathered rows (zeros where it did not act)."""
        obs_space, act_space = self._observation_spaces[agent], self._action_spaces[agent]
        parts = [(out_of[offsets[b] + rows], obs, actions, masks)
                 for b, block in enumerate(self._blocks) if agent in block.seats
                 for rows, obs, actions, masks in [block.seats[agent]]]
        obs_dtype = parts[0][1].dtype if parts else np.float32
        act_dtype = parts[0][2].dtype if parts else (np.float32 if isinstance(act_space, Box) else np.int64)
        act_shape = tuple(act_space.shape) if isinstance(act_space, Box) else ()
        obs_out = np.zeros((n, *tuple(obs_space.shape)), dtype=obs_dtype)
        act_out = np.zeros((n, *act_shape), dtype=act_dtype)
        acted = np.zeros(n, dtype=bool)
        width = next((m.shape[1] for _, _, _, m in parts if m is not None), None)
        masks_out = None if width is None else np.zeros((n, width), dtype=bool)
        for target, obs, actions, masks in parts:
            keep = target >= 0
            if not keep.any():
                continue
            at = target[keep]
            obs_out[at] = obs[keep]
            act_out[at] = actions[keep]
            acted[at] = True
            if masks_out is not None:
                masks_out[at] = True if masks is None else masks[keep]
        cuts = [g.cuts.get(agent) for g in filed]
        return SeatRows(obs=obs_out, actions=act_out, masks=masks_out, acted=acted, rewards=rewards,
                        final_obs=tuple(None if c is None else c[0] for c in cuts),
                        final_masks=tuple(None if c is None else c[1] for c in cuts))
