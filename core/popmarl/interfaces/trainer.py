"""The Trainer interface: the update rule of one learning policy, and its state."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from popmarl.data.episodes import Episode

#: A trainer's state as named files in safe formats (``torch.save`` of state dicts,
#: read back with ``weights_only=True``; ``.npz`` without pickles; JSON), never a pickle
#: of a live object. Names are plain file names (letters, digits, ``_ . -``).
TrainerState = Mapping[str, bytes]


class Trainer(ABC):
    """Owns the update rule for one policy. The rollout engine feeds it episodes the
    policy played (in ``explore`` mode) and calls :meth:`update` between collections.

    A trainer belongs to a learner that persists across train tasks (and across a
    resumed run): :meth:`state` captures everything :meth:`update` depends on apart from
    the policy's weights (optimiser state, target networks, replay buffer, exploration
    schedule, counters, random generators), so that a trainer rebuilt with the same
    algorithm, policy weights and :meth:`load_state` continues exactly as the original."""

    @abstractmethod
    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        """Learn from ``episodes`` (the newest since the last call); return metrics.

        They arrive as one :class:`~popmarl.data.episodes.EpisodeBatch` per round, on every
        backend (column-wise: ``EpisodeBatch.of(episodes)`` returns it as is and gathers
        any other sequence), so a trainer that works on whole columns need not loop over
        episodes; or, for an algorithm that sets ``joint_view``, as one
        :class:`~popmarl.data.trajectories.JointEpisodes` (every seat's rows of its games)."""

    @abstractmethod
    def state(self) -> TrainerState:
        """Everything :meth:`update` depends on besides the policy's weights (a trainer
        with none returns ``{}``)."""

    @abstractmethod
    def load_state(self, state: TrainerState) -> None:
        """Continue from ``state`` (from :meth:`state` of a trainer of the same algorithm
        and config); the policy's weights are set separately, before this call."""
