"""``final_policy.json``: a run's equilibrium policy in a form OpenSpiel loads.

``{"game": name, "game_params": {...}, "policy": {player: {info_state: {action: p}}}}``
with every information state of every player (players and actions as decimal strings,
JSON keys being strings). :func:`load_policy` turns it into an OpenSpiel
``TabularPolicy`` for ``exploitability.nash_conv`` and friends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyspiel
from open_spiel.python import policy as spiel_policy

from popmarl.errors import CheckpointError
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


def load_policy(path: str | os.PathLike[str]) -> spiel_policy.TabularPolicy:
    """An OpenSpiel ``TabularPolicy`` (of the file's game) holding ``final_policy.json``.

    OpenSpiel's tabular policy keys states by string only; in games whose players share
    an information-state string, the later player's row wins.
    """
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        game = load_game_of(document)
        tables = document["policy"]
    except (OSError, ValueError, KeyError, TypeError, pyspiel.SpielError) as exc:
        raise CheckpointError(f"{path}: not a readable final_policy.json ({exc})") from None
    policy = spiel_policy.TabularPolicy(game)
    for player in sorted(tables, key=int):
        for key, probs in tables[player].items():
            row = policy.state_lookup.get(key)
            if row is None:
                raise CheckpointError(f"{path}: information state {key!r} is not one of {document['game']}'s")
            policy.action_probability_array[row, :] = 0.0
            for action, prob in probs.items():
                policy.action_probability_array[row, int(action)] = prob
    return policy
