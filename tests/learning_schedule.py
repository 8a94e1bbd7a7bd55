"""A test-only learner whose returns are known in advance (core only: numpy and popmarl).

Its policy plays one pure action per version of its weights: version ``v`` (the weights
after ``v - 1`` updates) plays ``schedule[(v - 1) % len(schedule)]``, whatever the
episodes say. In rock-paper-scissors against rock, action 1 (paper) wins every episode,
0 draws and 2 loses, so which version played best is known exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from popmarl.interfaces.algorithm import Algorithm, PolicySpace, TrainerContext
from popmarl.builtin.matrix_env import MixedStrategyPolicy
from popmarl.errors import CheckpointError
from popmarl.data.episodes import Episode
from popmarl.interfaces.spaces import Discrete
from popmarl.interfaces.trainer import Trainer, TrainerState

#: The one file of the test trainers' states.
STATE_FILE = "trainer.json"


def json_state(**fields: Any) -> TrainerState:
    """A test trainer's state: its counters and records as one JSON file."""
    return {STATE_FILE: json.dumps(fields, sort_keys=True).encode()}


def read_json_state(state: TrainerState, *fields: str) -> dict[str, Any]:
    """The fields of a :func:`json_state`; a one-line CheckpointError if one is missing."""
    try:
        data = json.loads(state[STATE_FILE])
    except KeyError:
        raise CheckpointError(f"trainer state: file {STATE_FILE!r} is missing") from None
    except ValueError as exc:
        raise CheckpointError(f"trainer state {STATE_FILE}: not valid JSON ({exc})") from None
    missing = [f for f in fields if not isinstance(data, dict) or f not in data]
    if missing:
        raise CheckpointError(f"trainer state {STATE_FILE}: missing {', '.join(missing)}")
    return data


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

    def state(self) -> TrainerState:
        """The number of updates: where the schedule is."""
        return json_state(updates=self.updates)

    def load_state(self, state: TrainerState) -> None:
        self.updates = int(read_json_state(state, "updates")["updates"])


class ScheduleAlgorithm(Algorithm):
    """``schedule``: a learner that plays a scheduled pure action per version."""

    learns = True
    Config = ScheduleConfig
    config: ScheduleConfig

    def make_policy(self, *, space: PolicySpace, seed: int) -> MixedStrategyPolicy:
        assert isinstance(space.action_space, Discrete)
        return MixedStrategyPolicy(np.eye(space.action_space.n)[self.config.schedule[0]])

    def make_trainer(self, *, policy: object, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        assert isinstance(policy, MixedStrategyPolicy)
        return ScheduleTrainer(policy, self.config.schedule)
