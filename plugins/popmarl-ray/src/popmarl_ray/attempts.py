"""One train task's attempts on the ray backend, and the calls made for them.

A train task runs on the learner actor that holds its learners; each time it is
(re)started is one attempt, named on the episode and parameter servers by the task's
learner keys, a serial unique in the run and the attempt's number. The attempt counts
the games played for it, so the driver feeds it explore calls until its budget is
reached; a :class:`Call` remembers which attempt (and which actor and server
generation) an outstanding call was made for, so a late answer to a replaced attempt or
actor is told apart.
"""

from __future__ import annotations

import attrs
import ray

from popmarl.api import TrainResult, TrainTask
from popmarl_ray.actors import ExploreReport
from popmarl_ray.feed import stream_of


@attrs.define
class Attempt:
    """One train task on its learner actor: the current attempt and its explore traffic."""

    task: TrainTask
    slot: int
    task_ref: ray.ObjectRef  # the task as the workers see it
    serial: int  # unique in the run: names its attempts on the servers
    number: int = 0
    train_ref: ray.ObjectRef | None = None
    since: float = 0.0  # when the learner last showed progress (started, or published weights)
    version: int = 0  # the newest weights version it published, as last seen
    queued: int = 0  # the order its train call was sent in (calls to one learner run in turn)
    collecting: bool = False
    generation: int = 0  # of the learner actor running the current attempt
    in_flight: int = 0
    batches: int = 0
    env_steps: int = 0
    episodes: int = 0
    result: TrainResult | None = None

    def played(self, report: ExploreReport) -> None:
        """Count an accepted batch; stop feeding once the budget's steps or episodes are
        played (the learner stops on the same totals, kept by the episode server)."""
        self.env_steps += report.env_steps
        self.episodes += report.episodes
        budget = self.task.budget
        if (budget.max_env_steps is not None and self.env_steps >= budget.max_env_steps) or (
                budget.max_episodes is not None and self.episodes >= budget.max_episodes):
            self.collecting = False

    def room(self, games: int) -> bool:
        """Whether another explore call of ``games`` games fits the budget: the steps and
        games reported plus those of the calls in flight (at the steps per game reported so
        far) stay below its caps. Without it the workers' calls in flight when the budget
        is reached overshoot it (two workers, an off-policy team: 9,600 env steps for a
        6,000 budget); with it the budget is kept within about one call's games."""
        budget = self.task.budget
        coming = self.in_flight * games
        if budget.max_episodes is not None and self.episodes + coming >= budget.max_episodes:
            return False
        if budget.max_env_steps is not None and self.episodes:
            steps_per_game = self.env_steps / self.episodes
            if self.env_steps + coming * steps_per_game >= budget.max_env_steps:
                return False
        return True

    @property
    def name(self) -> str:
        """The task's learners' keys."""
        return "+".join(spec.key for spec in self.task.learners)

    @property
    def key(self) -> str:
        """The attempt's name on the episode and parameter servers."""
        return f"{self.name}@{self.serial}#{self.number}"

    @property
    def streams(self) -> list[str]:
        """The attempt's streams on the episode and parameter servers, one per learner."""
        return [stream_of(self.key, spec.key) for spec in self.task.learners]


@attrs.frozen
class Call:
    """What an outstanding call was: its kind, its attempt (and that attempt's number
    then), the actor's slot and generation, and the servers' generation."""

    kind: str
    attempt: Attempt
    number: int
    slot: int
    generation: int
    servers: int
