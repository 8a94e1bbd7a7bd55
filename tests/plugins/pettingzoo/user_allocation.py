"""A game as a user would write it against PettingZoo's Parallel API: Colonel Blotto, one shot.

Each of two players splits ``soldiers`` soldiers over ``fields`` battlefields (every
split is one action: 21 of them for 5 soldiers on 3 fields, in :func:`allocations`' order),
both at once; a field goes to whoever sent more soldiers there (neither, on a tie), and
the player who wins more fields wins the game: +1, the other -1, 0 on a tie. The
observation is a constant (the game is one decision long). Registered in a run config
as ``module: user_allocation:Allocation``.

With 5 soldiers on 3 fields the game's value is 0 and its equilibria mix (e.g. 1/4 each on
(1,1,3), (1,3,1), (3,0,2), (3,2,0)); uniform play's exact NashConv is 4/7: (1,2,2) wins
against it 2/7 more often than it loses, in either seat. :func:`run_nash_conv` computes
the exact NashConv of a popmarl run's final meta-strategy.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

SOLDIERS = 5
FIELDS = 3


def allocations(soldiers: int = SOLDIERS, fields: int = FIELDS) -> list[tuple[int, ...]]:
    """Every split of ``soldiers`` over ``fields`` fields, in action order (lexicographic)."""
    return [a for a in itertools.product(range(soldiers + 1), repeat=fields) if sum(a) == soldiers]


def outcome(mine: tuple[int, ...], theirs: tuple[int, ...]) -> int:
    """+1 if ``mine`` wins more fields than ``theirs``, -1 if fewer, 0 if as many."""
    return int(np.sign(sum(int(np.sign(m - t)) for m, t in zip(mine, theirs))))


class Allocation(ParallelEnv):
    metadata = {"name": "allocation_v0", "render_modes": []}

    def __init__(self, soldiers: int = SOLDIERS, fields: int = FIELDS) -> None:
        self.soldiers, self.fields = soldiers, fields
        self.splits = allocations(soldiers, fields)
        self.possible_agents = ["red", "blue"]
        self.agents: list[str] = []
        self.observation_spaces = {a: spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32) for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(len(self.splits)) for a in self.possible_agents}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def _observations(self) -> dict[str, np.ndarray]:
        return {a: np.ones(1, np.float32) for a in self.agents}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[
            dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        self.agents = list(self.possible_agents)
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, bool],
                                                     dict[str, bool], dict[str, dict[str, Any]]]:
        red, blue = (self.splits[int(actions[a])] for a in self.possible_agents)
        won = float(outcome(red, blue))
        observations = self._observations()
        rewards = {"red": won, "blue": -won}
        terminations = dict.fromkeys(self.agents, True)
        truncations = dict.fromkeys(self.agents, False)
        infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agents = []
        return observations, rewards, terminations, truncations, infos


# -- exact analysis ---------------------------------------------------------------------


def payoff_matrix(soldiers: int = SOLDIERS, fields: int = FIELDS) -> np.ndarray:
    """``A[i, j]``: red's payoff when red plays split ``i`` and blue split ``j`` (blue's is -A)."""
    splits = allocations(soldiers, fields)
    return np.array([[outcome(r, b) for b in splits] for r in splits], dtype=float)


def nash_conv(red: np.ndarray, blue: np.ndarray, matrix: np.ndarray) -> float:
    """The NashConv of mixed strategies ``red`` and ``blue``: each player's best-response
    gain, summed (the values cancel: zero-sum)."""
    return float((matrix @ blue).max() - (red @ matrix).min())


def uniform_nash_conv(soldiers: int = SOLDIERS, fields: int = FIELDS) -> float:
    matrix = payoff_matrix(soldiers, fields)
    uniform = np.full(len(matrix), 1.0 / len(matrix))
    return nash_conv(uniform, uniform, matrix)


def equilibrium(soldiers: int = SOLDIERS, fields: int = FIELDS) -> tuple[np.ndarray, np.ndarray, float]:
    """A Nash equilibrium (red's and blue's mixed strategies) and red's value, by linear programming."""
    from scipy.optimize import linprog

    matrix = payoff_matrix(soldiers, fields)

    def maximin(a: np.ndarray) -> tuple[np.ndarray, float]:  # max v s.t. x^T a >= v, x in the simplex
        m, n = a.shape
        result = linprog(np.r_[np.zeros(m), -1.0], A_ub=np.hstack([-a.T, np.ones((n, 1))]), b_ub=np.zeros(n),
                         A_eq=np.r_[np.ones(m), 0.0][None], b_eq=[1.0], bounds=[(0, None)] * m + [(None, None)])
        assert result.status == 0, result.message
        x = np.clip(result.x[:m], 0.0, None)
        return x / x.sum(), float(result.x[-1])

    red, value = maximin(matrix)
    blue, _ = maximin(-matrix.T)
    return red, blue, value


def policy_mixture(pool: Any, env: Any, seat: str, observation: np.ndarray) -> np.ndarray:
    """A seat's mixed strategy: its pool's policies' action probabilities at ``observation``,
    weighted by the meta-strategy (in a one-shot game the mixture is the mixed strategy)."""
    batch = env.observe(seat, observation)
    probs = sum(w * np.asarray(p.probabilities(batch), float)[0] for w, p in zip(pool.mixture, pool.policies))
    return np.asarray(probs) / np.sum(probs)


def run_nash_conv(run: str | os.PathLike[str] | Any) -> float:
    """The exact NashConv of a popmarl run's final meta-strategy (a run directory, or a run
    :func:`popmarl.load_run` loaded) on this game, with the kwargs of the run's config."""
    from popmarl.tools.loaded_run import LoadedRun, load_run

    loaded = run if isinstance(run, LoadedRun) else load_run(run)
    kwargs = dict(loaded.config.env.params.get("kwargs") or {})
    game = Allocation(**kwargs)
    observations, _ = game.reset(seed=0)
    red, blue = (policy_mixture(loaded.pools[seat], loaded.env, seat, observations[seat]) for seat in game.possible_agents)
    return nash_conv(red, blue, payoff_matrix(game.soldiers, game.fields))
