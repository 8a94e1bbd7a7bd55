"""Agent-to-population mapping and the populations' policy pools."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from popmarl.errors import ConfigError

MAPPINGS = ("per_player", "shared")


@attrs.frozen(kw_only=True)
class AgentMapping:
    """Which population each env agent (seat) draws its policy from."""

    population_of: Mapping[str, str]

    @classmethod
    def resolve(cls, mapping: str | Mapping[str, str], agents: Sequence[str]) -> AgentMapping:
        """Apply ``per_player`` (one population per agent), ``shared`` (one for all), or an
        explicit ``{agent name or regex: population}`` map to ``agents``."""
        if mapping == "per_player":
            return cls(population_of={a: a for a in agents})
        if mapping == "shared":
            return cls(population_of={a: "shared" for a in agents})
        if isinstance(mapping, str):
            raise ConfigError(
                f"agents.mapping: {mapping!r} is not allowed; use per_player, shared, "
                "or a map {agent or regex: population}"
            )
        result: dict[str, str] = {}
        for agent in agents:
            if agent in mapping:
                result[agent] = mapping[agent]
                continue
            for pattern, population in mapping.items():
                if re.fullmatch(pattern, agent):
                    result[agent] = population
                    break
        missing = [a for a in agents if a not in result]
        if missing:
            raise ConfigError(
                f"agents.mapping: no population for agent(s) {', '.join(missing)}; "
                f"the env's agents are {', '.join(agents)}"
            )
        return cls(population_of=result)

    @property
    def populations(self) -> tuple[str, ...]:
        """Population names, in order of first appearance."""
        return tuple(dict.fromkeys(self.population_of.values()))

    def agents_of(self, population: str) -> tuple[str, ...]:
        """The agents (seats) that draw from ``population``."""
        return tuple(a for a, p in self.population_of.items() if p == population)


def policy_id(population: str, index: int) -> str:
    """The id of a population's ``index``-th policy, e.g. ``player_0/3``."""
    return f"{population}/{index}"
