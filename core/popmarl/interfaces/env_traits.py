"""What a game is like, from what it declares and what random play shows: the facts that
defaults may follow (never the env's name).

Declared (:class:`~popmarl.interfaces.env.Env` attributes): whether chance takes part, whether the
seats move at once, whether it is two-player zero-sum. Observed, in uniformly random
play over a few hundred games of the env itself (seeded, so a resumed run and a Ray
worker measure the same): how many env steps (decisions) a game lasts, whether rewards
come only when a game ends, and whether seats move at once (two seats of one game asked
in the same step: e.g. a PettingZoo Parallel env, which cannot declare it). :func:`traits_of` computes them once per env object
(under a second, the longest for long games with simultaneous moves such as MPE's).
"""

from __future__ import annotations

import functools
import weakref

import attrs
import numpy as np

from popmarl.interfaces.env import Env
from popmarl.interfaces.policy import masked_uniform
from popmarl.interfaces.spaces import Discrete

#: Random games played to measure an env (fewer, at least :data:`NUM_ENVS`, once
#: :data:`ENOUGH_STEPS` decisions are counted), and the vector they are played in.
GAMES = 256
NUM_ENVS = 64
ENOUGH_STEPS = 5_000
#: A game whose seats each make at least this many decisions per game under random play
#: is "long": credit from its end reaches early moves slowly (n-step returns and a
#: discount help a value learner; ``dqn``'s defaults follow it).
LONG_GAME_DECISIONS = 8.0

#: Traits by env object id, with a weak reference to the env (any env: an unhashable one too).
_MEASURED: dict[int, tuple[weakref.ref[Env], EnvTraits]] = {}


@attrs.frozen(kw_only=True)
class EnvTraits:
    """What defaults may depend on (see the module docstring). ``episode_steps``: mean env
    steps (decisions, every seat's) per game under uniformly random play;
    ``terminal_rewards``: no reward came before a game's end in those games;
    ``num_actions``: the largest discrete action count (None: continuous actions)."""

    seats: int
    has_chance: bool
    simultaneous: bool
    zero_sum: bool
    num_actions: int | None
    episode_steps: float
    terminal_rewards: bool

    @property
    def decisions_per_seat(self) -> float:
        """Mean decisions each seat makes per game under random play."""
        return self.episode_steps / max(self.seats, 1)

    @property
    def long_deterministic(self) -> bool:
        """A turn-based game without chance whose seats make many decisions per game
        (:data:`LONG_GAME_DECISIONS`): board games such as connect four."""
        return not self.has_chance and not self.simultaneous and self.decisions_per_seat >= LONG_GAME_DECISIONS

    def describe(self) -> str:
        """One line for a run's log."""
        return (f"{self.seats} seats, {'chance' if self.has_chance else 'no chance'}, "
                f"{'simultaneous' if self.simultaneous else 'turn-based'}, "
                f"{self.episode_steps:.1f} env steps per random game, "
                f"{'rewards at the end' if self.terminal_rewards else 'rewards during play'}"
                + (f", {self.num_actions} actions" if self.num_actions is not None else ", continuous actions"))


def traits_of(env: Env, *, seed: int = 0) -> EnvTraits:
    """``env``'s traits, measured once per env object (see the module docstring)."""
    key = id(env)
    entry = _MEASURED.get(key)
    if entry is not None and entry[0]() is env:
        return entry[1]
    traits = measure(env, seed=seed)
    try:
        _MEASURED[key] = (weakref.ref(env, functools.partial(_forget, key)), traits)
    except TypeError:  # an env that takes no weak reference: measured each time
        pass
    return traits


def _forget(key: int, _gone: object) -> None:
    _MEASURED.pop(key, None)


def measure(env: Env, *, seed: int = 0, games: int = GAMES) -> EnvTraits:
    """Play ``games`` uniformly random games of ``env`` and read its traits."""
    rng = np.random.default_rng(seed)
    spaces = {agent: env.action_space(agent) for agent in env.agents}
    num_envs = min(NUM_ENVS, games)
    vector = env.vector(num_envs=num_envs, seed=seed)
    steps = finished = 0  # of finished games only
    ongoing_steps = np.zeros(num_envs, dtype=np.int64)
    terminal, together = True, False
    try:
        step = vector.reset()
        while finished < games and not (finished >= num_envs and steps >= ENOUGH_STEPS):
            actions = {}
            asked = [ids for ids, _ in step.decisions.values()]
            together = together or (len(asked) > 1 and len(np.unique(np.concatenate(asked))) < sum(map(len, asked)))
            for agent, (ids, batch) in step.decisions.items():
                np.add.at(ongoing_steps, ids, 1)
                space = spaces[agent]
                if isinstance(space, Discrete):
                    probs = masked_uniform(batch.mask, len(batch), space.n)
                    actions[agent] = (probs.cumsum(axis=1) > rng.random((len(batch), 1))).argmax(axis=1)
                else:
                    actions[agent] = space.sample(rng, n=len(batch))
            if not actions:
                raise RuntimeError(f"env {type(env).__name__}: a game asked no seat to act and did not end")
            step = vector.step(actions)
            ended = np.asarray(step.finished, dtype=int)
            ongoing = np.ones(len(step.rewards), dtype=bool)
            ongoing[ended] = False
            terminal = terminal and not np.any(step.rewards[ongoing] != 0)
            steps += int(ongoing_steps[ended].sum())
            ongoing_steps[ended] = 0
            finished += len(ended)
    finally:
        vector.close()
    discrete = [s.n for s in spaces.values() if isinstance(s, Discrete)]
    return EnvTraits(seats=len(env.agents), has_chance=env.has_chance, simultaneous=env.simultaneous or together,
                     zero_sum=env.zero_sum, num_actions=max(discrete) if len(discrete) == len(spaces) else None,
                     episode_steps=steps / max(finished, 1), terminal_rewards=terminal)


__all__ = ["EnvTraits", "LONG_GAME_DECISIONS", "measure", "traits_of"]
