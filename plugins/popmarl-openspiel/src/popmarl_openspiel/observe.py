"""A pyspiel state as one player's decision batch, outside the env's vectors.

The row is what :class:`~popmarl_openspiel.vector.OpenSpielVector` gives the same
decision: the configured tensor, the legal-action mask and the tabular key (so tabular
and network policies act on a program's own states as they did in training).
"""

from __future__ import annotations

import numpy as np
import pyspiel

from popmarl.api import Observations
from popmarl_openspiel.game import SpielGame
from popmarl_openspiel.tabular import player_of


def observe_state(spiel: SpielGame, agent: str, state: object, action_mask: np.ndarray | None = None) -> Observations:
    """``agent``'s one-row batch at ``state`` (a pyspiel state of ``spiel``'s game where
    ``agent`` acts); its mask is ``action_mask`` where given, else the state's legal
    actions."""
    player = player_of(agent)
    if not 0 <= player < spiel.num_players:
        raise ValueError(f"agent {agent!r}: not a player of {spiel.name}; its agents: "
                         f"{', '.join(spiel.agent(p) for p in range(spiel.num_players))}")
    if not isinstance(state, pyspiel.State):
        raise TypeError(f"{spiel.name}: an openspiel actor acts on a pyspiel.State, got {type(state).__name__}")
    acting = state.is_simultaneous_node() or state.current_player() == player
    if state.is_terminal() or not acting:
        who = "the game is over" if state.is_terminal() else f"player {state.current_player()} is to move"
        raise ValueError(f"{agent} does not act in this state ({who})")
    if action_mask is None:
        mask = np.asarray(state.legal_actions_mask(player), dtype=bool)
    else:
        mask = np.asarray(action_mask, dtype=bool)
        if mask.size != spiel.num_actions:
            raise ValueError(f"{agent}: an action mask of {mask.size} entries for {spiel.name}'s "
                             f"{spiel.num_actions} actions")
    obs = np.asarray(spiel.tensor(state, player), dtype=np.float32).reshape(1, -1)
    return Observations(obs=obs, mask=mask.reshape(1, -1), keys=(spiel.tabular_key(state, player),), agent=agent)
