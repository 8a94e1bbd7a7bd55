"""Exact evaluation of a game small enough to enumerate: payoffs, win / draw / loss
probabilities, mixtures, best responses, NashConv.

Holds the flattened tree and its sequence form, and caches each policy's behaviour
table and realization plan per player (policies in a population are frozen; a
:class:`~popmarl_openspiel.tabular.TabularPolicy` that is reloaded bumps its
``version``, which invalidates its entries).
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from popmarl.api import ConfigError, CorrelatedProfile, MixedProfile, Policy, Profile, outcome_indicators
from popmarl_openspiel.aggregate import mixture_plan, policy_table
from popmarl_openspiel.exploitability import Implementation, SpielOracle
from popmarl_openspiel.game import SpielGame
from popmarl_openspiel.sequence_form import SequenceForm, behaviour, realization_plan
from popmarl_openspiel.sequence_form import best_response as sequence_best_response
from popmarl_openspiel.tree import GameTree

#: Correlated best responses remembered (as :data:`popmarl_openspiel.exploitability._MEMO`).
_CORRELATED_MEMO = 64


class ExactGame:
    """Exact payoffs, aggregated mixtures, best responses and NashConv of one game."""

    def __init__(self, spiel: SpielGame, tree: GameTree) -> None:
        self.spiel = spiel
        self.tree = tree
        self.form = SequenceForm(tree)
        self.oracle = SpielOracle(spiel, tree)
        self.agents = tuple(spiel.agent(p) for p in range(spiel.num_players))
        self._outcome_forms: tuple[SequenceForm, ...] | None = None
        self._correlated: OrderedDict[bytes, tuple[np.ndarray, float]] = OrderedDict()
        self._cache: weakref.WeakKeyDictionary[Policy, dict[int, tuple[Any, np.ndarray, np.ndarray]]] = (
            weakref.WeakKeyDictionary())

    # -- one policy -------------------------------------------------------------------
    def _entry(self, policy: Policy, player: int) -> tuple[np.ndarray, np.ndarray]:
        version = getattr(policy, "version", None)
        try:
            per_player = self._cache.setdefault(policy, {})
        except TypeError:  # not weak-referenceable / hashable: no caching
            per_player = {}
        hit = per_player.get(player)
        if hit is not None and hit[0] == version:
            return hit[1], hit[2]
        infostates = self.tree.players[player]
        table = policy_table(policy, infostates, self.agents[player], self.tree.num_actions)
        plan = realization_plan(table, infostates, self.tree.num_actions)
        per_player[player] = (version, table, plan)
        return table, plan

    def table(self, policy: Policy, player: int) -> np.ndarray:
        """``[n_info_states, A]``: ``policy``'s behaviour at ``player``'s information states."""
        return self._entry(policy, player)[0]

    def plan(self, policy: Policy, player: int) -> np.ndarray:
        """``policy``'s realization plan as ``player``."""
        return self._entry(policy, player)[1]

    # -- payoffs ------------------------------------------------------------------------
    def returns(self, profiles: Sequence[Profile]) -> np.ndarray:
        """``[B, n]`` expected returns of joint profiles (chance included), each distinct
        policy's plan computed once and all entries in one product per player."""
        if not profiles:
            return np.zeros((0, len(self.agents)))
        return self.form.returns(*self._profile_plans(profiles))

    def outcomes(self, profiles: Sequence[Profile]) -> np.ndarray:
        """``[B, 3, n]``: each seat's probability of winning, drawing and losing
        (:mod:`popmarl.data.outcomes`) under joint profiles — expected returns with each
        terminal's utility replaced by its outcome indicator, in the same products as
        :meth:`returns`. Draws are what wins and losses leave; with two seats one seat's
        win is the other's loss, so one form gives everything."""
        n = len(self.agents)
        if not profiles or n < 2:  # one seat: every game is a draw
            return np.broadcast_to(np.array([0.0, 1.0, 0.0])[:, None], (len(profiles), 3, n)).copy()
        plans, index = self._profile_plans(profiles)
        if n == 2:
            won, lost = self._outcome_sequence_forms()[0].returns(plans, index).T  # seat 0's win and loss
            win, loss = np.stack([won, lost], axis=1), np.stack([lost, won], axis=1)
        else:
            win, loss = (form.returns(plans, index) for form in self._outcome_sequence_forms())
        draw = np.maximum(1.0 - win - loss, 0.0)  # no negative rounding residue where draws are impossible
        return np.stack([win, draw, loss], axis=1)

    def _outcome_sequence_forms(self) -> tuple[SequenceForm, ...]:
        """The sequence forms weighing each terminal by outcome indicators instead of
        utilities (built on first use): two seats, one form of seat 0's (win, loss);
        more, one form of every seat's wins and one of its losses."""
        if self._outcome_forms is None:
            win, _, loss = outcome_indicators(self.tree.terminal_utility)  # each [Z, n]
            columns = [np.stack([win[:, 0], loss[:, 0]], axis=1)] if len(self.agents) == 2 else [win, loss]
            self._outcome_forms = tuple(SequenceForm(attrs.evolve(self.tree, terminal_utility=utility))
                                        for utility in columns)
        return self._outcome_forms

    def _profile_plans(self, profiles: Sequence[Profile]) -> tuple[list[np.ndarray], np.ndarray]:
        """Each player's distinct plans as columns ``[S_p, m_p]`` (a policy's plan computed
        once, however many profiles it plays in) and ``[B, n]`` the column each profile
        takes per player: the input of :meth:`SequenceForm.returns`."""
        n = len(self.agents)
        columns: list[dict[int, int]] = [{} for _ in range(n)]
        plans: list[list[np.ndarray]] = [[] for _ in range(n)]
        index = np.zeros((len(profiles), n), dtype=np.int64)
        for b, profile in enumerate(profiles):
            for p, agent in enumerate(self.agents):
                policy = profile[agent]
                col = columns[p].get(id(policy))
                if col is None:
                    col = columns[p][id(policy)] = len(plans[p])
                    plans[p].append(self.plan(policy, p))
                index[b, p] = col
        return [np.stack(cols, axis=1) for cols in plans], index

    # -- mixtures -----------------------------------------------------------------------
    def mixture_plan(self, mixture: Sequence[tuple[Policy, float]], player: int) -> np.ndarray:
        """The realization plan of ``player`` playing the mixture."""
        return mixture_plan([self.plan(policy, player) for policy, _ in mixture], [w for _, w in mixture])

    def aggregate(self, mixture: Sequence[tuple[Policy, float]], player: int) -> np.ndarray:
        """The behaviour table equivalent to ``player`` playing the mixture (PolicyAggregator)."""
        return behaviour(self.mixture_plan(mixture, player), self.tree.players[player], self.tree.num_actions)

    def aggregate_profile(self, profile: MixedProfile) -> dict[int, np.ndarray]:
        """Every player's aggregated behaviour table."""
        return {p: self.aggregate(profile[agent], p) for p, agent in enumerate(self.agents)}

    def best_response(self, player: int, opponents: Mapping[str, Sequence[tuple[Policy, float]]], *,
                      implementation: Implementation = "auto") -> tuple[np.ndarray, float]:
        """``player``'s deterministic best response ``[n_info_states, A]`` (one-hot) to the
        other seats' aggregated mixtures, and its value: in the sequence form (``auto``,
        ``sequence``), or by OpenSpiel's responders (``cpp``, ``python``)."""
        if implementation in ("auto", "sequence"):
            plans = [self.mixture_plan(opponents[agent], p) if p != player else None
                     for p, agent in enumerate(self.agents)]
            actions, value = self._sequence_best_response(player, plans)
        else:
            tables = {p: self.aggregate(opponents[agent], p) for p, agent in enumerate(self.agents) if p != player}
            actions, value = self.oracle.best_response(player, tables, implementation=implementation)
        return np.eye(self.tree.num_actions)[actions], value

    def _sequence_best_response(self, player: int, plans: Sequence[np.ndarray | None]) -> tuple[np.ndarray, float]:
        """``player``'s best response to the others' realization plans (``plans[player]``
        unused): terminal histories weighted by chance and the others' reach. The same
        values as OpenSpiel's C++ responder, much faster (on 3-player Leduc, milliseconds
        against seconds)."""
        return sequence_best_response(self.tree, player, self.tree.terminal_chance * self._others_reach(player, plans))

    def _others_reach(self, player: int, plans: Sequence[np.ndarray | None]) -> np.ndarray:
        """``[Z]``: the probability that the players other than ``player`` play to each
        terminal history, by their realization plans (``plans[player]`` unused)."""
        reach = np.ones(self.tree.terminal_seq.shape[0])
        for p, plan in enumerate(plans):
            if p != player and plan is not None:
                reach *= plan[self.tree.terminal_seq[:, p]]
        return reach

    def correlated_best_response(self, player: int, profiles: CorrelatedProfile) -> tuple[np.ndarray, float]:
        """``player``'s deterministic best response ``[n_info_states, A]`` (one-hot) to the
        other players' policies drawn together from ``profiles`` (a correlation device),
        and its value — what OpenSpiel's ``cce_dist`` gives ``jpsro.py``, in the sequence
        form: each terminal history weighted by chance and the device's mixture of the
        others' reach (``cce_dist`` ran out of memory on 3-player Leduc)."""
        if self.spiel.simultaneous:
            raise ConfigError(f"openspiel: correlated best responses need a turn-based game; {self.spiel.name} "
                              "has simultaneous moves")
        device = [([self.plan(profile[agent], p) if p != player else None for p, agent in enumerate(self.agents)],
                   float(q)) for profile, q in profiles]
        digest = hashlib.sha1(repr(player).encode())
        for plans, q in device:
            digest.update(repr(q).encode())
            for plan in plans:
                if plan is not None:
                    digest.update(np.ascontiguousarray(plan).tobytes())
        key = digest.digest()
        if key in self._correlated:  # PSRO asks twice: the gap after a solve, the oracle next iteration
            self._correlated.move_to_end(key)
            return self._correlated[key]
        reach = sum(q * self._others_reach(player, plans) for plans, q in device)
        actions, value = sequence_best_response(self.tree, player, reach * self.tree.terminal_chance)
        self._correlated[key] = (np.eye(self.tree.num_actions)[actions], value)
        if len(self._correlated) > _CORRELATED_MEMO:
            self._correlated.popitem(last=False)
        return self._correlated[key]

    def nash_conv(self, profile: MixedProfile, *, implementation: Implementation = "auto") -> float:
        """NashConv of the aggregated profile as OpenSpiel's ``exploitability.nash_conv``
        defines it: each player's best-response value minus its on-policy value, summed
        (best responses as :meth:`best_response` computes them)."""
        plans = [self.mixture_plan(profile[agent], p) for p, agent in enumerate(self.agents)]
        on_policy = self.form.returns([plan[:, None] for plan in plans], np.zeros((1, len(self.agents)), dtype=np.int64))[0]
        if implementation in ("auto", "sequence"):
            values = [self._sequence_best_response(p, plans)[1] for p in range(len(self.agents))]
        else:
            tables = self.aggregate_profile(profile)
            values = [self.oracle.best_response(p, tables, implementation=implementation)[1]
                      for p in range(len(self.agents))]
        return float(sum(value - on_policy[p] for p, value in enumerate(values)))
