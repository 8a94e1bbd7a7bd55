"""Env ``openspiel``: any pyspiel game, batched, with exact evaluation where it is small.

Turn-based and simultaneous-move games, chance, two or more players, any utility.
Agents are ``player_0 .. player_{n-1}``; observations are the information-state (or
observation) tensors, with legal-action masks and the tabular keys OpenSpiel's policies
use. Games up to ``exact_limit`` histories are evaluated exactly: payoff entries and
win / draw / loss probabilities in sequence form, NashConv by OpenSpiel, and
``final_policy.json`` written at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pyspiel

from popmarl.api import Box, ConfigError, CorrelatedProfile, Discrete, ExactEnv, MixedProfile, Observations, Profile
from popmarl_openspiel.exact import ExactGame
from popmarl_openspiel.export import write_policy
from popmarl_openspiel.game import ObservationKind, SpielGame, base_name, unknown_game_message
from popmarl_openspiel.match import OpenSpielMatch
from popmarl_openspiel.observe import observe_state
from popmarl_openspiel.tree import NotPerfectRecall, TreeTooLarge, build_tree
from popmarl_openspiel.vector import OpenSpielVector, TensorFill, tensor_fill
from popmarl_openspiel.tabular import player_of

log = logging.getLogger("popmarl_openspiel")

#: Games whose information states lack perfect recall by default, and the parameter that gives it.
_RECALL_PARAMS = {"goofspiel": ("imp_info", "true")}


def _known_game(instance: object, attribute: object, value: str) -> None:
    message = unknown_game_message(value)
    if message is not None:
        raise ValueError(message)


def _scalar_params(instance: object, attribute: object, value: Mapping[str, Any]) -> None:
    for key, item in value.items():
        if not isinstance(item, (bool, int, float, str)):
            raise TypeError(f"game_params.{key} must be an integer, number, boolean or string, got {item!r}")


@attrs.frozen(kw_only=True)
class OpenSpielConfig:
    """``game``: a pyspiel game name (or ``name(k=v,...)``); ``game_params``: its
    parameters; ``observation``: ``info_state`` or ``observation`` tensors;
    ``exact_limit``: the most histories a game may have to be evaluated exactly."""

    game: str = attrs.field(default="kuhn_poker", validator=_known_game)
    game_params: Mapping[str, Any] = attrs.field(factory=dict, validator=_scalar_params)
    observation: ObservationKind = "info_state"
    exact_limit: int = attrs.field(default=1_000_000, validator=attrs.validators.ge(0))


class OpenSpielEnv(ExactEnv):
    """A pyspiel game as a popmarl env (see the module docstring)."""

    Config = OpenSpielConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config: OpenSpielConfig = self.config
        self.spiel = SpielGame.load(config.game, config.game_params, config.observation)
        self._agents = tuple(self.spiel.agent(p) for p in range(self.spiel.num_players))
        self.zero_sum = self.spiel.zero_sum
        self.has_chance = self.spiel.has_chance
        self.simultaneous = self.spiel.simultaneous
        self.state_space = Box(shape=(self.spiel.state_size,))  # type: ignore[arg-type]  # attrs converter
        self._exact: ExactGame | None = None
        self._exact_problem: str | None = None
        self._fill: TensorFill | None = None

    # -- the Env protocol -----------------------------------------------------------------
    @property
    def agents(self) -> tuple[str, ...]:
        return self._agents

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(self.spiel.observation_size,))  # type: ignore[arg-type]  # attrs converter

    def action_space(self, agent: str) -> Discrete:
        return Discrete(n=self.spiel.num_actions)

    def vector(self, *, num_envs: int, seed: int) -> OpenSpielVector:
        if self._fill is None:
            self._fill = tensor_fill(self.spiel)
        return OpenSpielVector(self.spiel, num_envs=num_envs, seed=seed, fill=self._fill)

    def observe(self, agent: str, observation: object, action_mask: np.ndarray | None = None) -> Observations:
        """``agent``'s batch at a pyspiel state of this game (:func:`observe_state`)."""
        return observe_state(self.spiel, agent, observation, action_mask)

    def match(self, seat: str, *, seed: int) -> OpenSpielMatch:
        """A game for a person in ``seat`` (``popmarl play``)."""
        return OpenSpielMatch(self.spiel, seat, seed=seed)

    # -- exact evaluation -------------------------------------------------------------------
    def _why_not_exact(self) -> str | None:
        game_type = self.spiel.type
        if game_type.chance_mode == pyspiel.GameType.ChanceMode.SAMPLED_STOCHASTIC:
            return "its chance outcomes are sampled, not enumerable"
        if not self.spiel.perfect_recall_keys:
            return "it provides no information-state strings"
        return None

    @property
    def exact(self) -> ExactGame:
        """The enumerated game (built on first use); raises where exact evaluation is
        impossible (see :meth:`supports_exact`)."""
        problem = self.exact_problem
        if self._exact is None:
            raise ConfigError(f"env.params.game: {self.spiel.name} cannot be evaluated exactly: {problem}")
        return self._exact

    @property
    def exact_problem(self) -> str | None:
        """Why the game cannot be enumerated, in one line with the fix where one is known
        (None: it can; the tree is then built and kept)."""
        if self._exact is None and self._exact_problem is None:
            self._exact_problem = self._why_not_exact()
            if self._exact_problem is None:
                try:
                    self._exact = ExactGame(self.spiel, build_tree(self.spiel, limit=self.config.exact_limit))
                except TreeTooLarge as exc:
                    self._exact_problem = f"it has {exc} (env.params.exact_limit)"
                except NotPerfectRecall as exc:
                    self._exact_problem = f"{exc}{self._recall_fix()}"
        return self._exact_problem

    def _recall_fix(self) -> str:
        """``; set ...``: the game parameter that gives perfect recall, where there is one."""
        name = base_name(self.spiel.name)
        if name not in _RECALL_PARAMS:
            return ""
        key, value = _RECALL_PARAMS[name]
        if "(" in self.spiel.name:
            return f"; add {key}={value} to env.params.game"
        return f"; set env.params.game_params.{key}: {value}"

    def supports_exact(self) -> bool:
        try:
            return self.exact is not None
        except ConfigError:
            return False

    def exact_returns(self, profiles: Sequence[Profile]) -> np.ndarray:
        return self.exact.returns(profiles)

    def exact_outcomes(self, profiles: Sequence[Profile]) -> np.ndarray:
        return self.exact.outcomes(profiles)

    def nash_conv(self, profile: MixedProfile) -> float:
        return self.exact.nash_conv(profile)

    def correlated_best_response_value(self, agent: str, profiles: CorrelatedProfile) -> float | None:
        if self.spiel.simultaneous:
            return None
        return self.exact.correlated_best_response(player_of(agent), profiles)[1]

    def export_policy(self, profile: MixedProfile, directory: Path) -> list[str]:
        """``final_policy.json``: the aggregated meta-strategy at every information state."""
        if not self.supports_exact():
            log.warning("openspiel: no final_policy.json: %s cannot be enumerated (%s)",
                        self.spiel.name, self._exact_problem)
            return []
        exact = self.exact
        return [write_policy(Path(directory), self.spiel, exact.tree, exact.aggregate_profile(profile)).name]
