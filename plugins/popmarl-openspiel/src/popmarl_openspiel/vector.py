"""A vector of pyspiel games stepped together, with one decision batch per acting player.

Each call advances every game by one decision (or one joint decision at a
simultaneous-move node): actions are applied, chance nodes are sampled from their
outcome distributions, finished games are reset at once (until ``stop_restarts``). Per
step the only Python objects are pyspiel's states and strings; observations are written
through OpenSpiel's C++ observer into numpy where that matches the state's own tensor,
and every batch is built with one array per player.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import cast

import numpy as np
import pyspiel
from open_spiel.python import observation as spiel_observation

from popmarl.api import Observations, Step, VectorEnv
from popmarl_openspiel.game import SpielGame

TensorFill = Callable[[Sequence[pyspiel.State], int], np.ndarray]

_UNIFORMS = 4096  # chance draws taken from the generator at a time
_CHANCE = int(pyspiel.PlayerId.CHANCE)
_SIMULTANEOUS = int(pyspiel.PlayerId.SIMULTANEOUS)
_TERMINAL = int(pyspiel.PlayerId.TERMINAL)
_STOPPED = -1000  # a finished game left finished (after stop_restarts): no decisions


def _list_fill(spiel: SpielGame) -> TensorFill:
    tensor = spiel.tensor

    def fill(states: Sequence[pyspiel.State], player: int) -> np.ndarray:
        return np.array([tensor(s, player) for s in states], dtype=np.float32).reshape(len(states), -1)

    return fill


def _observer_fill(spiel: SpielGame) -> TensorFill | None:
    """A writer through OpenSpiel's observer (cheaper than the list-returning state
    methods), or ``None`` where the game has none."""
    try:
        if spiel.observation == "info_state":
            observer = spiel_observation.make_observation(spiel.game, spiel_observation.INFO_STATE_OBS_TYPE)
        else:
            observer = spiel_observation.make_observation(spiel.game)
    except (pyspiel.SpielError, RuntimeError, ValueError):
        return None
    if observer is None or getattr(observer, "tensor", None) is None:
        return None
    buffer, set_from, size = observer.tensor, observer.set_from, spiel.observation_size

    def fill(states: Sequence[pyspiel.State], player: int) -> np.ndarray:
        out = np.empty((len(states), size), dtype=np.float32)
        for row, state in enumerate(states):
            set_from(state, player)
            out[row] = buffer
        return out

    return fill


def tensor_fill(spiel: SpielGame, *, probes: int = 32, seed: int = 0) -> TensorFill:
    """The fastest writer that reproduces ``information_state_tensor`` /
    ``observation_tensor`` exactly on ``probes`` random decision states."""
    fast = _observer_fill(spiel)
    slow = _list_fill(spiel)
    if fast is None:
        return slow
    rng = np.random.default_rng(seed)
    game = spiel.game
    checked = 0
    state = game.new_initial_state()
    for _ in range(100 * probes):
        if checked >= probes:
            break
        if state.is_terminal():
            state = game.new_initial_state()
        elif state.is_chance_node():
            actions, probs = zip(*state.chance_outcomes())
            state.apply_action(int(rng.choice(actions, p=np.asarray(probs) / sum(probs))))
        else:
            players = range(spiel.num_players) if state.is_simultaneous_node() else [state.current_player()]
            for player in players:
                if not np.array_equal(fast([state], player), slow([state], player)):
                    return slow
            checked += 1
            if state.is_simultaneous_node():
                state.apply_actions([int(rng.choice(state.legal_actions(p))) for p in range(spiel.num_players)])
            else:
                state.apply_action(int(rng.choice(state.legal_actions())))
    return fast


class OpenSpielVector(VectorEnv):
    """``num_envs`` games of ``spiel``; chance sampled with a generator seeded by ``seed``."""

    def __init__(self, spiel: SpielGame, *, num_envs: int, seed: int, fill: TensorFill | None = None) -> None:
        self.spiel = spiel
        self.num_envs = num_envs
        self._game = spiel.game
        self._n = spiel.num_players
        self._agents = tuple(spiel.agent(p) for p in range(self._n))
        self._rng = np.random.default_rng(seed)
        self._uniform = self._rng.random(_UNIFORMS).tolist()
        self._draw = 0
        self._fill = fill if fill is not None else tensor_fill(spiel)
        self._info_keys = bool(spiel.type.provides_information_state_string)
        self._simultaneous = spiel.simultaneous
        self._intermediate = spiel.type.reward_model == pyspiel.GameType.RewardModel.REWARDS
        self._states: list[pyspiel.State | None] = []  # None: finished and not restarted
        self._restart = True
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # per player: (env ids, masks)
        self._cumulative = np.zeros((num_envs, self._n))
        self._no_rows = np.zeros(0, dtype=np.int64)
        self._recording = False  # fill Step.state (record_state)

    # -- the VectorEnv protocol ---------------------------------------------------------
    def reset(self) -> Step:
        self._states = [self._game.new_initial_state() for _ in range(self.num_envs)]
        self._restart = True
        self._cumulative[:] = 0.0
        return self._settle()

    def stop_restarts(self) -> bool:
        self._restart = False
        return True

    def record_state(self) -> bool:
        self._recording = True
        return True

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        states = self._states
        if self._simultaneous:
            self._apply_joint(actions)
        else:
            for player, (ids, mask) in enumerate(self._pending):
                if len(ids):
                    for i, a in zip(ids.tolist(), self._checked(actions, player, mask).tolist()):
                        states[i].apply_action(a)
        return self._settle()

    # -- internals ----------------------------------------------------------------------
    def _checked(self, actions: Mapping[str, np.ndarray], player: int, mask: np.ndarray) -> np.ndarray:
        agent = self._agents[player]
        if agent not in actions:
            raise ValueError(f"no actions for {agent}, which must act in {len(mask)} game(s)")
        chosen = np.asarray(actions[agent]).astype(np.int64, copy=False).reshape(-1)
        if chosen.shape[0] != mask.shape[0]:
            raise ValueError(f"{agent}: {chosen.shape[0]} actions for {mask.shape[0]} decisions")
        if np.any((chosen < 0) | (chosen >= mask.shape[1])) or not mask[np.arange(len(chosen)), chosen].all():
            raise ValueError(f"{agent}: an action outside the legal-action mask")
        return chosen

    def _apply_joint(self, actions: Mapping[str, np.ndarray]) -> None:
        joint = np.zeros((self.num_envs, self._n), dtype=np.int64)
        for player, (ids, mask) in enumerate(self._pending):
            if len(ids):
                joint[ids, player] = self._checked(actions, player, mask)
        for state, row in zip(self._states, joint.tolist()):
            if state is None:
                continue
            if state.is_simultaneous_node():
                state.apply_actions(row)
            else:
                state.apply_action(row[state.current_player()])

    def _chance(self, state: pyspiel.State) -> None:
        """Apply an outcome drawn from the chance node's distribution."""
        if self._draw >= _UNIFORMS:
            self._uniform = self._rng.random(_UNIFORMS).tolist()
            self._draw = 0
        u = self._uniform[self._draw]
        self._draw += 1
        total = 0.0
        for action, prob in state.chance_outcomes():
            total += prob
            if u < total:
                break
        state.apply_action(action)

    def _settle(self) -> Step:
        """Sample chance and restart finished games until every game awaits a decision
        (one ``current_player`` call per game on the common path), then batch them."""
        states = self._states
        players = []
        finished: list[int] = []
        returns: list[list[float]] = []
        ended: list[list[float]] = []  # the finished games' final states (when recording)
        rewards = np.zeros((self.num_envs, self._n))
        intermediate = self._intermediate
        for i, state in enumerate(states):
            if state is None:
                players.append(_STOPPED)
                continue
            player = state.current_player()
            restarts = 0
            while player < 0 and player != _SIMULTANEOUS:
                if player == _CHANCE:
                    self._chance(state)
                elif player == _TERMINAL:
                    final = state.returns()
                    finished.append(i)
                    returns.append(final)
                    if self._recording:
                        ended.append(self.spiel.state_tensor(state))
                    if intermediate:
                        rewards[i] += np.subtract(final, self._cumulative[i])
                        self._cumulative[i] = 0.0
                    if not self._restart:
                        states[i] = None
                        player = _STOPPED
                        break
                    restarts += 1
                    if restarts > 1000:
                        raise RuntimeError(f"{self.spiel.name}: 1000 episodes in a row ended before any decision")
                    state = states[i] = self._game.new_initial_state()
                else:
                    raise RuntimeError(f"{self.spiel.name}: unsupported node (player id {player})")
                player = state.current_player()
            players.append(player)
            if intermediate and player != _STOPPED:
                current = state.returns()
                rewards[i] += np.subtract(current, self._cumulative[i])
                self._cumulative[i] = current
        if finished and not intermediate:
            np.add.at(rewards, finished, np.asarray(returns, dtype=float))
        return self._batch(players, rewards, finished, returns, ended)

    def _global_states(self, ended: list[list[float]]) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``Step.state`` and ``Step.final_state`` when recording (else None, None)."""
        if not self._recording:
            return None, None
        size = self.spiel.state_size
        now = np.zeros((self.num_envs, size), dtype=np.float32)
        for i, state in enumerate(self._states):
            if state is not None:
                now[i] = self.spiel.state_tensor(state)
        return now, np.asarray(ended, dtype=np.float32).reshape(len(ended), size)

    def _batch(self, players: list[int], rewards: np.ndarray, finished: list[int],
               returns: list[list[float]], ended: list[list[float]]) -> Step:
        n = self._n
        rows: list[list[int]] = [[] for _ in range(n)]
        for i, player in enumerate(players):
            if player >= 0:
                rows[player].append(i)
            elif player == _SIMULTANEOUS:  # every player decides
                for p in range(n):
                    rows[p].append(i)
        decisions = {}
        pending = []
        states = self._states
        for player, ids in enumerate(rows):
            if not ids:
                pending.append((self._no_rows, np.zeros((0, self.spiel.num_actions), bool)))
                continue
            batch_states = [cast(pyspiel.State, states[i]) for i in ids]
            mask = np.array([s.legal_actions_mask(player) for s in batch_states], dtype=bool)
            if self._info_keys:
                keys = tuple([s.information_state_string(player) for s in batch_states])
            else:
                keys = tuple([s.observation_string(player) for s in batch_states])
            env_ids = np.array(ids, dtype=np.int64)
            agent = self._agents[player]
            obs = self._fill(batch_states, player)
            decisions[agent] = (env_ids, Observations(obs=obs, mask=mask, keys=keys, agent=agent))
            pending.append((env_ids, mask))
        self._pending = pending
        state, final_state = self._global_states(ended)
        return Step(decisions=decisions, rewards=rewards, finished=np.array(finished, dtype=np.int64),
                    returns=np.array(returns, dtype=float).reshape(len(finished), n),
                    truncated=np.zeros(len(finished), dtype=bool), state=state, final_state=final_state)
