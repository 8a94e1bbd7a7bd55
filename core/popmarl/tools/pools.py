"""What a seat of a loaded run plays: its policies and its meta-strategy over them.

A :class:`Pool` is one seat's (``popmarl eval``, ``popmarl rank`` and an
:class:`~popmarl.tools.actor.Actor` play it): the run's meta-strategy over policy ids
(:class:`~popmarl.data.meta_strategy.MetaStrategy`: every seat's mixture, and a joint one's
profiles, drawn together) and the live policies it names.
:func:`popmarl.tools.loaded_run.load_run` builds them from a run directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from popmarl.data.meta_strategy import MetaStrategy
from popmarl.interfaces.algorithm import PolicySpace
from popmarl.interfaces.policy import Policy


@attrs.frozen(kw_only=True)
class Pool:
    """What ``seat`` plays: ``meta``, the side's meta-strategy (this seat's mixture among
    the others', and the joint meta-strategy over several seats where the run has one: the
    seat's mixture is then its marginal), and the live policies it names (``live``, by
    id). ``space`` and ``algorithm`` (registered name and params) of the seat's population
    rebuild its policies in a backend's workers."""

    seat: str
    meta: MetaStrategy
    live: Mapping[str, Policy]
    space: PolicySpace
    algorithm: tuple[str, Mapping[str, Any]]

    def __attrs_post_init__(self) -> None:
        missing = sorted(set(self.meta.named()) - set(self.live))
        if self.seat not in self.meta.agents or missing:
            raise ValueError(f"Pool: seat {self.seat} must be a seat of its meta-strategy, whose policies "
                             f"must all be live (missing: {', '.join(missing) or 'none'})")

    @property
    def policy_ids(self) -> tuple[str, ...]:
        """The seat's policies with positive weight."""
        return tuple(pid for pid, _ in self.meta.support(self.seat))

    @property
    def policies(self) -> tuple[Policy, ...]:
        """The live policies of :attr:`policy_ids`, aligned."""
        return tuple(self.live[pid] for pid in self.policy_ids)

    @property
    def mixture(self) -> np.ndarray:
        """The seat's probabilities of :attr:`policy_ids` (normalised)."""
        weights = np.asarray([w for _, w in self.meta.support(self.seat)])
        return weights / weights.sum()

    @property
    def has_joint(self) -> bool:
        """Whether the side has a joint meta-strategy (eval draws its seats together)."""
        return bool(self.meta.joint_agents)

    def draw(self, rng: np.random.Generator) -> Policy:
        """A policy for the seat, drawn from its mixture."""
        return self.live[self.draw_id(rng)]

    def draw_id(self, rng: np.random.Generator) -> str:
        """The id of a policy drawn from the seat's mixture."""
        return self.meta.draw_one(self.seat, rng)

    def renamed(self, prefix: str) -> Pool:
        """The pool with its population (and policy ids) prefixed, to play beside another
        run's populations of the same names."""
        space = attrs.evolve(self.space, population=prefix + self.space.population)
        return attrs.evolve(self, space=space, meta=self.meta.renamed(prefix),
                            live={prefix + pid: policy for pid, policy in self.live.items()})


def side_meta(pools: Mapping[str, Pool]) -> MetaStrategy:
    """The meta-strategy of the seats ``pools`` play (keyed by seat): one pool's where it
    has a joint (the joint's seats drawn together), else each seat's own mixture."""
    joint = next((pool.meta for pool in pools.values() if pool.has_joint), None)
    alone = [pool.meta.for_seats((seat,)).marginals() for seat, pool in pools.items()
             if joint is None or seat not in joint.joint_agents]
    if joint is None:
        return MetaStrategy.merged(*alone)
    return MetaStrategy.merged(joint.for_seats(joint.joint_agents), *alone)


def draw_profile(pools: Mapping[str, Pool], agents: tuple[str, ...], rng: np.random.Generator) -> dict[str, Policy]:
    """One policy per agent: the seats of a joint meta-strategy drawn together, the others
    each from its own mixture."""
    drawn = side_meta({a: pools[a] for a in agents}).draw(rng)
    return {a: pools[a].live[drawn[a]] for a in agents}
