"""Env ``matrix``: normal-form games, one simultaneous move per episode.

Named games (``rps``, ``matching_pennies``, ``prisoners_dilemma``), seeded random
zero-sum or general-sum games of a given size, or a payoff tensor ``[n, A_1, ..., A_n]``
from a ``.npy`` file. Evaluation (returns and win / draw / loss) and NashConv are exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs
import numpy as np

from popmarl.api import (Box, ConfigError, CorrelatedProfile, Discrete, ExactEnv, ExplicitPolicy, MixedProfile,
                         MixedStrategyPolicy, Observations, Profile, Step, VectorEnv, batch_expected_payoffs,
                         deviation_payoffs, nash_conv, outcome_indicators)
from popmarl.builtin.matrix_match import MatrixMatch

_NAMED = {
    "rps": np.array([[[0, -1, 1], [1, 0, -1], [-1, 1, 0]], [[0, 1, -1], [-1, 0, 1], [1, -1, 0]]], float),
    "matching_pennies": np.array([[[1, -1], [-1, 1]], [[-1, 1], [1, -1]]], float),
    "prisoners_dilemma": np.array([[[-1, -3], [0, -2]], [[-1, 0], [-3, -2]]], float),
}
GAMES = (*_NAMED, "random_zero_sum", "random_general_sum", "file")


@attrs.frozen(kw_only=True)
class MatrixConfig:
    """``game``: a named game, ``random_zero_sum``, ``random_general_sum`` or ``file``."""

    game: Literal["rps", "matching_pennies", "prisoners_dilemma", "random_zero_sum", "random_general_sum", "file"] = "rps"
    size: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    players: int = attrs.field(default=2, validator=attrs.validators.ge(2))
    seed: int = 0
    path: str | None = None


def payoff_tensor(config: MatrixConfig) -> np.ndarray:
    """The game's payoff tensor ``[n, A_1, ..., A_n]``."""
    if config.game in _NAMED:
        return _NAMED[config.game]
    if config.game == "file":
        return _load_tensor(config.path)
    rng = np.random.default_rng(config.seed)
    shape = (config.size,) * config.players
    if config.game == "random_zero_sum":
        if config.players != 2:
            raise ConfigError("env.params.players: random_zero_sum games have exactly 2 players")
        a = rng.uniform(-1, 1, shape)
        return np.stack([a, -a])
    return rng.uniform(-1, 1, (config.players, *shape))


def _load_tensor(path: str | None) -> np.ndarray:
    if not path:
        raise ConfigError("env.params.path: required when game is 'file' (a .npy payoff tensor)")
    if not Path(path).is_file():
        raise ConfigError(f"env.params.path: no such file: {path}")
    try:
        tensor = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"env.params.path: {path} is not a .npy array ({exc})") from None
    if tensor.ndim < 3 or tensor.shape[0] != tensor.ndim - 1 or not np.all(np.isfinite(tensor)):
        raise ConfigError(
            f"env.params.path: {path} must hold a finite array shaped [n_players, A_1, ..., A_n], "
            f"got shape {tensor.shape}"
        )
    return tensor.astype(float)


def strategy_of(policy: object, n_actions: int) -> np.ndarray:
    """The mixed strategy a policy plays in a one-shot game (it sees the constant obs)."""
    if isinstance(policy, MixedStrategyPolicy):
        return policy.probs
    if isinstance(policy, ExplicitPolicy):
        return policy.probabilities(Observations(obs=np.ones((1, 1), np.float32)))[0]
    raise TypeError(f"{type(policy).__name__} has no explicit action probabilities")


class _MatrixVector(VectorEnv):
    """``num_envs`` copies of the one-shot game, all deciding at once."""

    def __init__(self, env: MatrixEnv, num_envs: int) -> None:
        self.env = env
        self.num_envs = num_envs
        self._ids = np.arange(num_envs)
        self._obs = np.ones((num_envs, 1), np.float32)
        n = len(env.agents)
        self._none = np.zeros(0, int)
        self._zeros = np.zeros((num_envs, n))

    def _decisions(self) -> Step:
        decisions = {a: (self._ids, Observations(obs=self._obs, agent=a)) for a in self.env.agents}
        return Step(decisions=decisions, rewards=self._zeros, finished=self._none,
                    returns=np.zeros((0, len(self.env.agents))), truncated=np.zeros(0, bool))

    def reset(self) -> Step:
        return self._decisions()

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        index = tuple(np.asarray(actions[a], dtype=int) for a in self.env.agents)
        returns = np.stack([self.env.payoffs[k][index] for k in range(len(self.env.agents))], axis=1)
        step = self._decisions()
        return attrs.evolve(step, rewards=returns, finished=self._ids, returns=returns,
                            truncated=np.zeros(self.num_envs, bool))


class MatrixEnv(ExactEnv):
    """A normal-form game as an env: simultaneous moves, exact evaluation and NashConv."""

    Config = MatrixConfig

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.payoffs = payoff_tensor(self.config)
        self._agents = tuple(f"player_{k}" for k in range(self.payoffs.shape[0]))
        self.zero_sum = len(self._agents) == 2 and bool(np.allclose(self.payoffs.sum(axis=0), 0.0))
        # Per outcome (win, draw, loss), a payoff-shaped tensor of its indicator.
        indicators = outcome_indicators(np.moveaxis(self.payoffs, 0, -1))
        self._outcome_tensors = [np.moveaxis(indicator, -1, 0) for indicator in indicators]

    @property
    def agents(self) -> tuple[str, ...]:
        return self._agents

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(1,), low=1.0, high=1.0)

    def action_space(self, agent: str) -> Discrete:
        return Discrete(n=self.payoffs.shape[1 + self._agents.index(agent)])

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        return _MatrixVector(self, num_envs)

    def observe(self, agent: str, observation: object, action_mask: np.ndarray | None = None) -> Observations:
        """The one decision of a normal-form game: its constant observation (``observation``
        is not read; pass None), with ``action_mask`` where given."""
        if agent not in self._agents:
            raise ValueError(f"agent {agent!r}: not a player of this game; its agents: {', '.join(self._agents)}")
        mask = None if action_mask is None else np.asarray(action_mask, dtype=bool).reshape(1, -1)
        return Observations(obs=np.ones((1, 1), np.float32), mask=mask, agent=agent)

    def match(self, seat: str, *, seed: int) -> MatrixMatch:
        """A game for a person in ``seat`` (``popmarl play``)."""
        return MatrixMatch(payoffs=self.payoffs, agents=self._agents, seat=seat, game=self.config.game)

    def _strategies(self, profile: Mapping[str, object]) -> list[np.ndarray]:
        return [strategy_of(profile[a], self.payoffs.shape[1 + k]) for k, a in enumerate(self._agents)]

    def exact_returns(self, profiles: Sequence[Profile]) -> np.ndarray:
        per_agent = zip(*(self._strategies(p) for p in profiles))
        return batch_expected_payoffs(self.payoffs, [np.stack(rows) for rows in per_agent])

    def exact_outcomes(self, profiles: Sequence[Profile]) -> np.ndarray:
        strategies = [np.stack(rows) for rows in zip(*(self._strategies(p) for p in profiles))]
        return np.stack([batch_expected_payoffs(tensor, strategies) for tensor in self._outcome_tensors], axis=1)

    def mixed_strategies(self, profile: MixedProfile) -> list[np.ndarray]:
        """Each agent's mixture of policies collapsed to one mixed strategy."""
        result = []
        for k, agent in enumerate(self._agents):
            n_actions = self.payoffs.shape[1 + k]
            result.append(np.sum([w * strategy_of(p, n_actions) for p, w in profile[agent]], axis=0))
        return result

    def nash_conv(self, profile: MixedProfile) -> float:
        return nash_conv(self.payoffs, self.mixed_strategies(profile))

    def correlated_deviation_payoffs(self, profiles: CorrelatedProfile) -> list[np.ndarray]:
        """Per agent, the expected payoff of each pure strategy when the other agents'
        policies are drawn together from ``profiles`` (the agent's own entries ignored)."""
        total = [np.zeros(self.payoffs.shape[1 + k]) for k in range(len(self._agents))]
        for profile, probability in profiles:
            strategies = [strategy_of(profile[a], self.payoffs.shape[1 + k]) if a in profile
                          else np.full(self.payoffs.shape[1 + k], 1.0 / self.payoffs.shape[1 + k])
                          for k, a in enumerate(self._agents)]
            for k, deviation in enumerate(deviation_payoffs(self.payoffs, strategies)):
                total[k] += probability * deviation
        weight = sum(p for _, p in profiles)
        return [t / weight for t in total]

    def correlated_best_response_value(self, agent: str, profiles: CorrelatedProfile) -> float:
        return float(self.correlated_deviation_payoffs(profiles)[self._agents.index(agent)].max())
