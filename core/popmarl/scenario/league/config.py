"""The league scenario's params (``scenario.params``): its roles, each player's env steps per
round, the win-rate table's decay, and the games against unmet frozen players."""

from __future__ import annotations

from typing import Any

import attrs

from popmarl.interfaces.validators import at_least_one, optional, unit_interval
from popmarl.scenario.league.roles import (
    LeagueExploitersConfig,
    MainAgentsConfig,
    MainExploitersConfig,
    RoleConfig,
)

#: ``training`` keys a league does not use: its players train a round's env steps and snapshot as their roles say.
UNUSED_TRAINING = ("window", "target_return", "target_win_rate", "patience", "min_env_steps",
                   "keep", "self_play", "init", "pipeline")
#: The solver of the league's output when the config names none.
DEFAULT_SOLVER = "nash"


def _main_agents(value: Any) -> MainAgentsConfig:
    """A role's params (a mapping, as a component receives them) as its config."""
    return value if isinstance(value, MainAgentsConfig) else MainAgentsConfig(**value)


def _main_exploiters(value: Any) -> MainExploitersConfig:
    return value if isinstance(value, MainExploitersConfig) else MainExploitersConfig(**value)


def _league_exploiters(value: Any) -> LeagueExploitersConfig:
    return value if isinstance(value, LeagueExploitersConfig) else LeagueExploitersConfig(**value)


@attrs.frozen(kw_only=True)
class LeagueConfig:
    """The roles (each with a ``count``), env steps per player per round, and the
    win-rate table's decay per game."""

    main_agents: MainAgentsConfig = attrs.field(factory=MainAgentsConfig, converter=_main_agents)
    main_exploiters: MainExploitersConfig = attrs.field(factory=MainExploitersConfig,
                                                        converter=_main_exploiters)
    league_exploiters: LeagueExploitersConfig = attrs.field(factory=LeagueExploitersConfig,
                                                            converter=_league_exploiters)
    #: Env steps each player trains per round (null: ``training.max_env_steps``, 20,000 by default).
    steps_per_round: int | None = attrs.field(default=None, validator=optional(at_least_one))
    decay: float = attrs.field(default=0.99, validator=unit_interval)
    #: Games per pair of a player and a frozen player it has not met (null: evaluation.episodes_per_entry).
    unmet_episodes: int | None = attrs.field(default=None, validator=optional(at_least_one))

    def role(self, role: str) -> RoleConfig:
        return {"main_agent": self.main_agents, "main_exploiter": self.main_exploiters,
                "league_exploiter": self.league_exploiters}[role]
