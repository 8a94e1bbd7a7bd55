"""One PettingZoo game played move by move by a person and actors (``popmarl play``).

AEC games wait on one agent at a time; rewards are collected as PettingZoo's own loop
does (``last()`` when an agent is selected), so the returns are PettingZoo's totals.
Parallel games move every live agent at once. ``max_steps`` cuts a game off as in
training. The person sees the game through its own observation (:mod:`.boards`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from popmarl.api import Action, Discrete, Match, seed32

from popmarl_pettingzoo.boards import board_for
from popmarl_pettingzoo.spaces import MASK_KEY, ActionCodec, ObservationCodec


class PettingZooMatch(Match):
    """A game made by ``make`` (``api``: ``aec`` or ``parallel``), seeded with ``seed``,
    for the person in ``seat``."""

    def __init__(self, *, make: Callable[[], Any], api: str, module: str, agents: tuple[str, ...],
                 observations: Mapping[str, ObservationCodec], actions: Mapping[str, ActionCodec],
                 max_steps: int | None, seat: str, seed: int) -> None:
        self.seat, self.agents, self.api = seat, agents, api
        self._board = board_for(module)
        self._codecs, self._actions = observations, actions
        self._max_steps = max_steps or 0
        self._steps = 0
        self._returns = dict.fromkeys(agents, 0.0)
        self.game = make()
        self._waiting: tuple[str, ...] = ()
        game_seed = seed32(seed)  # 31 bits, as a vector's copies get: some games keep their seed in a C int
        if api == "aec":
            self.game.reset(seed=game_seed)
            self._advance()
        else:
            self._obs, self._infos = self.game.reset(seed=game_seed)
            self._waiting = tuple(self.game.agents)

    # -- the Match protocol -------------------------------------------------------------
    def to_move(self) -> tuple[str, ...]:
        return self._waiting

    def observation(self, agent: str) -> tuple[Any, np.ndarray | None]:
        if self.api == "aec":
            observation, info = self.game.observe(agent), self.game.infos.get(agent)
        else:
            observation, info = self._obs.get(agent), self._infos.get(agent)
        mask = None
        if self._codecs[agent].mask_source == "info" and isinstance(info, Mapping) and info.get(MASK_KEY) is not None:
            mask = np.asarray(info[MASK_KEY], dtype=bool)
        return observation, mask

    def legal_moves(self) -> dict[int, str]:
        observation, mask = self.observation(self.seat)
        space = self._actions[self.seat].space
        if not isinstance(space, Discrete):
            return {}  # a Box action is typed as numbers (popmarl play reads them), not picked from a list
        if mask is None and isinstance(observation, Mapping) and MASK_KEY in observation:
            mask = np.asarray(observation[MASK_KEY], dtype=bool)
        legal = range(space.n) if mask is None else np.flatnonzero(mask).tolist()
        return {a: self._board.move_name(a) for a in legal}

    def view(self) -> str:
        observation, _ = self.observation(self.seat)
        if observation is None:
            return f"{self.seat} has left the game"
        if isinstance(observation, Mapping) and "observation" in observation:
            observation = observation["observation"]
        return self._board.draw(np.asarray(observation), self.agents.index(self.seat))

    def apply(self, actions: Mapping[str, Action]) -> list[str]:
        moved = {agent: actions[agent] for agent in self._waiting}
        decoded = {agent: self._actions[agent].decode(np.array([a]))[0] for agent, a in moved.items()}
        self._steps += 1
        if self.api == "aec":
            self.game.step(decoded[self._waiting[0]])
            self._advance()
        else:
            self._obs, rewards, _, _, self._infos = self.game.step(decoded)
            for agent, reward in rewards.items():
                self._returns[agent] += float(reward)
            self._waiting = tuple(self.game.agents) if not self._cut() else ()
        return [f"{agent} plays {self._name(agent, a)}" for agent, a in moved.items() if agent != self.seat]

    def returns(self) -> dict[str, float]:
        return dict(self._returns)

    def close(self) -> None:
        self.game.close()

    # -- internals ----------------------------------------------------------------------
    def _name(self, agent: str, action: Action) -> str:
        """A move as the person reads it: its name, or a Box action's values."""
        if isinstance(self._actions[agent].space, Discrete):
            return self._board.move_name(int(action))
        return np.array2string(np.asarray(action), precision=3)

    def _cut(self) -> bool:
        return bool(self._max_steps) and self._steps >= self._max_steps

    def _advance(self) -> None:
        """Collect rewards and step dead agents until a live agent must move (or the game
        is over, or cut off: then every agent's pending reward counts)."""
        game = self.game
        while game.agents:
            if self._cut():
                pending = game.unwrapped._cumulative_rewards
                for agent in game.agents:
                    self._returns[agent] += float(pending.get(agent, 0.0))
                break
            agent = game.agent_selection
            _, reward, terminated, truncated, _ = game.last()
            self._returns[agent] += float(reward)
            if terminated or truncated:
                game.step(None)
                continue
            self._waiting = (agent,)
            return
        self._waiting = ()
