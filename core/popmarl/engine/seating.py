"""Who plays which seat: a learner's seating, the opponents drawn once per episode, and
the table of which policy plays each agent in each game slot of a vector of games.

The table stores policies as integer codes per agent and slot, so that the rollout
engine groups the rows of a decision by policy with a few numpy calls.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence

import attrs
import numpy as np

from popmarl.data.meta_strategy import MetaStrategy
from popmarl.interfaces.policy import ActingAlone, Policy

#: The code of an idle slot (no more episodes to play) in a :class:`SeatTable`.
IDLE = -1


class SeatTable:
    """Which policy (an index into ``policies``) plays each agent in each game slot."""

    def __init__(self, agents: Sequence[str], num_envs: int) -> None:
        self.policies: list[Policy] = []
        #: Each policy's ``group_key`` (read once, when it is first seated).
        self.keys: list[Hashable | None] = []
        self._index_of: dict[int, int] = {}
        self.code = {a: np.full(num_envs, IDLE, dtype=np.int64) for a in agents}
        self.busy = np.zeros(num_envs, dtype=bool)
        self._profile: list[Mapping[str, Policy] | None] = [None] * num_envs

    def assign(self, slot: int, profile: Mapping[str, Policy] | None) -> None:
        if profile is self._profile[slot] and profile is not None:
            return  # the same profile again (evaluation, co-learning): the codes stand
        self._profile[slot] = profile
        self.busy[slot] = profile is not None
        for agent, codes in self.code.items():
            if profile is None:
                codes[slot] = IDLE
                continue
            policy = profile[agent]
            key = id(policy)
            if key not in self._index_of:
                self._index_of[key] = len(self.policies)
                self.policies.append(policy)
                self.keys.append(policy.group_key())
            codes[slot] = self._index_of[key]

    def policy_at(self, agent: str, slot: int) -> Policy | None:
        code = int(self.code[agent][slot])
        return None if code == IDLE else self.policies[code]

    def any_active(self) -> bool:
        return bool(self.busy.any())


class OpponentCopy(ActingAlone):
    """A learner's current policy in an opponent's seat (self-play). It shares the
    learner's weights, but is a distinct object, so the rollout engine treats it as an
    opponent: it acts without exploring and none of its transitions are kept."""


@attrs.frozen(kw_only=True)
class Seating:
    """A learner in play: its policy and the seats it plays (``one_seat``: one of them
    per episode, drawn uniformly; otherwise all of them); a team's other members play
    their seats with their own policies (``seat_policies``); ``name`` (its key) is what a
    joint view calls it, and ``joint`` whether it learns from the joint view."""

    policy: Policy
    seats: tuple[str, ...]
    one_seat: bool = False
    name: str = "learner"
    joint: bool = False
    seat_policies: Mapping[str, Policy] = attrs.field(factory=dict)

    def policy_at(self, seat: str) -> Policy:
        """The policy that plays ``seat``."""
        return self.seat_policies.get(seat, self.policy)

    @property
    def policies(self) -> tuple[Policy, ...]:
        """Every policy of the learner (a team's members), each once."""
        return tuple({id(p): p for p in (self.policy, *self.seat_policies.values())}.values())


class OpponentDraw:
    """Draws the opponents of one episode: each seat from its mixture of frozen
    policies, and the seats of a joint distribution together, as one profile. The live
    form of a :class:`~popmarl.data.meta_strategy.MetaStrategy` (:meth:`of`), with each
    mixture's cumulative probabilities computed once: a draw is one uniform number and a
    binary search per choice."""

    def __init__(self, seats: Mapping[str, tuple[Sequence[Policy], np.ndarray]],
                 joint: tuple[tuple[str, ...], Sequence[Sequence[Policy]], np.ndarray] | None = None) -> None:
        self.seats = seats
        self.joint = joint
        #: What a joint view calls each policy (by ``id``): its policy id, where known.
        self.names: dict[int, str] = {}
        # Cumulative probabilities: one uniform draw and a binary search per choice.
        self._cdf = {agent: _cdf(mixture) for agent, (_, mixture) in seats.items()}
        self._joint_cdf = None if joint is None else _cdf(joint[2])

    @classmethod
    def of(cls, meta: MetaStrategy, policy_of: Callable[[str], Policy]) -> OpponentDraw:
        """``meta``'s seats as live policies (``policy_of``) ready to draw from (their
        supports only): each seat drawn alone from its mixture, the joint's seats together."""
        names: dict[int, str] = {}

        def live(pid: str) -> Policy:
            policy = policy_of(pid)
            names[id(policy)] = pid
            return policy

        seats = {}
        for agent in meta.alone:
            support = meta.support(agent)
            probs = np.asarray([p for _, p in support], dtype=float)
            seats[agent] = ([live(pid) for pid, _ in support], probs / probs.sum())
        drawn_together = None
        if meta.joint_agents:
            profiles = meta.joint_support()
            probs = np.asarray([p for _, p in profiles], dtype=float)
            drawn_together = (meta.joint_agents, [[live(pid) for pid in prof] for prof, _ in profiles],
                              probs / probs.sum())
        draw = cls(seats, drawn_together)
        draw.names = names
        return draw

    def draw(self, rng: np.random.Generator, agents: Sequence[str]) -> dict[str, Policy]:
        """A policy for each of ``agents`` (in order; the joint profile first, if any)."""
        return self.profile(self.choose(rng, agents), agents)

    def choose(self, rng: np.random.Generator, agents: Sequence[str]) -> tuple[int, ...]:
        """What :meth:`draw` draws, as indices (the joint profile's, -1 without one, then
        each of ``agents``' policy, -1 where the joint profile seats it): :meth:`profile`
        turns them into policies."""
        joint = -1
        seated: tuple[str, ...] = ()
        if self.joint is not None:
            assert self._joint_cdf is not None
            joint = _choose(self._joint_cdf, rng)
            seated = self.joint[0]
        chosen = [joint]
        for agent in agents:
            if agent in seated:
                chosen.append(-1)
                continue
            if agent not in self.seats:
                raise ValueError(f"train task: no opponents for seat {agent} (give a mixture or a joint distribution)")
            chosen.append(_choose(self._cdf[agent], rng))
        return tuple(chosen)

    def profile(self, chosen: tuple[int, ...], agents: Sequence[str]) -> dict[str, Policy]:
        """The policies of ``agents`` that :meth:`choose` chose as ``chosen``."""
        drawn: dict[str, Policy] = {}
        if self.joint is not None:
            joint_agents, profiles, _ = self.joint
            drawn.update({a: p for a, p in zip(joint_agents, profiles[chosen[0]]) if a in agents})
        for agent, k in zip(agents, chosen[1:]):
            if k >= 0:
                drawn[agent] = self.seats[agent][0][k]
        return drawn


def _cdf(probabilities: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(np.asarray(probabilities, dtype=float))
    return cdf / cdf[-1]


def _choose(cdf: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn with the probabilities whose cumulative sums are ``cdf`` (one
    with a single entry takes no draw)."""
    if len(cdf) == 1:
        return 0
    return min(int(cdf.searchsorted(rng.random(), side="right")), len(cdf) - 1)


def policy_name(policy: Policy | None, names: Mapping[int, str] | None) -> str:
    """The name a joint view gives ``policy`` (an unnamed one: its class)."""
    if policy is None:
        return ""
    if names is not None and id(policy) in names:
        return names[id(policy)]
    return type(policy).__name__
