"""Algorithm ``random``: a uniformly random policy over the legal actions, untrained.

A baseline and a PSRO starting point; it needs no knowledge of the env.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from popmarl.api import Algorithm, Box, Discrete, ExplicitPolicy, Observations, Policy, PolicySpace, masked_uniform


class UniformRandomPolicy(ExplicitPolicy):
    """Uniform over the legal actions of a discrete space."""

    def __init__(self, n_actions: int) -> None:
        self.n_actions = n_actions

    def probabilities(self, batch: Observations) -> np.ndarray:
        return masked_uniform(batch.mask, len(batch), self.n_actions)

    def get_weights(self) -> Mapping[str, np.ndarray]:
        return {"n_actions": np.array(self.n_actions)}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        self.n_actions = int(weights["n_actions"])


class BoxRandomPolicy(Policy):
    """Uniform (or standard normal where unbounded) actions in a Box space."""

    def __init__(self, space: Box) -> None:
        self.space = space

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        return self.space.sample(rng, n=len(batch))

    def get_weights(self) -> Mapping[str, np.ndarray]:
        return {}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        return None


class RandomAlgorithm(Algorithm):
    """Adds a uniformly random policy every iteration (no training)."""

    learns = False
    answers = False

    def make_policy(self, *, space: PolicySpace, seed: int) -> Policy:
        if isinstance(space.action_space, Discrete):
            return UniformRandomPolicy(space.action_space.n)
        return BoxRandomPolicy(space.action_space)
