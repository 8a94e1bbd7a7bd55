"""A test-only learner whose returns are known in advance (core only: numpy and popmarl).

Its policy plays one pure action per version of its weights: version ``v`` (the weights
after ``v - 1`` updates) plays ``schedule[(v - 1) % len(schedule)]``, whatever the
episodes say. In rock-paper-scissors against rock, action 1 (paper) wins every episode,
0 draws and 2 loses, so which version played best is known exactly.
"""

from __future__ import annotations

import json

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from popmarl.algorithm import Algorithm, PolicySpace
from popmarl.builtin.matrix_env import MixedStrategyPolicy
from popmarl.records import Episode
from popmarl.spaces import Discrete
from popmarl.trainer import Trainer


@attrs.frozen(kw_only=True)
class ScheduleConfig:
    """The pure action of each version, in order (cycled)."""

    schedule: list[int] = attrs.field(factory=lambda: [0, 1, 2])


class ScheduleTrainer(Trainer):
    """Moves its policy to the schedule's next action at every update."""

    def __init__(self, policy: MixedStrategyPolicy, schedule: Sequence[int]) -> None:
        self.policy = policy
        self.schedule = list(schedule)
        self.updates = 0

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        self.updates += 1
        action = self.schedule[self.updates % len(self.schedule)]
        self.policy.probs = np.eye(self.policy.probs.size)[action]
        return {"episodes": float(len(episodes))}

    def state(self) -> Mapping[str, bytes]:
        return {"schedule.json": json.dumps({"updates": self.updates}).encode()}

    def load_state(self, state: Mapping[str, bytes]) -> None:
        self.updates = int(json.loads(state["schedule.json"])["updates"])


class ScheduleAlgorithm(Algorithm):
    """``schedule``: a learner that plays a scheduled pure action per version."""

    Config = ScheduleConfig
    config: ScheduleConfig

    def make_policy(self, *, space: PolicySpace, seed: int) -> MixedStrategyPolicy:
        assert isinstance(space.action_space, Discrete)
        return MixedStrategyPolicy(np.eye(space.action_space.n)[self.config.schedule[0]])

    def make_trainer(self, *, policy: object, space: PolicySpace, seed: int) -> Trainer:
        assert isinstance(policy, MixedStrategyPolicy)
        return ScheduleTrainer(policy, self.config.schedule)
