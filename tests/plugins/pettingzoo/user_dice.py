"""A game as a user would write it against PettingZoo's AEC API, with chance: dice poker.

Kuhn poker played with dice. Each player antes 1 and rolls a private die of ``faces``
faces (1 to ``faces``, uniformly; neither sees the other's). ``first`` checks or bets 1;
after a check ``second`` checks (showdown) or bets 1; facing a bet a player folds (the
other wins the pot) or calls (showdown). At the showdown the higher die wins the pot
(+1 after check-check, +2 after a called bet; the other loses as much); equal dice split
it (0 each). Rewards come only at the end; the game is zero-sum.

Actions: 0 fold, 1 check / call, 2 bet; the ``action_mask`` allows check and bet, or fold
and call when facing a bet. A player's observation is its die (one-hot, ``faces``) and
where the betting stands (one-hot: ``first`` to open, ``second`` after a check, ``second``
facing a bet, ``first`` facing a bet after checking, over): 2 * ``faces`` information
states per player (8 with 4 faces). Loaded with ``has_chance: true``, as
``module: user_dice:Dice``; ``reset(options={"dice": (a, b)})`` fixes the rolls (tests).

With 4 faces the game's value for ``first`` is -1/22 (:func:`equilibrium`, by linear
programming in sequence form; one equilibrium bluffs with a 1 and slow-plays a 4), and
uniform random play's exact NashConv is 13/16 (:func:`uniform_nash_conv`).
:func:`run_nash_conv` computes the exact NashConv of a popmarl run's final meta-strategy.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

FACES = 4
FOLD, CALL, BET = 0, 1, 2
N_ACTIONS = 3
LETTERS = "fcb"  # betting histories are strings of these, one per action
#: The decision nodes: the betting so far -> the player to act (0: first, 1: second).
NODES = {"": 0, "c": 1, "b": 1, "cb": 0}
TERMINALS = ("cc", "cbf", "cbc", "bf", "bc")
AGENTS = ("first", "second")


def legal(node: str) -> tuple[int, ...]:
    """The legal actions at a decision node: fold or call facing a bet, else check or bet."""
    return (FOLD, CALL) if node.endswith("b") else (CALL, BET)


def payoff(history: str, dice: tuple[int, int]) -> float:
    """``first``'s payoff at a terminal betting history with these dice (``second``'s is minus it)."""
    if history.endswith("f"):  # the player who folded loses their ante
        folder = NODES[history[:-1]]
        return 1.0 if folder == 1 else -1.0
    stake = 2.0 if "b" in history else 1.0
    return stake * float(np.sign(dice[0] - dice[1]))


class Dice(AECEnv):
    metadata = {"name": "dice_poker_v0", "is_parallelizable": False, "render_modes": []}

    def __init__(self, faces: int = FACES) -> None:
        super().__init__()
        self.faces = faces
        self.possible_agents = list(AGENTS)
        size = faces + len(NODES) + 1
        self.observation_spaces = {a: spaces.Dict({
            "observation": spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32),
            "action_mask": spaces.Box(0, 1, shape=(N_ACTIONS,), dtype=np.int8)}) for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(N_ACTIONS) for a in self.possible_agents}
        self._rng = np.random.default_rng()
        self.dice = (1, 1)
        self.history = ""

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        return observation(self.faces, self.dice[AGENTS.index(agent)], self.history)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if options and "dice" in options:
            self.dice = tuple(int(d) for d in options["dice"])  # type: ignore[assignment]
        else:
            self.dice = tuple(int(d) for d in self._rng.integers(1, self.faces + 1, size=2))  # type: ignore[assignment]
        self.history = ""
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = self.agents[0]

    def step(self, action: int) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if int(action) not in legal(self.history):
            raise ValueError(f"action {action} is illegal after {self.history!r}")
        self._cumulative_rewards[agent] = 0.0
        self.history += LETTERS[int(action)]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        if self.history in TERMINALS:
            won = payoff(self.history, self.dice)
            self.rewards = {"first": won, "second": -won}
            self.terminations = dict.fromkeys(self.agents, True)
            self.agent_selection = AGENTS[1 - AGENTS.index(agent)]
        else:
            self.agent_selection = AGENTS[NODES[self.history]]
        self._accumulate_rewards()


def observation(faces: int, die: int, history: str) -> dict[str, np.ndarray]:
    """What a player with ``die`` observes after the betting ``history`` (and its mask)."""
    vector = np.zeros(faces + len(NODES) + 1, np.float32)
    vector[die - 1] = 1.0
    vector[faces + (list(NODES).index(history) if history in NODES else len(NODES))] = 1.0
    mask = np.zeros(N_ACTIONS, np.int8)
    if history in NODES:
        mask[list(legal(history))] = 1
    return {"observation": vector, "action_mask": mask}


# -- exact analysis: the sequence form ----------------------------------------------------
#
# A player's information state is (its die, the betting node); a sequence is the empty
# one (None) or its last (information state, action) pair. A behaviour strategy is
# {information state: probabilities over the 3 actions}; its realization plan x gives each
# of the player's sequences its reach, and x^T A y is first's expected payoff, linear in
# each plan, so a mixture of policies is the mixture of their plans.

InfoState = tuple[int, str]
Sequence_ = tuple[InfoState, int] | None
Strategy = Mapping[InfoState, np.ndarray]


class SequenceForm:
    """The game's sequence form for ``faces``: each player's sequences and information
    states (parents first) and first's payoff matrix ``A`` over sequence pairs."""

    def __init__(self, faces: int = FACES) -> None:
        self.faces = faces
        self.infostates: list[list[InfoState]] = [
            [(d, node) for node, p in NODES.items() if p == player for d in range(1, faces + 1)] for player in (0, 1)]
        self.infostates = [sorted(states, key=lambda s: len(s[1])) for states in self.infostates]  # parents first
        self.sequences: list[list[Sequence_]] = [
            [None] + [(s, a) for s in states for a in legal(s[1])] for states in self.infostates]
        self.index = [{s: k for k, s in enumerate(seqs)} for seqs in self.sequences]
        self.parent = [{s: self.last_sequence(p, s[0], s[1]) for s in self.infostates[p]} for p in (0, 1)]
        self.A = np.zeros((len(self.sequences[0]), len(self.sequences[1])))
        chance = 1.0 / faces**2
        for d0, d1 in itertools.product(range(1, faces + 1), repeat=2):
            for h in TERMINALS:
                i, j = self.index[0][self.last_sequence(0, d0, h)], self.index[1][self.last_sequence(1, d1, h)]
                self.A[i, j] += chance * payoff(h, (d0, d1))

    @staticmethod
    def last_sequence(player: int, die: int, history: str) -> Sequence_:
        """``player``'s last (information state, action) along ``history``, or None."""
        last: Sequence_ = None
        for k, letter in enumerate(history):
            node = history[:k]
            if NODES[node] == player:
                last = ((die, node), LETTERS.index(letter))
        return last

    def plan(self, player: int, strategy: Strategy) -> np.ndarray:
        """The realization plan of a behaviour strategy."""
        x = np.zeros(len(self.sequences[player]))
        x[0] = 1.0
        for state in self.infostates[player]:
            reach = x[self.index[player][self.parent[player][state]]]
            for a in legal(state[1]):
                x[self.index[player][(state, a)]] = reach * float(strategy[state][a])
        return x

    def behaviour(self, player: int, plan: np.ndarray) -> dict[InfoState, np.ndarray]:
        """A behaviour strategy with this realization plan (uniform where it never plays)."""
        strategy = {}
        for state in self.infostates[player]:
            probs = np.zeros(N_ACTIONS)
            for a in legal(state[1]):
                probs[a] = max(plan[self.index[player][(state, a)]], 0.0)
            total = probs.sum()
            strategy[state] = probs / total if total > 1e-12 else uniform_at(state)
        return strategy

    def best_response_value(self, player: int, opponent_plan: np.ndarray) -> float:
        """``player``'s best-response value against the opponent's realization plan."""
        gain = self.A @ opponent_plan if player == 0 else -(self.A.T @ opponent_plan)
        value = gain.copy()
        for state in reversed(self.infostates[player]):  # children before parents
            best = max(value[self.index[player][(state, a)]] for a in legal(state[1]))
            value[self.index[player][self.parent[player][state]]] += best
        return float(value[0])

    def value(self, x: np.ndarray, y: np.ndarray) -> float:
        """first's expected payoff."""
        return float(x @ self.A @ y)

    def nash_conv(self, x: np.ndarray, y: np.ndarray) -> float:
        """The sum of both players' best-response gains (the values cancel: zero-sum)."""
        return self.best_response_value(0, y) + self.best_response_value(1, x)

    def constraints(self, player: int) -> np.ndarray:
        """E with E x = e_0 for realization plans: the root's reach is 1; each information
        state's sequences add up to its parent's reach."""
        rows = np.zeros((1 + len(self.infostates[player]), len(self.sequences[player])))
        rows[0, 0] = 1.0
        for r, state in enumerate(self.infostates[player], start=1):
            rows[r, self.index[player][self.parent[player][state]]] = -1.0
            for a in legal(state[1]):
                rows[r, self.index[player][(state, a)]] = 1.0
        return rows


def uniform_at(state: InfoState) -> np.ndarray:
    probs = np.zeros(N_ACTIONS)
    probs[list(legal(state[1]))] = 1.0 / len(legal(state[1]))
    return probs


def uniform_nash_conv(faces: int = FACES) -> float:
    form = SequenceForm(faces)
    x, y = (form.plan(p, {s: uniform_at(s) for s in form.infostates[p]}) for p in (0, 1))
    return form.nash_conv(x, y)


def _maximin(form: SequenceForm, player: int) -> tuple[np.ndarray, float]:
    """``player``'s equilibrium realization plan and value: max f^T q subject to E x = e,
    x >= 0, F^T q <= B^T x (B: the player's payoff matrix; q: the opponent's dual)."""
    from scipy.optimize import linprog

    payoffs = form.A if player == 0 else -form.A.T
    own, other = form.constraints(player), form.constraints(1 - player)
    nx, nq = own.shape[1], other.shape[0]
    cost = np.r_[np.zeros(nx), -1.0, np.zeros(nq - 1)]  # maximise q_0 (the root's row)
    result = linprog(cost, A_ub=np.hstack([-payoffs.T, other.T]), b_ub=np.zeros(other.shape[1]),
                     A_eq=np.hstack([own, np.zeros((own.shape[0], nq))]), b_eq=np.eye(own.shape[0])[0],
                     bounds=[(0, None)] * nx + [(None, None)] * nq)
    assert result.status == 0, result.message
    return result.x[:nx], float(result.x[nx])


def equilibrium(faces: int = FACES) -> tuple[dict[InfoState, np.ndarray], dict[InfoState, np.ndarray], float]:
    """A Nash equilibrium (first's and second's behaviour strategies) and first's value."""
    form = SequenceForm(faces)
    (x, value), (y, _) = _maximin(form, 0), _maximin(form, 1)
    return form.behaviour(0, x), form.behaviour(1, y), value


# -- a popmarl run's policies -------------------------------------------------------------


def reach_observation(faces: int, state: InfoState, player: int) -> dict[str, np.ndarray]:
    """The observation the env gives ``player`` at ``state``, by playing the env there
    (the opponent's die is 1: it is never seen)."""
    die, node = state
    game = Dice(faces)
    game.reset(options={"dice": (die, 1) if player == 0 else (1, die)})
    for letter in node:
        game.step(LETTERS.index(letter))
    assert game.agent_selection == AGENTS[player]
    return game.observe(AGENTS[player])


def policy_strategy(probabilities: Callable[[dict[str, np.ndarray]], np.ndarray], faces: int,
                    player: int) -> dict[InfoState, np.ndarray]:
    """A behaviour strategy from ``probabilities`` (observation -> action probabilities)."""
    strategy = {}
    for state in SequenceForm(faces).infostates[player]:
        probs = np.zeros(N_ACTIONS)
        row = np.asarray(probabilities(reach_observation(faces, state, player)), float)
        probs[list(legal(state[1]))] = row[list(legal(state[1]))]
        strategy[state] = probs / probs.sum()
    return strategy


def pools_nash_conv(env: Any, pools: Mapping[str, Any], faces: int = FACES) -> float:
    """The exact NashConv of each seat playing its pool's meta-strategy (``pools``: seat ->
    ``policies`` and ``mixture``, as :class:`popmarl.tools.loaded_run.Pool`); ``env``: the popmarl
    env, whose ``observe`` makes each policy's input from the game's observation."""
    form = SequenceForm(faces)
    plans = []
    for player, seat in enumerate(AGENTS):
        pool = pools[seat]
        plan = np.zeros(len(form.sequences[player]))
        for weight, policy in zip(pool.mixture, pool.policies):
            def probabilities(obs: dict[str, np.ndarray], policy: Any = policy, seat: str = seat) -> np.ndarray:
                return np.asarray(policy.probabilities(env.observe(seat, obs))[0])

            plan += float(weight) * form.plan(player, policy_strategy(probabilities, faces, player))
        plans.append(plan)
    return form.nash_conv(*plans)


def run_nash_conv(run: str | os.PathLike[str] | Any) -> float:
    """The exact NashConv of a popmarl run's final meta-strategy (a run directory, or a run
    :func:`popmarl.load_run` loaded), with the ``faces`` of the run's config."""
    from popmarl.tools.loaded_run import LoadedRun, load_run

    loaded = run if isinstance(run, LoadedRun) else load_run(run)
    faces = int(dict(loaded.config.env.params.get("kwargs") or {}).get("faces", FACES))
    return pools_nash_conv(loaded.env, loaded.pools, faces)
