"""The Trainer interface: the update rule of one learning policy."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from popmarl.records import Episode


class Trainer(ABC):
    """Owns the update rule for one policy. The rollout engine feeds it episodes the
    policy played (in ``explore`` mode) and calls :meth:`update` between collections."""

    @abstractmethod
    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        """Learn from ``episodes`` (the newest since the last call); return metrics."""
