"""Loading a pyspiel game from config values, and the facts the adapter needs about it.

Every bad value becomes a :class:`~popmarl.api.ConfigError` naming its dotted path
(``env.params.game``, ``env.params.game_params``, ``env.params.observation``) and what
is allowed, so a typo never surfaces as a pyspiel traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs
import numpy as np
import pyspiel

from popmarl.api import ConfigError, did_you_mean

ObservationKind = Literal["info_state", "observation"]
ParamValue = int | float | bool | str


def base_name(game: str) -> str:
    """``kuhn_poker`` for ``kuhn_poker`` and for ``kuhn_poker(players=3)``."""
    return game.split("(", 1)[0].strip()


def unknown_game_message(game: str) -> str | None:
    """Why ``game`` is not a registered pyspiel game (``None`` when it is)."""
    names = pyspiel.registered_names()
    name = base_name(game)
    if name in names:
        return None
    examples = ", ".join(n for n in ("kuhn_poker", "leduc_poker", "goofspiel", "matrix_rps", "liars_dice") if n in names)
    return (f"unknown OpenSpiel game {name!r}{did_you_mean(name, names)}; allowed: any of the "
            f"{len(names)} names in pyspiel.registered_names(), e.g. {examples}")


def _parameter_spec(name: str) -> dict[str, Any]:
    for game_type in pyspiel.registered_games():
        if game_type.short_name == name:
            return dict(game_type.parameter_specification)
    return {}


def _parameter_help(spec: Mapping[str, Any], name: str) -> str:
    if not spec:
        return f"{name} takes no parameters"
    return f"{name} accepts: " + ", ".join(f"{k} (default {v!r})" for k, v in sorted(spec.items()))


_KIND = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def check_params(name: str, params: Mapping[str, Any]) -> dict[str, ParamValue]:
    """``params`` with names and types checked against the game's parameter
    specification (ints widened where a float is expected), every problem at once."""
    spec = _parameter_spec(name)
    checked: dict[str, ParamValue] = {}
    problems = []
    for key, value in params.items():
        where = f"env.params.game_params.{key}"
        if key not in spec:
            problems.append(f"{where}: unknown parameter{did_you_mean(key, list(spec))}; {_parameter_help(spec, name)}")
            continue
        default = spec[key]
        if isinstance(default, bool) or isinstance(value, bool):
            ok = isinstance(default, bool) and isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float))
            value = float(value) if ok else value
        else:
            ok = isinstance(value, type(default))
        if not ok:
            problems.append(f"{where}: must be {_KIND.get(type(default), type(default).__name__)} "
                            f"(default {default!r}), got {value!r}")
            continue
        checked[key] = value
    if problems:
        raise ConfigError(problems)
    return checked


def load_game(game: str, params: Mapping[str, Any]) -> pyspiel.Game:
    """The pyspiel game ``game`` with ``params``; a ConfigError names the bad value."""
    message = unknown_game_message(game)
    if message is not None:
        raise ConfigError(f"env.params.game: {message}")
    name = base_name(game)
    load: Callable[[], pyspiel.Game]
    if "(" in game:
        if params:
            raise ConfigError(f"env.params.game_params: give parameters either inline in game ({game!r}) "
                              "or in game_params, not both")
        where, load = "env.params.game", lambda: pyspiel.load_game(game)
    else:
        checked = check_params(name, params)
        where, load = "env.params.game_params", lambda: pyspiel.load_game(name, checked)
    try:
        return load()
    except pyspiel.SpielError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"{where}: OpenSpiel rejects the parameters of {name} ({detail}); "
                          f"{_parameter_help(_parameter_spec(name), name)}") from None


@attrs.frozen(kw_only=True)
class SpielGame:
    """A loaded game with the conventions the adapter follows.

    ``tabular_key`` is the string OpenSpiel's tabular policies key a decision by: the
    information-state string where the game provides one, else the observation string.
    """

    game: pyspiel.Game = attrs.field(eq=False)
    name: str
    params: Mapping[str, Any]
    observation: ObservationKind = "info_state"

    @classmethod
    def load(cls, game: str, params: Mapping[str, ParamValue], observation: ObservationKind) -> SpielGame:
        """Load and check that the adapter can play the game."""
        loaded = load_game(game, params)
        game_type = loaded.get_type()
        if game_type.dynamics not in (pyspiel.GameType.Dynamics.SEQUENTIAL, pyspiel.GameType.Dynamics.SIMULTANEOUS):
            raise ConfigError(f"env.params.game: {base_name(game)} has {game_type.dynamics.name} dynamics; "
                              "allowed: sequential (turn-based) or simultaneous-move games")
        provides = {"info_state": game_type.provides_information_state_tensor,
                    "observation": game_type.provides_observation_tensor}
        if not provides[observation]:
            others = [k for k, ok in provides.items() if ok]
            raise ConfigError(f"env.params.observation: {base_name(game)} provides no {observation} tensor; "
                              f"allowed: {', '.join(others) if others else 'none (the game has no tensors)'}")
        if not (game_type.provides_information_state_string or game_type.provides_observation_string):
            raise ConfigError(f"env.params.game: {base_name(game)} provides neither information-state nor "
                              "observation strings, which tabular policies need")
        return cls(game=loaded, name=game, params=dict(params), observation=observation)

    @property
    def type(self) -> pyspiel.GameType:
        return self.game.get_type()

    @property
    def num_players(self) -> int:
        return int(self.game.num_players())

    @property
    def num_actions(self) -> int:
        return int(self.game.num_distinct_actions())

    @property
    def simultaneous(self) -> bool:
        return bool(self.type.dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS)

    @property
    def has_chance(self) -> bool:
        """Whether chance nodes take part in play (explicit or sampled)."""
        return self.type.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC

    @property
    def zero_sum(self) -> bool:
        """Two-player zero-sum or constant-sum (then exploitability is NashConv / 2)."""
        utility = self.type.utility
        return self.num_players == 2 and utility in (pyspiel.GameType.Utility.ZERO_SUM,
                                                     pyspiel.GameType.Utility.CONSTANT_SUM)

    @property
    def perfect_recall_keys(self) -> bool:
        """Whether tabular keys are information states (perfect recall, so exact sequence
        form and OpenSpiel's best responses apply)."""
        return bool(self.type.provides_information_state_string)

    @property
    def observation_size(self) -> int:
        shape = (self.game.information_state_tensor_shape() if self.observation == "info_state"
                 else self.game.observation_tensor_shape())
        return int(np.prod(shape, dtype=int))

    def tabular_key(self, state: pyspiel.State, player: int) -> str:
        if self.type.provides_information_state_string:
            return str(state.information_state_string(player))
        return str(state.observation_string(player))

    def tensor(self, state: pyspiel.State, player: int) -> list[float]:
        """``player``'s observation of ``state`` as configured (a flat list)."""
        if self.observation == "info_state":
            return state.information_state_tensor(player)  # type: ignore[no-any-return]
        return state.observation_tensor(player)  # type: ignore[no-any-return]

    @property
    def state_size(self) -> int:
        """The global state's length: every player's information-state tensor (else
        observation tensor) concatenated (:meth:`state_tensor`)."""
        shape = (self.game.information_state_tensor_shape() if self.type.provides_information_state_tensor
                 else self.game.observation_tensor_shape())
        return self.num_players * int(np.prod(shape, dtype=int))

    def state_tensor(self, state: pyspiel.State) -> list[float]:
        """The global state a centralized critic reads: every player's information-state
        tensor concatenated (OpenSpiel's own all-players observation is partial: the pot
        only in Kuhn, nothing in liar's dice), or every player's observation tensor where
        the game has no information-state tensor."""
        info = self.type.provides_information_state_tensor
        tensors = [state.information_state_tensor(p) if info else state.observation_tensor(p)
                   for p in range(self.num_players)]
        return [x for tensor in tensors for x in tensor]

    def agent(self, player: int) -> str:
        return f"player_{player}"
