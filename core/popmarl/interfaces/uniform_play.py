"""Uniformly random play, as a policy every backend builds whatever a population's algorithm.

A backend rebuilds a frozen policy from its weights with its population's algorithm, and
an algorithm's own policies need not be able to play uniformly at random (an untrained
network plays greedily, a scheduled learner one action). Weights holding
:data:`UNIFORM_PLAY_KEY` stand for uniform play over the legal actions (over a ``Box``: a
uniformly random point) in any population: the executor builds :func:`uniform_play` for
them. What the versus-random measure (:mod:`popmarl.scenario.progress`) plays against.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from popmarl.data.episodes import Observations
from popmarl.data.policies import Weights
from popmarl.interfaces.policy import ExplicitPolicy, Policy, masked_uniform
from popmarl.interfaces.spaces import Box, Discrete, Space

#: The weights entry that marks uniformly random play (no algorithm's weights hold it).
UNIFORM_PLAY_KEY = "popmarl.uniform_play"


def uniform_play_weights() -> dict[str, np.ndarray]:
    """The weights that stand for uniformly random play."""
    return {UNIFORM_PLAY_KEY: np.array(True)}


def is_uniform_play(weights: Mapping[str, np.ndarray]) -> bool:
    """Whether ``weights`` stand for uniformly random play."""
    return UNIFORM_PLAY_KEY in weights and bool(np.asarray(weights[UNIFORM_PLAY_KEY]))


class UniformDiscretePlay(ExplicitPolicy):
    """Uniform over the legal actions of each row."""

    def __init__(self, n_actions: int) -> None:
        self.n_actions = n_actions

    def probabilities(self, batch: Observations) -> np.ndarray:
        return masked_uniform(batch.mask, len(batch), self.n_actions)

    def get_weights(self) -> Weights:
        return uniform_play_weights()

    def set_weights(self, weights: Weights) -> None:
        return None


class UniformBoxPlay(Policy):
    """A uniformly random point of a ``Box`` per row (standard normal where unbounded)."""

    def __init__(self, space: Box) -> None:
        self.space = space

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        return self.space.sample(rng, n=len(batch))

    def get_weights(self) -> Weights:
        return uniform_play_weights()

    def set_weights(self, weights: Weights) -> None:
        return None


def uniform_play(action_space: Space) -> Policy:
    """Uniformly random play in ``action_space``."""
    if isinstance(action_space, Discrete):
        return UniformDiscretePlay(action_space.n)
    if isinstance(action_space, Box):
        return UniformBoxPlay(action_space)
    raise TypeError(f"no uniform play over {type(action_space).__name__}")
