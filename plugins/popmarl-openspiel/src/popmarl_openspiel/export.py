"""``final_policy.json``: a run's equilibrium policy in a form OpenSpiel loads.

``{"game": name, "game_params": {...}, "policy": {player: {info_state: {action: p}}}}``
with every information state of every player (players and actions as decimal strings,
JSON keys being strings), each player's states under that player, so nothing is lost in
games whose players share information-state strings. :func:`load_policy` turns it into
an OpenSpiel policy for ``exploitability.nash_conv`` and friends: a ``TabularPolicy``
where the strings are distinct across players, a :class:`PerPlayerTabularPolicy` where
they are not (a ``TabularPolicy`` keys its rows by string alone, so one player's rows
would overwrite the other's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyspiel
from open_spiel.python import policy as spiel_policy
from open_spiel.python.algorithms import get_all_states

from popmarl.api import CheckpointError
from popmarl_openspiel.game import SpielGame
from popmarl_openspiel.tree import GameTree

FILENAME = "final_policy.json"


def policy_document(spiel: SpielGame, tree: GameTree, tables: Mapping[int, np.ndarray]) -> dict[str, Any]:
    """The JSON document for per-player behaviour ``tables`` (tree order)."""
    policy: dict[str, dict[str, dict[str, float]]] = {}
    for player, table in tables.items():
        infostates = tree.players[player]
        entries = {}
        for key, legal, probs in zip(infostates.keys, infostates.mask, table):
            actions = np.flatnonzero(legal)
            entries[key] = {str(a): float(probs[a]) for a in actions.tolist()}
        policy[str(player)] = entries
    return {"game": spiel.name, "game_params": dict(spiel.params), "policy": policy}


def write_policy(directory: Path, spiel: SpielGame, tree: GameTree, tables: Mapping[int, np.ndarray]) -> Path:
    """Write ``final_policy.json`` into ``directory`` atomically; return its path."""
    path = directory / FILENAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(policy_document(spiel, tree, tables), indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_game_of(document: Mapping[str, Any]) -> pyspiel.Game:
    """The game a ``final_policy.json`` document was written for."""
    name, params = document["game"], dict(document.get("game_params") or {})
    return pyspiel.load_game(name, params) if params else pyspiel.load_game(name)


class PerPlayerTabularPolicy(spiel_policy.Policy):  # type: ignore[misc]
    """An OpenSpiel policy made of one ``TabularPolicy`` per player (``policies[p]``, built
    with ``players=[p]``), for games whose players share information-state strings.

    ``action_probabilities(state, player_id)`` reads ``player_id``'s own table (the state's
    current player when ``player_id`` is None, as OpenSpiel's ``exploitability.nash_conv``
    and Python ``BestResponsePolicy`` call it at turn-based nodes; they pass the player at
    simultaneous ones). Anything that keys a policy by information-state string alone
    cannot hold it: :meth:`to_tabular` refuses, and OpenSpiel's C++ best responses
    (``nash_conv(..., use_cpp_br=True)``, ``policy_utils.policy_to_dict``) are not for it.
    """

    def __init__(self, game: pyspiel.Game, policies: Sequence[spiel_policy.TabularPolicy]) -> None:
        super().__init__(game, list(range(game.num_players())))
        if len(policies) != game.num_players():
            raise ValueError(f"{len(policies)} tables for a {game.num_players()}-player game")
        self.policies = tuple(policies)

    def action_probabilities(self, state: pyspiel.State, player_id: int | None = None) -> dict[int, float]:
        player = state.current_player() if player_id is None else player_id
        if not 0 <= player < len(self.policies):
            raise ValueError(f"no player to act for at {state.history_str()!r} (current player {player}); "
                             "pass player_id at simultaneous nodes")
        probs: dict[int, float] = self.policies[player].action_probabilities(state, player)
        return probs

    def policy_for_key(self, key: str, player: int) -> np.ndarray:
        """``player``'s row (a view, as ``TabularPolicy.policy_for_key``) at ``key``."""
        row: np.ndarray = self.policies[player].policy_for_key(key)
        return row

    def to_tabular(self, states: Any = None) -> spiel_policy.TabularPolicy:
        raise ValueError(f"{self.game}: players share information-state strings, so one TabularPolicy "
                         "cannot hold this policy (use .policies[player], one per player)")


def load_policy(path: str | os.PathLike[str]) -> spiel_policy.TabularPolicy | PerPlayerTabularPolicy:
    """An OpenSpiel policy (of the file's game) holding ``final_policy.json``.

    A ``TabularPolicy`` where the players' information-state strings are distinct (Kuhn,
    Leduc, ...). Where some player shares a string with another (``oshi_zumo``: both
    players' root is ``''``), a ``TabularPolicy``, keyed by string alone, would let one
    player's rows overwrite the other's: it is then a :class:`PerPlayerTabularPolicy`,
    one table per player, which ``exploitability.nash_conv(policy.game, policy)``
    evaluates correctly (with its default Python best responses).
    """
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        game = load_game_of(document)
        tables = document["policy"]
        players = {int(player): player for player in tables}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, pyspiel.SpielError) as exc:
        raise CheckpointError(f"{path}: not a readable final_policy.json ({exc})") from None
    n = game.num_players()
    if not all(0 <= player < n for player in players):
        raise CheckpointError(f"{path}: players {sorted(players)} in a {n}-player game")
    states = get_all_states.get_all_states(game, depth_limit=-1, include_terminals=False,
                                           include_chance_states=False, include_mean_field_states=False,
                                           to_string=lambda state: state.history_str())
    own = [spiel_policy.TabularPolicy(game, [p], states=states) for p in range(n)]
    shared = len(set().union(*(policy.state_lookup for policy in own))) < sum(len(p.state_lookup) for p in own)
    combined = None if shared else spiel_policy.TabularPolicy(game, states=states)
    for player in sorted(players):
        table = combined if combined is not None else own[player]
        try:
            for key, probs in tables[players[player]].items():
                if key not in own[player].state_lookup:
                    raise CheckpointError(f"{path}: information state {key!r} is not one of player {player}'s "
                                          f"in {document['game']}")
                row = table.policy_for_key(key)
                row[:] = 0.0
                for action, prob in probs.items():
                    row[int(action)] = prob
        except (ValueError, TypeError, AttributeError, IndexError) as exc:
            raise CheckpointError(f"{path}: not a readable final_policy.json (player {player}: {exc})") from None
    return combined if combined is not None else PerPlayerTabularPolicy(game, own)
