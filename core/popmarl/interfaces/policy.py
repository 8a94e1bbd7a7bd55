"""The Policy interface: batched, masked acting, with weights as plain arrays."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from popmarl.data.episodes import Observations
from popmarl.data.policies import Weights


class Policy(ABC):
    """Maps a batch of observations (and legal-action masks) to actions.

    Frozen policies are what populations hold. Weights move as ``{name: ndarray}``
    (never pickled objects), so checkpoints are ``.npz`` files.

    Policies that can act together, in one batched computation for all of them, say so
    with equal keys (:meth:`group_key`): the rollout engine makes one :meth:`act_grouped`
    call for the opponents (policies acting without exploring) of a decision that share
    a key, instead of one ``act`` per policy.
    """

    @abstractmethod
    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        """One action per row of ``batch``; never an action the row's mask forbids.
        Box actions may lie past the bounds (a Gaussian's sample): the rollout engine
        clips what the env receives, and a learner's episodes keep the policy's own
        action."""

    def group_key(self) -> Hashable | None:
        """A key shared by the policies that :meth:`act_grouped` of this class can make
        act together (typically the class, the network's shapes and the device), or None
        (the default) to act alone. Only acting without exploring is grouped, so the key
        need not cover what exploring depends on. The rollout engine reads it once per
        run: it must not change while the policy plays."""
        return None

    @classmethod
    def act_grouped(cls, policies: Sequence[Policy], batches: Sequence[Observations], *,
                    rng: np.random.Generator) -> list[np.ndarray]:
        """``[p.act(b, explore=False, rng=rng) for p, b in zip(policies, batches)]``, for
        ``policies`` of equal non-None :meth:`group_key` (of this class): the same actions,
        up to float rounding, and ``rng`` drawn from as those calls in that order would. An
        override computes them together; this default makes the calls."""
        return [policy.act(batch, explore=False, rng=rng) for policy, batch in zip(policies, batches)]

    @abstractmethod
    def get_weights(self) -> Weights:
        """A snapshot of the policy's parameters as named numpy arrays (copies: later
        updates must not change them)."""

    @abstractmethod
    def set_weights(self, weights: Weights) -> None:
        """Load parameters produced by :meth:`get_weights` of a policy of the same kind."""


class ActingAlone(Policy):
    """Another policy's actions and weights under an object of its own with no group key:
    the rollout engine asks it alone, as a policy distinct from the one it wraps (a
    per-policy baseline for grouped acting; a learner's copy in an opponent's seat,
    :class:`popmarl.engine.seating.OpponentCopy`)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        return self.policy.act(batch, explore=explore, rng=rng)

    def get_weights(self) -> Weights:
        return self.policy.get_weights()

    def set_weights(self, weights: Weights) -> None:
        self.policy.set_weights(weights)


class ExplicitPolicy(Policy):
    """A policy whose action probabilities can be read off, so games small enough can be
    evaluated exactly and exported as tabular policies.

    :meth:`probabilities` is the policy's evaluation behaviour (a greedy learner returns
    one-hot rows); ``act`` samples it. Learners override ``act`` to explore when
    ``explore`` is true.
    """

    @abstractmethod
    def probabilities(self, batch: Observations) -> np.ndarray:
        """``[len(batch), n_actions]`` action probabilities, zero on illegal actions."""

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        return sample_rows(self.probabilities(batch), rng)


class MixedStrategyPolicy(ExplicitPolicy):
    """A fixed (pure or mixed) strategy of a normal-form game: one probability per action,
    whatever the observation, renormalised over the legal actions of each row. Its weights
    are ``{"probs": ...}``. An interface type rather than one env's own: the ``matrix``
    env's exact evaluation reads its probabilities directly, and any oracle answering a
    one-shot game (a builtin's, a plugin's) returns one.
    """

    def __init__(self, probs: np.ndarray) -> None:
        self.probs = np.asarray(probs, dtype=float)

    def probabilities(self, batch: Observations) -> np.ndarray:
        probs = np.broadcast_to(self.probs, (len(batch), self.probs.size))
        if batch.mask is None:
            return probs
        masked = probs * batch.mask
        return masked / masked.sum(axis=1, keepdims=True)

    def get_weights(self) -> Mapping[str, np.ndarray]:
        return {"probs": self.probs.copy()}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        self.probs = np.asarray(weights["probs"], dtype=float)


def sample_rows(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sample one column index per row of a row-stochastic matrix, vectorised."""
    cdf = np.cumsum(probs, axis=1)
    draws = rng.random((probs.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((draws >= cdf).sum(axis=1), probs.shape[1] - 1)


def masked_uniform(mask: np.ndarray | None, n_rows: int, n_actions: int) -> np.ndarray:
    """Uniform probabilities over the legal actions of each row."""
    legal = np.ones((n_rows, n_actions)) if mask is None else np.asarray(mask, dtype=float)
    return legal / legal.sum(axis=1, keepdims=True)


def epsilon_greedy(greedy: np.ndarray, mask: np.ndarray | None, n_actions: int, eps: float,
                   rng: np.random.Generator) -> np.ndarray:
    """``greedy`` (one action per row) with each row replaced, with probability ``eps``, by a
    uniformly random legal action (``mask``'s; every action where None)."""
    random = sample_rows(masked_uniform(mask, len(greedy), n_actions), rng)
    return np.where(rng.random(len(greedy)) < eps, random, greedy)
