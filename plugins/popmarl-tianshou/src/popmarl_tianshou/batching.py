"""popmarl episodes to Tianshou batches and replay buffers.

An :class:`~popmarl.api.Episode` holds one agent's decisions; its transition ``t``
goes from ``obs[t]`` to ``obs[t+1]`` with the reward attributed to decision ``t``, and
the last one ends the episode. With discrete actions each observation is stored as
``Batch(obs=features, mask=legal)``, the layout Tianshou's policies read masks from, so
the next state's mask limits the bootstrap target to legal actions.

The last transition of a terminated episode has ``terminated=True`` (Tianshou
bootstraps nothing after it); that of a truncated one has ``truncated=True``,
``terminated=False`` and the observation at the cut as ``obs_next``, so Tianshou's
n-step targets (DQN) and GAE (PPO, A2C) bootstrap from its value, as they do for
Gymnasium's time limits. Both set ``done``, which ends the episode for Tianshou. Where
the mask at the cut allows no action (the learner was not to move then, e.g. in a
turn-based game), DQN's bootstrap maximises over every action.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import gymnasium as gym
import numpy as np
from tianshou.data import Batch, ReplayBuffer

from popmarl.api import Discrete, Episode, EpisodeBatch, PolicySpace, Space, seed32
from popmarl_torch.features import features


def _cache_tianshou_kernels() -> None:
    """Let numba cache Tianshou's return kernels on disk: its policies compile them on
    construction, which otherwise costs several seconds in every fresh process."""
    from tianshou.algorithm import algorithm_base

    for name in ("_gae", "_nstep_return"):
        kernel = getattr(algorithm_base, name, None)
        try:
            kernel.enable_caching()  # type: ignore[union-attr]
        except Exception:  # an unwritable cache dir or another numba: compile as usual
            pass


_cache_tianshou_kernels()


def gym_space(space: Space) -> gym.Space:
    """The gymnasium equivalent of a popmarl space (Tianshou's policies need one)."""
    if isinstance(space, Discrete):
        return gym.spaces.Discrete(space.n)
    dtype = np.dtype(space.dtype)
    return gym.spaces.Box(low=space.low.astype(dtype), high=space.high.astype(dtype), shape=space.shape, dtype=dtype)


def transitions(episodes: Sequence[Episode], space: PolicySpace) -> Batch:
    """The episodes' transitions, episode after episode, as one flat Tianshou batch with
    ``obs``, ``act``, ``rew``, ``terminated``, ``truncated``, ``done`` and ``obs_next``
    (a few numpy calls on an :class:`~popmarl.api.EpisodeBatch`; other sequences of
    episodes are gathered into one first)."""
    batch = EpisodeBatch.of(episodes)
    if not len(batch):
        return Batch()
    x = features(space.observation_space, batch.obs)
    ends = batch.ends
    cut = np.flatnonzero(batch.truncated)
    # After each episode's last decision: the observation at the cut, or a placeholder
    # that a terminated transition never reads.
    x_next = np.empty_like(x)
    x_next[:-1] = x[1:]
    x_next[ends] = x[ends]
    if len(cut):
        x_next[ends[cut]] = features(space.observation_space, np.stack([np.asarray(batch.final_obs[i]) for i in cut]))
    done = np.zeros(len(x), bool)
    done[ends] = True
    truncated = np.zeros(len(x), bool)
    truncated[ends[cut]] = True
    rew = batch.rewards.astype(np.float64)
    if not isinstance(space.action_space, Discrete):
        return Batch(obs=Batch(obs=x), act=batch.actions.astype(np.float32), rew=rew, terminated=done & ~truncated,
                     truncated=truncated, done=done, obs_next=Batch(obs=x_next))
    n = space.action_space.n
    legal = np.ones((len(x), n), bool) if batch.masks is None else batch.masks.astype(bool, copy=False)
    legal_next = np.empty_like(legal)
    legal_next[:-1] = legal[1:]
    # Where the mask at the cut allows no action (the learner was not to move then, as
    # in a turn-based game), the bootstrap maximises over every action.
    legal_next[ends] = True
    for i in cut:
        final = batch.final_masks[i]
        if final is not None and np.any(final):
            legal_next[ends[i]] = np.asarray(final, bool).reshape(n)
    return Batch(obs=Batch(obs=x, mask=legal), act=batch.actions.astype(np.int64), rew=rew,
                 terminated=done & ~truncated, truncated=truncated, done=done,
                 obs_next=Batch(obs=x_next, mask=legal_next))


def to_buffer(batch: Batch, *, seed: int = 0) -> ReplayBuffer:
    """A replay buffer holding exactly ``batch`` (in order, so whole episodes stay
    contiguous for returns and advantages); its sampling is seeded from ``seed``."""
    rows = len(batch)  # walks every field of the batch: once
    buffer = replay_buffer(rows, seed=seed)
    buffer.set_batch(batch)
    buffer._size = rows
    buffer.last_index[0] = rows - 1
    return buffer


def append(buffer: ReplayBuffer, batch: Batch) -> None:
    """Add ``batch``'s transitions to ``buffer`` (the oldest are overwritten when full)."""
    if len(batch):
        buffer.update(to_buffer(batch))


@contextlib.contextmanager
def numpy_random(state: dict[str, object]) -> Iterator[None]:
    """Run code that draws from numpy's global generator (Tianshou's minibatch
    shuffling) with a private generator state kept in ``state["np"]``, so an update is
    deterministic in the trainer's seed and leaves the global generator alone."""
    saved = np.random.get_state()
    np.random.set_state(state["np"])  # type: ignore[arg-type]
    try:
        yield
    finally:
        state["np"] = np.random.get_state()
        np.random.set_state(saved)


def replay_buffer(size: int, *, seed: int) -> ReplayBuffer:
    """An empty Tianshou replay buffer of ``size`` rows, its sampling seeded from ``seed``
    (any non-negative integer: the buffer's ``RandomState`` takes 32 bits, so it gets
    :func:`~popmarl.api.seed32` of it)."""
    return ReplayBuffer(size, random_seed=seed32(seed))


def numpy_random_state(seed: int) -> dict[str, object]:
    """A fresh private state for :func:`numpy_random`, seeded from ``seed`` (any
    non-negative integer: ``RandomState`` takes 32 bits, so it gets
    :func:`~popmarl.api.seed32` of it)."""
    return {"np": np.random.RandomState(seed32(seed)).get_state()}


__all__ = ["append", "gym_space", "numpy_random", "numpy_random_state", "replay_buffer", "to_buffer", "transitions"]
