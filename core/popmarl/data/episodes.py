"""What play produces for a learner: the decisions a policy is asked for
(:class:`Observations`) and the finished episodes a trainer learns from, one by one
(:class:`Episode`) or column-wise (:class:`EpisodeBatch`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import attrs
import numpy as np


@attrs.frozen(kw_only=True)
class Observations:
    """A batch of decisions for one policy: observations, legal-action masks, and (for
    tabular policies) the information-state keys of each row."""

    obs: np.ndarray
    mask: np.ndarray | None = None
    keys: tuple[str, ...] | None = None
    agent: str = ""

    def __len__(self) -> int:
        return int(self.obs.shape[0])


@attrs.frozen(kw_only=True)
class Episode:
    """One finished episode's transitions for a learner (arrays over its decisions).

    Exactly one of ``terminated`` (the episode ended: nothing follows the last decision)
    and ``truncated`` (it was cut off, e.g. by a time limit) holds. A truncated episode
    carries ``final_obs`` (and ``final_mask``), the learner's observation when it was
    cut, so that learning bootstraps from its value rather than from zero.
    """

    agent: str
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    masks: np.ndarray | None
    terminated: bool
    truncated: bool
    episode_return: float
    final_obs: np.ndarray | None = None
    final_mask: np.ndarray | None = None

    def __attrs_post_init__(self) -> None:
        if self.terminated == self.truncated:
            raise ValueError(f"Episode: exactly one of terminated and truncated must hold, got terminated="
                             f"{self.terminated}, truncated={self.truncated}")
        if self.truncated and self.final_obs is None:
            raise ValueError("Episode: a truncated episode needs final_obs, the observation when it was cut off")


@attrs.frozen(kw_only=True, eq=False)
class EpisodeColumns:
    """Rows of whole episodes stored column-wise, and how each episode was cut off.

    Per row: ``obs``, ``actions`` (as the policy chose them: a Box action before
    clipping), ``masks`` (legal actions; None where the env gives none: every action
    legal) and ``rewards``. Per episode: ``final_obs`` / ``final_masks``, the observation
    when it was cut off (None where it ended), to bootstrap from. What the rows are (a
    learner's decisions, or a seat's steps of whole games) is the subclass's to say.
    """

    obs: np.ndarray
    actions: np.ndarray
    masks: np.ndarray | None
    rewards: np.ndarray
    final_obs: tuple[np.ndarray | None, ...]
    final_masks: tuple[np.ndarray | None, ...]


@attrs.frozen(kw_only=True, eq=False)
class EpisodeBatch(EpisodeColumns, Sequence[Episode]):
    """Finished episodes stored column-wise: their decisions' rows concatenated, episode
    after episode (``starts[i]:starts[i + 1]`` are episode ``i``'s rows).

    What the rollout engine hands a learner's trainer: building one costs a few numpy
    calls however many episodes it holds, and a trainer turns it into transitions the
    same way. It is also a sequence of :class:`Episode` (views into the columns), for
    code that reads episodes one by one.
    """

    agents: tuple[str, ...]
    starts: np.ndarray
    returns: np.ndarray
    truncated: np.ndarray

    def __attrs_post_init__(self) -> None:
        n = len(self.agents)
        if len(self.starts) != n + 1 or self.starts[0] != 0 or self.starts[-1] != len(self.obs):
            raise ValueError(f"EpisodeBatch: starts must run from 0 to the {len(self.obs)} rows in {n + 1} offsets")
        if n and np.any(np.diff(self.starts) <= 0):
            raise ValueError("EpisodeBatch: every episode needs at least one decision")
        for name in ("returns", "truncated", "final_obs", "final_masks"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"EpisodeBatch: {name} needs one entry per episode ({n})")
        if any(cut and final is None for cut, final in zip(self.truncated, self.final_obs)):
            raise ValueError("EpisodeBatch: a truncated episode needs final_obs, the observation when it was cut off")

    @classmethod
    def of(cls, episodes: Iterable[Episode]) -> EpisodeBatch:
        """The episodes (those with at least one decision) as one batch."""
        if isinstance(episodes, EpisodeBatch):
            return episodes
        kept = [e for e in episodes if len(e.actions)]
        if not kept:
            return EMPTY_EPISODES
        widths = {np.shape(e.masks)[1] for e in kept if e.masks is not None}
        width = widths.pop() if widths else 0
        return cls(
            agents=tuple(e.agent for e in kept),
            starts=np.concatenate([[0], np.cumsum([len(e.actions) for e in kept])]).astype(np.int64),
            obs=np.concatenate([np.asarray(e.obs)[:len(e.actions)] for e in kept]),
            actions=np.concatenate([np.asarray(e.actions) for e in kept]),
            rewards=np.concatenate([np.asarray(e.rewards, dtype=np.float32) for e in kept]),
            # An episode without masks (every action legal) beside masked ones: all ones.
            masks=np.concatenate([np.ones((len(e.actions), width), bool) if e.masks is None
                                  else np.asarray(e.masks, bool)[:len(e.actions)] for e in kept]) if width else None,
            returns=np.asarray([e.episode_return for e in kept], dtype=np.float64),
            truncated=np.asarray([e.truncated for e in kept], dtype=bool),
            final_obs=tuple(e.final_obs if e.truncated else None for e in kept),
            final_masks=tuple(e.final_mask if e.truncated else None for e in kept),
        )

    @classmethod
    def join(cls, batches: Sequence[EpisodeBatch]) -> EpisodeBatch:
        """Several batches as one, column by column (episodes in the batches' order)."""
        kept = [b for b in batches if len(b)]
        if len(kept) <= 1:
            return kept[0] if kept else EMPTY_EPISODES
        widths = {b.masks.shape[1] for b in kept if b.masks is not None}
        width = widths.pop() if widths else 0
        offsets = np.cumsum([0] + [b.decisions for b in kept[:-1]])
        return cls(
            agents=tuple(a for b in kept for a in b.agents),
            starts=np.concatenate([[0], *[b.starts[1:] + at for b, at in zip(kept, offsets)]]).astype(np.int64),
            obs=np.concatenate([b.obs for b in kept]),
            actions=np.concatenate([b.actions for b in kept]),
            rewards=np.concatenate([b.rewards for b in kept]),
            masks=np.concatenate([np.ones((b.decisions, width), bool) if b.masks is None else b.masks
                                  for b in kept]) if width else None,
            returns=np.concatenate([b.returns for b in kept]),
            truncated=np.concatenate([b.truncated for b in kept]),
            final_obs=tuple(f for b in kept for f in b.final_obs),
            final_masks=tuple(f for b in kept for f in b.final_masks),
        )

    def __len__(self) -> int:
        return len(self.agents)

    def __getitem__(self, index: int) -> Episode:  # type: ignore[override]
        if not isinstance(index, int | np.integer):
            raise TypeError("EpisodeBatch: index with an int (one episode)")
        i = range(len(self))[index]
        rows = slice(int(self.starts[i]), int(self.starts[i + 1]))
        cut = bool(self.truncated[i])
        return Episode(agent=self.agents[i], obs=self.obs[rows], actions=self.actions[rows],
                       rewards=self.rewards[rows], masks=None if self.masks is None else self.masks[rows],
                       terminated=not cut, truncated=cut, episode_return=float(self.returns[i]),
                       final_obs=self.final_obs[i], final_mask=self.final_masks[i])

    def __iter__(self) -> Iterator[Episode]:
        return (self[i] for i in range(len(self)))

    @property
    def decisions(self) -> int:
        """Rows (the learner's decisions) over all episodes."""
        return len(self.obs)

    @property
    def ends(self) -> np.ndarray:
        """Each episode's last row."""
        return self.starts[1:] - 1


EMPTY_EPISODES = EpisodeBatch(agents=(), starts=np.zeros(1, np.int64), obs=np.zeros((0, 0)), actions=np.zeros(0),
                              rewards=np.zeros(0, np.float32), masks=None, returns=np.zeros(0),
                              truncated=np.zeros(0, bool), final_obs=(), final_masks=())
