"""When one training run stops: the budget's limits, its targets and its plateau rule.

A run stops at the first of ``max_env_steps``, ``max_episodes``, ``max_wall_time_s``;
or once every learner's windowed mean return (or win rate) reaches its target; or, with
``patience`` set, once every learner's return has stopped improving: after an update
round, the mean return over the learner's last ``window`` episodes counts as an
improvement when it beats the best such mean of the earlier rounds by more than its own
standard error; ``patience`` rounds in a row without one, with at least
``min_env_steps`` played, end the run. The standard error makes the rule scale-free and
noise-aware: a best response on a noisy game (poker) stops soon after its return levels
off, one on a game it keeps getting better at (a board game) trains on, up to the cap.
Both backends (:func:`popmarl.engine.learner_loop.run_task`, the ray learner actor) use it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

from popmarl.data.tasks import TrainBudget


class LearnerProgress:
    """One learner's return window and plateau count."""

    def __init__(self, window: int) -> None:
        self.window = deque[float](maxlen=window)
        self.best = -np.inf
        self.stale = 0
        self._new: list[float] = []

    def played(self, returns: Iterable[float]) -> None:
        """Episodes the learner played, with their returns (counted at :meth:`round_done`)."""
        self._new.extend(returns)

    def round_done(self, rounds: int = 1) -> None:
        """An update round ended: count it as an improvement of the windowed return or not.
        ``rounds`` > 1: the episodes since the last call are that many rounds' worth (a
        feed whose workers played ahead of the learner), counted as that many consecutive
        parts, each an improvement or not, so that the plateau rule sees the same
        granularity however the games were delivered."""
        new, self._new = self._new, []
        for part in np.array_split(np.asarray(new, dtype=float), rounds) if rounds > 1 else [new]:
            self.window.extend(part)
            self._judge()

    def _judge(self) -> None:
        if not self.window:
            return
        returns = np.asarray(self.window, dtype=float)
        mean = float(returns.mean())
        error = float(returns.std() / np.sqrt(len(returns)))
        if mean > self.best + error:
            self.best, self.stale = mean, 0
        else:
            self.stale += 1

    @property
    def full(self) -> bool:
        return len(self.window) >= (self.window.maxlen or 0)

    def metrics(self) -> dict[str, float]:
        """``window_return`` and ``window_win_rate`` (return > 0) over the last window."""
        returns = np.asarray(self.window, dtype=float)
        return {"window_return": float(returns.mean()) if len(returns) else 0.0,
                "window_win_rate": float(np.mean(returns > 0)) if len(returns) else 0.0}


class TrainingProgress:
    """The stop rule of one training run over its learners (by key)."""

    def __init__(self, budget: TrainBudget, keys: Sequence[str]) -> None:
        self.budget = budget
        self.learners = {key: LearnerProgress(budget.window) for key in keys}

    def played(self, key: str, returns: Iterable[float]) -> None:
        self.learners[key].played(returns)

    def round_done(self, rounds: int = 1) -> None:
        """Every learner's update round ended (``rounds``: worth that many, see
        :meth:`LearnerProgress.round_done`)."""
        for learner in self.learners.values():
            learner.round_done(rounds)

    def spent(self, env_steps: int, episodes: int, elapsed: float) -> bool:
        """Whether any stopping condition of the budget holds."""
        return self.stop_reason(env_steps, episodes, elapsed) is not None

    def stop_reason(self, env_steps: int, episodes: int, elapsed: float) -> str | None:
        """The first stopping condition of the budget that holds (its field's name, or
        ``plateau`` for ``patience``), or None."""
        budget = self.budget
        if budget.max_env_steps is not None and env_steps >= budget.max_env_steps:
            return "max_env_steps"
        if budget.max_episodes is not None and episodes >= budget.max_episodes:
            return "max_episodes"
        if budget.max_wall_time_s is not None and elapsed >= budget.max_wall_time_s:
            return "max_wall_time_s"
        learners = list(self.learners.values())
        if not learners or not all(learner.full for learner in learners):
            return None
        windows = [np.asarray(learner.window, dtype=float) for learner in learners]
        if budget.target_return is not None and all(w.mean() >= budget.target_return for w in windows):
            return "target_return"
        if budget.target_win_rate is not None and all(np.mean(w > 0) >= budget.target_win_rate for w in windows):
            return "target_win_rate"
        if (budget.patience is not None and env_steps >= (budget.min_env_steps or 0)
                and all(learner.stale >= budget.patience for learner in learners)):
            return "plateau"
        return None
