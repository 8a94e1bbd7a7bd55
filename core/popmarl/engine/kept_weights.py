"""Which weights a training run returns (``training.keep``), on every backend.

``last``: the learner's final weights. ``best``: the weights of the version that played
best. Each version of the learner's weights, as published to the actors, is scored by
the mean return of the first ``window`` episodes played with it that reach the learner;
a version that plays fewer is not scored (so ``window`` must not exceed
``episodes_per_update``: each version plays about that many before the next update).
The highest score wins (the earliest version on a tie); with no version scored, the run
keeps its last weights. Scoring a version by its own episodes only is what makes the
kept weights the ones that played the best window: a window over several versions
would credit one version with the others' play.
"""

from __future__ import annotations

import numpy as np

from collections.abc import Mapping
from typing import Any

from popmarl.data.tasks import TrainBudget

#: What a version's weights are to this bookkeeping: a policy's weights, or a team's by
#: population (kept as given, never read).
Weights = Mapping[str, Any]


def keep_best_problem(*, window: int, episodes_per_update: int) -> str | None:
    """Why ``keep: best`` cannot score any version with these settings (None: it can)."""
    if window <= episodes_per_update:
        return None
    return (f"keep: best scores each version of the weights on the first `window` episodes it plays, and a "
            f"version plays episodes_per_update ({episodes_per_update}) before the next update; set window "
            f"to at most {episodes_per_update}, got {window}")


class KeptWeights:
    """The ``keep`` bookkeeping of one training run: the learner reports each version it
    publishes (:meth:`published`) and the returns of the episodes each version played
    (:meth:`played`); :meth:`final` gives the weights to return."""

    def __init__(self, budget: TrainBudget) -> None:
        self.best = budget.keep == "best"
        self.window = budget.window
        if self.best:
            problem = keep_best_problem(window=budget.window, episodes_per_update=budget.episodes_per_update)
            if problem is not None:
                raise ValueError(problem)
        self._playing: dict[int, tuple[Weights, list[float]]] = {}
        self.score = -np.inf
        self.version: int | None = None
        self._weights: Weights | None = None

    def published(self, version: int, weights: Weights) -> None:
        """Version ``version`` of the weights is what the actors now play."""
        if self.best:
            self._playing[version] = (weights, [])

    def played(self, version: int, returns: list[float]) -> None:
        """Episodes played with ``version`` reached the learner with these returns."""
        entry = self._playing.get(version)
        if entry is None:
            return
        weights, seen = entry
        seen.extend(returns)
        if len(seen) < self.window:
            return
        del self._playing[version]
        score = float(np.mean(seen[:self.window]))
        if score > self.score:
            self.score, self.version, self._weights = score, version, weights

    def forget_older(self, version: int) -> None:
        """No episode of a version below ``version`` will reach the learner any more."""
        for old in [v for v in self._playing if v < version]:
            del self._playing[old]

    def metrics(self) -> dict[str, float]:
        """``kept_version`` and its ``kept_window_return`` (``keep: best`` with a version
        scored only)."""
        if self.version is None:
            return {}
        return {"kept_version": float(self.version), "kept_window_return": self.score}

    def final(self, last: Weights) -> Weights:
        """The weights to return, given the learner's ``last`` ones."""
        return self._weights if self._weights is not None else last
