"""A meta-strategy over policy ids: how some seats are played, each by a policy drawn
once per episode.

One record stands for every form: per seat, a mixture over its policy ids (seats drawn
independently), and optionally a joint distribution over the profiles of several of
those seats (a correlated meta-strategy: JPSRO's CE / CCE, drawn together), stored
sparse as profiles and their probabilities. A seat of the joint keeps its marginal as its
mixture, so every seat can also be played alone (an actor, a seat evaluated on its own).

Tasks (train, best-response, evaluation), ``popmarl exploit`` and a loaded run's pools
all hold one; the engine turns it into live draws
(:meth:`popmarl.engine.seating.OpponentDraw.of`) and an exact env reads it as live
policies (:func:`popmarl.interfaces.env.mixed_profile`). Probabilities are kept as given
(not normalised): whoever draws normalises the support, so that draws stay those the
same numbers always gave.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs
import numpy as np
from numpy.typing import ArrayLike


def _empty() -> np.ndarray:
    return np.zeros(0)


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(names)


def _ids(ids: Iterable[Iterable[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(each) for each in ids)


def _arrays(weights: Iterable[ArrayLike]) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(w, dtype=float) for w in weights)


def _array(weights: ArrayLike) -> np.ndarray:
    return np.asarray(weights, dtype=float)


@attrs.frozen(kw_only=True, eq=False)
class MetaStrategy:
    """Per seat of ``agents``, its policy ids (``policy_ids``) and mixture over them
    (``mixtures``, aligned); the seats ``joint_agents`` (some of ``agents``) are drawn
    together from ``profiles`` (one policy id per joint seat) with ``probabilities``,
    their mixtures being the joint's marginals. Empty (no seats) by default."""

    agents: tuple[str, ...] = attrs.field(default=(), converter=_names)
    policy_ids: tuple[tuple[str, ...], ...] = attrs.field(default=(), converter=_ids)
    mixtures: tuple[np.ndarray, ...] = attrs.field(default=(), converter=_arrays)
    joint_agents: tuple[str, ...] = attrs.field(default=(), converter=_names)
    profiles: tuple[tuple[str, ...], ...] = attrs.field(default=(), converter=_ids)
    probabilities: np.ndarray = attrs.field(factory=_empty, converter=_array)

    def __attrs_post_init__(self) -> None:
        if len(set(self.agents)) != len(self.agents):
            raise ValueError(f"MetaStrategy: seats must differ, got {', '.join(self.agents)}")
        if not len(self.policy_ids) == len(self.mixtures) == len(self.agents):
            raise ValueError("MetaStrategy: needs one tuple of policy ids and one mixture per seat")
        for agent, ids, mixture in zip(self.agents, self.policy_ids, self.mixtures):
            _check_weights(mixture, len(ids), f"seat {agent}'s mixture", "policy id")
        if not set(self.joint_agents) <= set(self.agents) or len(set(self.joint_agents)) != len(self.joint_agents):
            raise ValueError(f"MetaStrategy: joint seats {', '.join(self.joint_agents)} must be distinct seats of "
                             f"{', '.join(self.agents)}")
        if not self.joint_agents:
            if self.profiles or len(self.probabilities):
                raise ValueError("MetaStrategy: profiles without joint seats")
            return
        if not self.profiles or any(len(profile) != len(self.joint_agents) for profile in self.profiles):
            raise ValueError(f"MetaStrategy: every profile names one policy per joint seat of {self.joint_agents}")
        _check_weights(self.probabilities, len(self.profiles), "the joint's probabilities", "profile")
        for k, agent in enumerate(self.joint_agents):
            known = set(self.policy_ids[self.agents.index(agent)])
            outside = sorted({profile[k] for profile in self.profiles} - known)
            if outside:
                raise ValueError(f"MetaStrategy: the joint names {', '.join(outside)} for seat {agent}, "
                                 "outside its mixture")

    @classmethod
    def independent(cls, mixtures: Mapping[str, tuple[Sequence[str], ArrayLike]]) -> MetaStrategy:
        """Each seat drawn alone from its (policy ids, weights)."""
        return cls(agents=tuple(mixtures), policy_ids=tuple(tuple(ids) for ids, _ in mixtures.values()),
                   mixtures=tuple(np.asarray(w, dtype=float) for _, w in mixtures.values()))

    @classmethod
    def pure(cls, profile: Mapping[str, str]) -> MetaStrategy:
        """Each seat played by one policy id."""
        return cls.independent({agent: ((pid,), np.ones(1)) for agent, pid in profile.items()})

    @classmethod
    def correlated(cls, agents: Sequence[str], profiles: Iterable[Sequence[str]],
                   probabilities: ArrayLike) -> MetaStrategy:
        """The seats ``agents`` drawn together from ``profiles`` with ``probabilities``;
        each seat's mixture is the joint's marginal (its ids in order of first appearance)."""
        profiles = tuple(tuple(profile) for profile in profiles)
        p = np.asarray(probabilities, dtype=float)
        marginals: list[dict[str, float]] = [{} for _ in agents]
        if len(p) == len(profiles):
            for profile, weight in zip(profiles, p):
                for marginal, pid in zip(marginals, profile):
                    marginal[pid] = marginal.get(pid, 0.0) + float(weight)
        return cls(agents=tuple(agents), policy_ids=tuple(tuple(m) for m in marginals),
                   mixtures=tuple(np.asarray(list(m.values()), dtype=float) for m in marginals),
                   joint_agents=tuple(agents), profiles=profiles, probabilities=p)

    @classmethod
    def merged(cls, *parts: MetaStrategy) -> MetaStrategy:
        """The seats of every part together (no seat in two parts; one part's joint at most)."""
        joints = [part for part in parts if part.joint_agents]
        if len(joints) > 1:
            raise ValueError("MetaStrategy: cannot merge two joint distributions")
        joint = joints[0] if joints else cls()
        return cls(agents=tuple(a for part in parts for a in part.agents),
                   policy_ids=tuple(ids for part in parts for ids in part.policy_ids),
                   mixtures=tuple(m for part in parts for m in part.mixtures),
                   joint_agents=joint.joint_agents, profiles=joint.profiles, probabilities=joint.probabilities)

    @property
    def alone(self) -> tuple[str, ...]:
        """The seats drawn alone (outside the joint), in ``agents`` order."""
        return tuple(a for a in self.agents if a not in self.joint_agents)

    def support(self, agent: str) -> list[tuple[str, float]]:
        """``agent``'s (policy id, weight) pairs with positive weight (its marginal, for a joint seat)."""
        k = self._index(agent)
        return [(pid, float(w)) for pid, w in zip(self.policy_ids[k], self.mixtures[k]) if w > 0]

    def joint_support(self) -> list[tuple[tuple[str, ...], float]]:
        """The joint's (profile, probability) pairs with positive probability (none without a joint)."""
        return [(profile, float(p)) for profile, p in zip(self.profiles, self.probabilities) if p > 0]

    def named(self) -> list[str]:
        """Every policy id with positive weight, each once, sorted."""
        return sorted({pid for agent in self.agents for pid, _ in self.support(agent)})

    def draw(self, rng: np.random.Generator) -> dict[str, str]:
        """One policy id per seat: the joint's profile first (one draw), then each seat drawn
        alone, in ``agents`` order (one draw each)."""
        drawn: dict[str, str] = {}
        if self.joint_agents:
            support = self.joint_support()
            p = np.asarray([w for _, w in support])
            drawn.update(zip(self.joint_agents, support[int(rng.choice(len(support), p=p / p.sum()))][0]))
        for agent in self.alone:
            drawn[agent] = self.draw_one(agent, rng)
        return drawn

    def draw_one(self, agent: str, rng: np.random.Generator) -> str:
        """A policy id for ``agent`` alone, from its mixture (its marginal, for a joint seat)."""
        support = self.support(agent)
        p = np.asarray([w for _, w in support])
        return support[int(rng.choice(len(support), p=p / p.sum()))][0]

    def for_seats(self, agents: Iterable[str]) -> MetaStrategy:
        """The sub-strategy of ``agents`` (some of this one's, kept in this one's order):
        their mixtures, and the joint marginalised onto its seats among them (profiles that
        coincide there stay separate entries, so that draws are those of the whole joint)."""
        wanted = set(agents)
        missing = sorted(wanted - set(self.agents))
        if missing:
            raise ValueError(f"MetaStrategy: no seat {', '.join(missing)} (it has {', '.join(self.agents)})")
        keep = [k for k, a in enumerate(self.agents) if a in wanted]
        joint_keep = [k for k, a in enumerate(self.joint_agents) if a in wanted]
        return MetaStrategy(
            agents=tuple(self.agents[k] for k in keep), policy_ids=tuple(self.policy_ids[k] for k in keep),
            mixtures=tuple(self.mixtures[k] for k in keep),
            joint_agents=tuple(self.joint_agents[k] for k in joint_keep),
            profiles=tuple(tuple(profile[k] for k in joint_keep) for profile in self.profiles) if joint_keep else (),
            probabilities=self.probabilities if joint_keep else _empty())

    def without(self, agent: str) -> MetaStrategy:
        """The sub-strategy of every seat but ``agent``."""
        return self.for_seats(a for a in self.agents if a != agent)

    def marginals(self) -> MetaStrategy:
        """The same seats, each drawn alone from its mixture (the joint dropped)."""
        return MetaStrategy(agents=self.agents, policy_ids=self.policy_ids, mixtures=self.mixtures)

    def renamed(self, prefix: str) -> MetaStrategy:
        """Every policy id prefixed with ``prefix``."""
        return attrs.evolve(self, policy_ids=tuple(tuple(prefix + pid for pid in ids) for ids in self.policy_ids),
                            profiles=tuple(tuple(prefix + pid for pid in profile) for profile in self.profiles))

    def _index(self, agent: str) -> int:
        if agent not in self.agents:
            raise ValueError(f"MetaStrategy: no seat {agent} (it has {', '.join(self.agents) or 'none'})")
        return self.agents.index(agent)


def _check_weights(weights: np.ndarray, size: int, what: str, per: str) -> None:
    w = np.asarray(weights, dtype=float)
    if w.shape != (size,) or not np.all(np.isfinite(w)) or not np.all(w >= 0) or not w.sum() > 0:
        raise ValueError(f"MetaStrategy: {what} must be one non-negative number per {per} ({size}), "
                         f"with a positive sum, got {np.asarray(weights).tolist()}")
