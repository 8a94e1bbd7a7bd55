"""Vectors of PettingZoo games: N env instances stepped together, one batch per agent.

Each :class:`~popmarl.api.Step` gathers the decisions of every acting agent across the
copies into one :class:`~popmarl.api.Observations` per agent (arrays allocated at
their final size and filled row by row; they belong to the caller), so the rollout
engine makes one policy call per population per step. Episode returns are summed per
copy in ``possible_agents`` order; finished copies reset at once, and their first
decisions are in the same Step. A copy cut off (the env's truncation or ``max_steps``)
reports each agent still in play with its observation at the cut (``Step.final``), which
learners bootstrap from. Copy ``i`` is seeded with ``seed32(seed + i)`` on its first reset
(31 bits: some PettingZoo games keep their seed in a C ``int``); later episodes continue
its random stream.

AEC games: rewards follow PettingZoo's ``last()`` contract (an agent's cumulative reward
since it last acted, collected whenever it is selected, dead or alive), so returns equal
PettingZoo's own totals. Dead agents are stepped with ``None`` here, never shown to
policies. Per-step state is read from ``env.unwrapped`` (PettingZoo's wrappers write
their effects there); ``observe`` and ``step`` go through the wrappers, except where
every wrapper is one of PettingZoo's guards (:func:`guards_only`, as on the classic
games): those only check that play is legal, which masked policies' play always is, and
they cost about as much as the game itself.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from popmarl.api import Observations, Step, VectorEnv, seed32

from popmarl_pettingzoo.spaces import ActionCodec, ObservationCodec

#: Per finished copy: its index, returns, whether it was cut off, the observation of each
#: agent in play at the cut (one-row batches), and its state then (when states are recorded).
Finished = list[tuple[int, np.ndarray, bool, dict[str, Observations], np.ndarray | None]]


class _Vector(VectorEnv):
    """Bookkeeping shared by both APIs: seeds, returns, step counts, truncation, Steps."""

    def __init__(self, *, make: Callable[[], Any], agents: Sequence[str], observations: Mapping[str, ObservationCodec],
                 actions: Mapping[str, ActionCodec], num_envs: int, seed: int, max_steps: int | None,
                 release: Callable[[list[Any]], None] | None = None,
                 state_shape: tuple[int, ...] | None = None) -> None:
        self.num_envs = num_envs
        self.agents = tuple(agents)
        self.envs = [make() for _ in range(num_envs)]
        self._release = release
        self._index = {a: k for k, a in enumerate(self.agents)}
        self._obs_codecs = observations
        self._act_codecs = actions
        self._seed = seed
        self._seeded = [False] * num_envs
        self._max_steps = max_steps or 0
        self._returns = np.zeros((num_envs, len(self.agents)))
        self._steps = [0] * num_envs
        self._truncated = [False] * num_envs
        self._final: list[dict[str, Observations]] = [{} for _ in range(num_envs)]
        self._pending: dict[str, np.ndarray] = {}
        self._restarts = True
        self._stopped = [False] * num_envs  # finished and left finished (stop_restarts)
        self._state_shape = state_shape
        self._recording = False  # fill Step.state (record_state)
        self._none = np.zeros(0, dtype=np.int64)  # empty (read-only) results of a Step with no finished game
        self._no_returns = np.zeros((0, len(self.agents)))
        self._no_flags = np.zeros(0, dtype=bool)
        for empty in (self._none, self._no_returns, self._no_flags):
            empty.flags.writeable = False

    def _next_seed(self, i: int) -> int | None:
        if self._seeded[i]:
            return None
        self._seeded[i] = True
        return seed32(self._seed + i)

    def stop_restarts(self) -> bool:
        self._restarts = False
        return True

    def record_state(self) -> bool:
        self._recording = self._state_shape is not None
        return self._recording

    def _state_of(self, i: int) -> np.ndarray:
        """Copy ``i``'s global state (PettingZoo's ``state()``), as float32 of the declared shape."""
        assert self._state_shape is not None
        return np.asarray(self.envs[i].state(), dtype=np.float32).reshape(self._state_shape)

    def _states(self) -> np.ndarray | None:
        """Every copy's state now (zeros for a copy left finished), when recording."""
        if not self._recording:
            return None
        assert self._state_shape is not None
        states = np.zeros((self.num_envs, *self._state_shape), dtype=np.float32)
        for i in range(self.num_envs):
            if not self._stopped[i]:
                states[i] = self._state_of(i)
        return states

    def _end(self, i: int, finished: Finished) -> bool:
        """Report copy ``i``'s finished episode; restart it unless restarts are stopped
        (then it stays finished: False)."""
        self._finish(i, finished)
        if not self._restarts:
            self._stopped[i] = True
            return False
        self._restart(i)
        return True

    @abstractmethod
    def _restart(self, i: int) -> None:
        """Start copy ``i``'s next episode."""

    def _reset_all(self) -> None:
        self._restarts = True
        self._stopped = [False] * self.num_envs
        for i in range(self.num_envs):
            self._restart(i)

    def _begin(self, i: int) -> None:
        self._returns[i] = 0.0
        self._steps[i] = 0
        self._truncated[i] = False
        self._final[i] = {}

    def _cut(self, i: int, agent: str, raw: Any, info: Any) -> None:
        """Copy ``i``'s episode was cut off with ``agent`` in play: keep its observation
        then (``raw``, read with ``info`` for info masks), for learners to bootstrap from."""
        self._truncated[i] = True
        codec = self._obs_codecs[agent]
        self._final[i][agent] = codec.batch([raw], [info] if codec.mask_source == "info" else None)

    def _finish(self, i: int, finished: Finished) -> None:
        finished.append((i, self._returns[i].copy(), self._truncated[i], self._final[i],
                         self._state_of(i) if self._recording else None))

    def _zeros(self) -> np.ndarray:
        return np.zeros((self.num_envs, len(self.agents)))

    def _actions(self, actions: Mapping[str, np.ndarray]) -> list[tuple[str, list[int], list[Any]]]:
        """Per pending agent: the copies it acts in and its env actions for them."""
        result = []
        for agent, ids in self._pending.items():
            if agent not in actions:
                raise KeyError(f"no actions for agent {agent!r}, which must act in {len(ids)} game(s)")
            decoded = self._act_codecs[agent].decode(actions[agent])
            if len(decoded) != len(ids):
                raise ValueError(f"agent {agent!r}: {len(decoded)} actions for {len(ids)} decisions")
            result.append((agent, ids.tolist(), decoded))
        return result

    def _step(self, selected: Mapping[str, list[int]], rewards: np.ndarray, finished: Finished) -> Step:
        decisions: dict[str, tuple[np.ndarray, Observations]] = {}
        self._pending = {}
        for agent in self.agents:
            copies = selected.get(agent)
            if not copies:
                continue
            codec = self._obs_codecs[agent]
            infos = self._infos_of(agent, copies) if codec.mask_source == "info" else None
            ids = np.array(copies, dtype=np.int64)
            decisions[agent] = (ids, codec.batch(self._observe(agent, copies), infos))
            self._pending[agent] = ids
        states = self._states()
        if not finished:
            return Step(decisions=decisions, rewards=rewards, finished=self._none, returns=self._no_returns,
                        truncated=self._no_flags, state=states)
        return Step(
            decisions=decisions,
            rewards=rewards,
            finished=np.array([f[0] for f in finished], dtype=np.int64),
            returns=np.stack([f[1] for f in finished]),
            truncated=np.array([f[2] for f in finished], dtype=bool),
            final=_final_batches(finished),
            state=states,
            final_state=None if states is None else np.stack([f[4] for f in finished if f[4] is not None]),
        )

    @abstractmethod
    def _observe(self, agent: str, copies: list[int]) -> list[Any]:
        """``agent``'s raw observations in ``copies``."""

    @abstractmethod
    def _infos_of(self, agent: str, copies: list[int]) -> list[Any]:
        """``agent``'s infos in ``copies``."""

    def close(self) -> None:
        """Hand the copies back for reuse (``release``; each is reseeded at its first
        reset in the next vector), or close them."""
        envs, self.envs = self.envs, []
        if self._release is not None:
            self._release(envs)
            return
        for env in envs:
            env.close()


def guards_only(env: Any) -> bool:
    """Whether every wrapper around ``env``'s game is one of PettingZoo's guards
    (order enforcing, action bounds, illegal-move termination): stepping the game
    itself then plays the same for legal actions."""
    from pettingzoo.utils.wrappers import AssertOutOfBoundsWrapper, OrderEnforcingWrapper, TerminateIllegalWrapper

    guards = (AssertOutOfBoundsWrapper, OrderEnforcingWrapper, TerminateIllegalWrapper)
    while env is not env.unwrapped:
        if type(env) not in guards:
            return False
        env = env.env
    return True


class AECVector(_Vector):
    """Turn-based (AEC) games: each copy waits on exactly one agent at a time."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._raw = [env.unwrapped for env in self.envs]
        # What observe and step go through: the game itself behind guards only.
        self._play = [raw if guards_only(env) else env for env, raw in zip(self.envs, self._raw)]

    def reset(self) -> Step:
        rewards, finished = self._zeros(), Finished()
        selected: dict[str, list[int]] = {}
        self._reset_all()
        for i in range(self.num_envs):
            self._select(selected, i, self._advance(i, rewards, finished))
        return self._step(selected, rewards, finished)

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        rewards, finished = self._zeros(), Finished()
        selected: dict[str, list[int]] = {}
        envs, steps = self._play, self._steps
        for _, ids, decoded in self._actions(actions):
            for i, action in zip(ids, decoded):
                envs[i].step(action)
                steps[i] += 1
                self._select(selected, i, self._advance(i, rewards, finished))
        return self._step(selected, rewards, finished)

    @staticmethod
    def _select(selected: dict[str, list[int]], i: int, agent: str | None) -> None:
        if agent is not None:
            selected.setdefault(agent, []).append(i)

    def _restart(self, i: int) -> None:
        self.envs[i].reset(seed=self._next_seed(i))
        self._begin(i)

    def _advance(self, i: int, rewards: np.ndarray, finished: Finished) -> str | None:
        """Collect rewards, step dead agents, end and restart the episode as needed;
        return the live agent copy ``i`` now waits on (None: it finished for good)."""
        env, raw, index, returns = self._play[i], self._raw[i], self._index, self._returns
        restarted = False
        while True:
            agents = raw.agents
            if not agents or (self._max_steps and self._steps[i] >= self._max_steps):
                if agents:  # cut off: the remaining agents' pending rewards count, then truncate
                    for agent in agents:
                        reward = raw._cumulative_rewards.get(agent, 0)
                        if reward:
                            rewards[i, index[agent]] += reward
                            returns[i, index[agent]] += reward
                        if not raw.terminations.get(agent, False) and agent not in self._final[i]:
                            self._cut(i, agent, env.observe(agent), raw.infos.get(agent))
                    self._truncated[i] = True
                if restarted and self._steps[i] == 0:
                    raise RuntimeError(f"{raw} ended an episode without any agent acting")
                if not self._end(i, finished):
                    return None
                restarted = True
                continue
            agent = raw.agent_selection
            reward = raw._cumulative_rewards[agent]
            if reward:
                rewards[i, index[agent]] += reward
                returns[i, index[agent]] += reward
            if raw.terminations[agent] or raw.truncations[agent]:
                if not raw.terminations[agent]:
                    self._cut(i, agent, env.observe(agent), raw.infos.get(agent))
                env.step(None)
                continue
            return agent  # type: ignore[no-any-return]

    def _observe(self, agent: str, copies: list[int]) -> list[Any]:
        envs = self._play
        return [envs[i].observe(agent) for i in copies]

    def _infos_of(self, agent: str, copies: list[int]) -> list[Any]:
        raw = self._raw
        return [raw[i].infos.get(agent) for i in copies]


class ParallelVector(_Vector):
    """Simultaneous-move (Parallel API) games: every live agent of every copy acts."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._obs: list[Mapping[str, Any]] = [{} for _ in range(self.num_envs)]
        self._infos: list[Mapping[str, Any]] = [{} for _ in range(self.num_envs)]

    def reset(self) -> Step:
        self._reset_all()
        return self._result(self._zeros(), Finished())

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        joint: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for agent, ids, decoded in self._actions(actions):
            for i, action in zip(ids, decoded):
                joint[i][agent] = action
        rewards, finished = self._zeros(), Finished()
        index, returns, max_steps = self._index, self._returns, self._max_steps
        stopped = self._stopped
        for i, env in enumerate(self.envs):
            if stopped[i]:
                continue
            obs, step_rewards, terminations, truncations, infos = env.step(joint[i])
            for agent, reward in step_rewards.items():
                if reward:
                    rewards[i, index[agent]] += reward
                    returns[i, index[agent]] += reward
            for agent, truncated in truncations.items():
                if truncated and not terminations.get(agent, False):
                    self._truncated[i] = True
                    if agent in obs:
                        self._cut(i, agent, obs[agent], infos.get(agent))
            self._obs[i], self._infos[i] = obs, infos
            self._steps[i] += 1
            live = env.agents
            if not live or (max_steps and self._steps[i] >= max_steps):
                if live:
                    self._truncated[i] = True
                    for agent in live:
                        if agent in obs and agent not in self._final[i]:
                            self._cut(i, agent, obs[agent], infos.get(agent))
                self._end(i, finished)
        return self._result(rewards, finished)

    def _restart(self, i: int) -> None:
        obs, infos = self.envs[i].reset(seed=self._next_seed(i))
        if not self.envs[i].agents:
            raise RuntimeError(f"{self.envs[i]} has no agents after reset")
        self._obs[i], self._infos[i] = obs, infos
        self._begin(i)

    def _result(self, rewards: np.ndarray, finished: Finished) -> Step:
        selected: dict[str, list[int]] = {}
        for i, env in enumerate(self.envs):
            if self._stopped[i]:
                continue
            for agent in env.agents:
                selected.setdefault(agent, []).append(i)
        return self._step(selected, rewards, finished)

    def _observe(self, agent: str, copies: list[int]) -> list[Any]:
        obs = self._obs
        return [obs[i][agent] for i in copies]

    def _infos_of(self, agent: str, copies: list[int]) -> list[Any]:
        infos = self._infos
        return [infos[i].get(agent) for i in copies]


def _final_batches(finished: Finished) -> dict[str, tuple[np.ndarray, Observations]]:
    """The cut-off copies' final observations, one batch per agent (``Step.final``)."""
    rows: dict[str, tuple[list[int], list[Observations]]] = {}
    for i, _, _, final, _ in finished:
        for agent, batch in final.items():
            ids, batches = rows.setdefault(agent, ([], []))
            ids.append(i)
            batches.append(batch)
    result = {}
    for agent, (ids, batches) in rows.items():
        masks = [b.mask for b in batches if b.mask is not None]
        mask = np.concatenate(masks) if masks else None
        result[agent] = (np.array(ids, dtype=np.int64),
                         Observations(obs=np.concatenate([b.obs for b in batches]), mask=mask, agent=agent))
    return result
