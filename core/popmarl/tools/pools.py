"""What a seat of a loaded run plays: its policies and its meta-strategy over them.

A :class:`Pool` is one seat's (``popmarl eval``, ``popmarl rank`` and an
:class:`~popmarl.tools.actor.Actor` play it); a :class:`JointPool` is a joint
meta-strategy's profiles, drawn together. :func:`popmarl.tools.loaded_run.load_run`
builds them from a run directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from popmarl.interfaces.algorithm import PolicySpace
from popmarl.interfaces.policy import Policy


@attrs.frozen(kw_only=True)
class JointPool:
    """A joint meta-strategy: profiles (one policy per seat of ``agents``, named by
    ``policy_ids``) drawn together."""

    agents: tuple[str, ...]
    profiles: tuple[tuple[Policy, ...], ...]
    probabilities: np.ndarray
    policy_ids: tuple[tuple[str, ...], ...] = ()

    def draw(self, rng: np.random.Generator) -> dict[str, Policy]:
        return dict(zip(self.agents, self.profiles[int(rng.choice(len(self.profiles), p=self.probabilities))]))


@attrs.frozen(kw_only=True)
class Pool:
    """The policies a seat plays and its meta-strategy over them (its support only);
    ``joint``: the run's joint meta-strategy, when it has one (``mixture`` is then this
    seat's marginal). ``space`` and ``algorithm`` (registered name and params) rebuild the
    policies, named ``policy_ids``, in a backend's workers."""

    policies: tuple[Policy, ...]
    mixture: np.ndarray
    policy_ids: tuple[str, ...]
    space: PolicySpace
    algorithm: tuple[str, Mapping[str, Any]]
    joint: JointPool | None = None

    def draw(self, rng: np.random.Generator) -> Policy:
        return self.policies[self.draw_index(rng)]

    def draw_index(self, rng: np.random.Generator) -> int:
        """The index (into ``policies``) of a policy drawn from the mixture."""
        return int(rng.choice(len(self.policies), p=self.mixture))

    def renamed(self, prefix: str) -> Pool:
        """The pool with its population (and policy ids) prefixed, to play beside another
        run's populations of the same names."""
        space = attrs.evolve(self.space, population=prefix + self.space.population)
        return attrs.evolve(self, space=space, policy_ids=tuple(prefix + pid for pid in self.policy_ids),
                            joint=None if self.joint is None else attrs.evolve(
                                self.joint, policy_ids=tuple(tuple(prefix + pid for pid in profile)
                                                             for profile in self.joint.policy_ids)))
