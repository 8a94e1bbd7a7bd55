"""The roles of a league: whom each player meets, and when it is snapshot.

After AlphaStar's published pseudocode (Vinyals et al. 2019), with its constants:

- a **main agent** meets, per game, with ``pfsp_share`` (0.5) an opponent drawn by PFSP
  (``weighting``, default ``squared``) from every frozen player of the league; with
  ``verification_share`` (0.15) a verification opponent, if one is needed: the main
  exploiters' snapshots while it wins less than 0.3 against one of them, else its
  opponent main agent's own snapshots it has forgotten how to beat (below 0.7, after the
  last one it beats better than the one before), both by PFSP ``squared``; otherwise, and
  with ``self_play_share`` (0.35), self-play: a current main agent (drawn uniformly),
  unless it wins less than 0.3 against it, when it meets that main agent's snapshots by
  PFSP ``variance`` instead. Never reset.
- a **main exploiter** meets a current main agent (drawn uniformly) while it wins more
  than 0.1 against it, else that main agent's snapshots by PFSP (default ``variance``);
  it is reset to its initial policy at every snapshot.
- a **league exploiter** meets every frozen player by PFSP (default ``linear_capped``)
  and is reset with ``reset_probability`` (0.25) after a snapshot.

A player is snapshot (a frozen copy joins the league) once it has trained
``min_snapshot_steps`` env steps since its last one and then either wins more than
``snapshot_win_rate`` (0.7) against every frozen player (main agents, league exploiters)
or every current main agent (main exploiters), or has trained ``max_snapshot_steps``.
The rules are applied once per round: a round's games draw their opponents from one
mixture per player (:func:`opponents`), the composition of the branches above.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from popmarl.scenario.league.table import WEIGHTINGS, WinRates, pfsp
from popmarl.interfaces.validators import at_least_one, non_negative, optional, unit_interval

ROLES = ("main_agent", "main_exploiter", "league_exploiter")

#: The pseudocode's thresholds: self-play while winning more than this against the opponent...
SELF_PLAY_WIN_RATE = 0.3
#: ...verify against main exploiters' snapshots while winning less than this against one...
EXPLOITER_CHECK_WIN_RATE = 0.3
#: ...and against forgotten snapshots while winning less than this against one.
FORGETTING_WIN_RATE = 0.7
#: A main exploiter meets the main agent itself while it wins more than this against it.
EXPLOITER_FALLBACK_WIN_RATE = 0.1


def _weighting(instance: object, attribute: attrs.Attribute, value: str) -> None:  # type: ignore[type-arg]
    if value not in WEIGHTINGS:
        raise ValueError(f"{value!r} is not allowed; allowed: {', '.join(WEIGHTINGS)}")


@attrs.frozen(kw_only=True)
class RoleConfig:
    """One role: how many players have it, their PFSP weighting and snapshot rule."""

    count: int = attrs.field(default=1, validator=non_negative)
    weighting: str = attrs.field(default="squared", validator=_weighting)
    snapshot_win_rate: float = attrs.field(default=0.7, validator=unit_interval)
    min_snapshot_steps: int = attrs.field(default=20_000, validator=at_least_one)
    max_snapshot_steps: int | None = attrs.field(default=60_000, validator=optional(at_least_one))

    def __attrs_post_init__(self) -> None:
        if self.max_snapshot_steps is not None and self.max_snapshot_steps < self.min_snapshot_steps:
            raise ValueError(f"max_snapshot_steps ({self.max_snapshot_steps}) is below min_snapshot_steps "
                             f"({self.min_snapshot_steps})")


@attrs.frozen(kw_only=True)
class MainAgentsConfig(RoleConfig):
    """Main agents: the shares of a game's opponent branches (they sum to 1)."""

    pfsp_share: float = attrs.field(default=0.5, validator=unit_interval)
    self_play_share: float = attrs.field(default=0.35, validator=unit_interval)
    verification_share: float = attrs.field(default=0.15, validator=unit_interval)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.count < 1:
            raise ValueError("count: a league needs at least one main agent")
        total = self.pfsp_share + self.self_play_share + self.verification_share
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"pfsp_share + self_play_share + verification_share must be 1, got {total:g}")


@attrs.frozen(kw_only=True)
class MainExploitersConfig(RoleConfig):
    weighting: str = attrs.field(default="variance", validator=_weighting)


@attrs.frozen(kw_only=True)
class LeagueExploitersConfig(RoleConfig):
    weighting: str = attrs.field(default="linear_capped", validator=_weighting)
    reset_probability: float = attrs.field(default=0.25, validator=unit_interval)


@attrs.frozen(kw_only=True)
class Frozen:
    """A frozen player of the league: its policy id, the player it is a snapshot of
    (``parent``, a player's key) and that player's role."""

    policy_id: str
    parent: str
    role: str


@attrs.frozen(kw_only=True)
class Opposition:
    """What one player may meet: the opposing seat's frozen players and current main
    agents (their keys), and the league's win rates."""

    frozen: Sequence[Frozen]
    main_agents: Sequence[str]
    table: WinRates


Mixture = dict[str, float]


def opponents(role: str, me: str, config: RoleConfig, opposition: Opposition) -> Mixture:
    """The probability of meeting each opponent (a frozen player's policy id, or a
    current main agent's key) in one of ``me``'s games this round."""
    if role == "main_agent":
        assert isinstance(config, MainAgentsConfig)
        return _main_agent(me, config, opposition)
    if role == "main_exploiter":
        return _main_exploiter(me, config, opposition)
    if role == "league_exploiter":
        return _pfsp(me, [f.policy_id for f in opposition.frozen], config.weighting, opposition.table)
    raise ValueError(f"unknown league role {role!r}; roles: {', '.join(ROLES)}")


def ready_to_snapshot(role: str, me: str, config: RoleConfig, opposition: Opposition, steps_since: int) -> bool:
    """Whether ``me`` is snapshot after a round, ``steps_since`` env steps after its last snapshot."""
    if steps_since < config.min_snapshot_steps:
        return False
    if config.max_snapshot_steps is not None and steps_since >= config.max_snapshot_steps:
        return True
    rivals = (list(opposition.main_agents) if role == "main_exploiter"
              else [f.policy_id for f in opposition.frozen])
    rates = opposition.table.win_rate(me, rivals)
    return bool(len(rates)) and float(rates.min()) > config.snapshot_win_rate


def _add(mixture: Mixture, share: float, branch: Mixture) -> None:
    for opponent, p in branch.items():
        if share * p > 0:
            mixture[opponent] = mixture.get(opponent, 0.0) + share * p


def _pfsp(me: str, candidates: Sequence[str], weighting: str, table: WinRates) -> Mixture:
    if not candidates:
        return {}
    probabilities = pfsp(table.win_rate(me, candidates), weighting)
    return {c: float(p) for c, p in zip(candidates, probabilities)}


def _snapshots_of(opposition: Opposition, parent: str) -> list[str]:
    return [f.policy_id for f in opposition.frozen if f.parent == parent]


def _rate(table: WinRates, me: str, opponent: str) -> float:
    return float(table.win_rate(me, [opponent])[0])


def _main_agent(me: str, config: MainAgentsConfig, opposition: Opposition) -> Mixture:
    table = opposition.table
    mixture: Mixture = {}
    _add(mixture, config.pfsp_share, _pfsp(me, [f.policy_id for f in opposition.frozen], config.weighting, table))
    share = 1.0 / len(opposition.main_agents)
    for main in opposition.main_agents:
        self_play = _self_play(me, main, opposition)
        _add(mixture, share * config.self_play_share, self_play)
        _add(mixture, share * config.verification_share, _verification(me, main, opposition) or self_play)
    return mixture


def _self_play(me: str, main: str, opposition: Opposition) -> Mixture:
    """The main agent ``main`` itself, or its snapshots as a curriculum while it is too strong."""
    snapshots = _snapshots_of(opposition, main)
    if _rate(opposition.table, me, main) > SELF_PLAY_WIN_RATE or not snapshots:
        return {main: 1.0}
    return _pfsp(me, snapshots, "variance", opposition.table)


def _verification(me: str, main: str, opposition: Opposition) -> Mixture | None:
    """Main exploiters' snapshots that still beat ``me``, else ``main``'s snapshots it has forgotten."""
    table = opposition.table
    exploiters = [f.policy_id for f in opposition.frozen if f.role == "main_exploiter"]
    if exploiters and float(table.win_rate(me, exploiters).min()) < EXPLOITER_CHECK_WIN_RATE:
        return _pfsp(me, exploiters, "squared", table)
    snapshots = _snapshots_of(opposition, main)
    rates = table.win_rate(me, snapshots)
    keep = _without_monotonic_suffix(rates)
    if keep and float(rates[:keep].min()) < FORGETTING_WIN_RATE:
        return _pfsp(me, snapshots[:keep], "squared", table)
    return None


def _without_monotonic_suffix(rates: np.ndarray) -> int:
    """How many of the oldest snapshots to verify against: up to the last one ``me``
    beats better than the one before it (none if the rates never rise)."""
    for i in range(len(rates) - 1, 0, -1):
        if rates[i - 1] < rates[i]:
            return i + 1
    return 0


def _main_exploiter(me: str, config: RoleConfig, opposition: Opposition) -> Mixture:
    mixture: Mixture = {}
    share = 1.0 / len(opposition.main_agents)
    for main in opposition.main_agents:
        snapshots = _snapshots_of(opposition, main)
        if _rate(opposition.table, me, main) > EXPLOITER_FALLBACK_WIN_RATE or not snapshots:
            _add(mixture, share, {main: 1.0})
        else:
            _add(mixture, share, _pfsp(me, snapshots, config.weighting, opposition.table))
    return mixture

