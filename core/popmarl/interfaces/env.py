"""The Env adapter protocol: agents, spaces, batched stepping, and optional exact hooks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
import numpy as np

from popmarl.errors import UserError
from popmarl.interfaces.component import Component
from popmarl.interfaces.policy import Policy
from popmarl.data.episodes import Observations
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.interfaces.spaces import Space

Profile = Mapping[str, Policy]  # one policy per agent
MixedProfile = Mapping[str, Sequence[tuple[Policy, float]]]  # a mixture of policies per agent
#: A correlated distribution over joint profiles (JPSRO's opponents): (profile, probability)
#: pairs, each profile one policy per agent; a responder's own seats may be left out.
CorrelatedProfile = Sequence[tuple[Profile, float]]


def mixed_profile(meta: MetaStrategy, policy_of: Callable[[str], Policy]) -> MixedProfile:
    """The live form of ``meta``'s seats drawn alone (outside its joint): per seat, its
    policies (``policy_of`` their ids) with positive weight and those weights."""
    return {agent: [(policy_of(pid), p) for pid, p in meta.support(agent)] for agent in meta.alone}


def correlated_profile(meta: MetaStrategy, policy_of: Callable[[str], Policy]) -> CorrelatedProfile | None:
    """The live form of ``meta``'s joint distribution (None without one): its profiles with
    positive probability, as live policies per joint seat."""
    if not meta.joint_agents:
        return None
    return [({a: policy_of(pid) for a, pid in zip(meta.joint_agents, profile, strict=True)}, p)
            for profile, p in meta.joint_support()]


@attrs.frozen(kw_only=True)
class Step:
    """What a vector of games needs next, and what finished.

    ``decisions`` maps each agent that must act to its batch (``env_ids`` says which
    games the rows belong to). ``finished`` lists the games whose episode ended since the
    last call, with every agent's episode return (env agent order) in ``returns``; those
    games have already been reset and their first decisions are in ``decisions``.
    ``rewards`` is ``[num_envs, n_agents]``: reward received since the last call.
    ``truncated`` flags the finished games that were cut off (e.g. by a time limit)
    rather than ended; for those, ``final`` gives each agent still in play at the cut
    its observation then (env ids and a batch per agent, as in ``decisions``), which
    learners bootstrap from (its mask may allow no action: the agent need not be the one
    to move). An agent of a finished game missing from ``final`` ended its episode by
    termination.

    Global state (only after :meth:`VectorEnv.record_state` returned True): ``state`` is
    ``[num_envs, *state_space.shape]``, each game's state now (a game just reset: its new
    episode's first state; a game left finished: zeros), and ``final_state`` gives, for
    each finished game (rows aligned with ``finished``), its state when it ended or was
    cut off. None otherwise.
    """

    decisions: Mapping[str, tuple[np.ndarray, Observations]]
    rewards: np.ndarray
    finished: np.ndarray
    returns: np.ndarray
    truncated: np.ndarray
    final: Mapping[str, tuple[np.ndarray, Observations]] = attrs.field(factory=dict)
    state: np.ndarray | None = None
    final_state: np.ndarray | None = None


class VectorEnv(ABC):
    """``num_envs`` independent games stepped together; episodes restart automatically."""

    num_envs: int

    @abstractmethod
    def reset(self) -> Step:
        """Start every game anew."""

    @abstractmethod
    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        """Apply each agent's actions (aligned with the rows it was asked for)."""

    def stop_restarts(self) -> bool:
        """From now on, leave games that finish finished: each is reported in
        ``finished`` once and asks for no more decisions (until :meth:`reset`). The
        rollout engine calls it once no more episodes will start, so the games it has
        done with are not stepped. Returns whether the vector does this; one that
        does not (the default) keeps restarting them, and the engine plays those games
        out with throwaway moves."""
        return False

    def record_state(self) -> bool:
        """From the next :meth:`reset` on, fill ``Step.state`` and ``Step.final_state``
        with the global state (:attr:`Env.state_space`). The rollout engine calls it only
        when a learner reads the state (a joint view), so play that does not pays nothing
        for it. Returns whether the vector does this (the default: no state, False)."""
        return False

    def close(self) -> None:
        """Release resources."""


class Env(Component):
    """A game definition (one per run); makes vectors of games to step."""

    @property
    @abstractmethod
    def agents(self) -> tuple[str, ...]:
        """The agents (seats), in payoff-table order."""

    @abstractmethod
    def observation_space(self, agent: str) -> Space:
        """The space of ``agent``'s observations."""

    @abstractmethod
    def action_space(self, agent: str) -> Space:
        """The space of ``agent``'s actions."""

    @abstractmethod
    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        """A vector of ``num_envs`` games seeded with ``seed``."""

    #: The space of the game's global state (what a centralized critic or a mixer reads),
    #: or None where the env has none. An env that declares one returns the state from
    #: its vectors once asked (:meth:`VectorEnv.record_state`).
    state_space: Space | None = None

    #: Whether the game is two-player zero-sum (then exploitability = NashConv / 2).
    zero_sum: bool = False

    #: Whether chance takes part in play (dealt cards, dice, random starts). A ``psro``
    #: best response then gets no opponent exploration unless ``training`` sets one:
    #: chance already spreads play over the game's positions, and random opponent moves
    #: only bias the answer (on Kuhn and Leduc poker they slow PSRO down). Envs that cannot tell
    #: leave it False, the deterministic board game's setting.
    has_chance: bool = False

    #: Whether the seats move at once (a simultaneous-move game, as OpenSpiel declares)
    #: rather than in turn. Envs that cannot tell leave it False: random play then shows
    #: it where two seats of a game are asked at once (:mod:`popmarl.interfaces.env_traits`).
    simultaneous: bool = False

    def export_policy(self, profile: MixedProfile, directory: Path) -> list[str]:
        """Write env-specific files describing the final meta-strategy (e.g. OpenSpiel's
        ``final_policy.json``) into the run directory; return their names. Envs with no
        such format write nothing."""
        return []

    def observe(self, agent: str, observation: object, action_mask: np.ndarray | None = None) -> Observations:
        """``agent``'s native ``observation`` (what the game itself gives: a PettingZoo
        observation, a pyspiel state) as the one-row batch its policies read in this env's
        vectors, with ``action_mask`` where the observation holds none; how a loaded run
        acts outside popmarl (:class:`popmarl.tools.actor.Actor`). Envs that cannot say so raise."""
        raise UserError(f"env {type(self).__name__} cannot read native observations (it implements no Env.observe), "
                        "so a loaded run cannot act in it; the openspiel, pettingzoo and matrix envs can")


class ExactEnv(Env):
    """A game small enough to evaluate exactly (no sampling noise)."""

    def supports_exact(self) -> bool:
        """Whether exact evaluation is possible (e.g. the game tree is below a size limit)."""
        return True

    @abstractmethod
    def exact_returns(self, profiles: Sequence[Profile]) -> np.ndarray:
        """``[len(profiles), n_agents]`` expected returns of each joint profile."""

    def exact_outcomes(self, profiles: Sequence[Profile]) -> np.ndarray | None:
        """``[len(profiles), 3, n_agents]``: each seat's probability of winning, drawing
        and losing (:mod:`popmarl.data.outcomes`) under each joint profile, or None where the
        env cannot compute them (evaluation then counts them over sampled games)."""
        return None

    @abstractmethod
    def nash_conv(self, profile: MixedProfile) -> float:
        """NashConv of the behaviour equivalent to each agent's mixture of policies."""

    def correlated_best_response_value(self, agent: str, profiles: CorrelatedProfile) -> float | None:
        """``agent``'s best-response value when the other agents' policies are drawn
        together from ``profiles`` (its own entries are ignored), or None where the env
        cannot compute it. PSRO reports a joint meta-strategy's CCE and CE gaps from it."""
        return None
