"""Env ``pettingzoo``: any PettingZoo AEC or Parallel env, by import path, as a popmarl env.

The env's ``possible_agents`` are popmarl's agents (payoff-table order); agents may join
and leave during an episode. ``max_steps`` cuts episodes off (truncated): AEC games count
each agent action, Parallel games each joint step. Env-native limits such as MPE's
``max_cycles`` go in ``kwargs`` and are reported as truncation too.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import gymnasium.spaces as gs
import numpy as np
from popmarl.api import Box, ConfigError, Discrete, Env, Observations, VectorEnv

from popmarl_pettingzoo.loading import (MODULE, Api, choose_factory, construct, default_path, import_target,
                                       registered)
from popmarl_pettingzoo.match import PettingZooMatch
from popmarl_pettingzoo.spaces import MASK_KEY, ActionCodec, ObservationCodec, box_of, mask_source
from popmarl_pettingzoo.vector import AECVector, ParallelVector

_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?")


def _import_path(_: object, __: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not _IMPORT_PATH.fullmatch(value):
        raise ValueError(f"must be an import path such as pettingzoo.classic.connect_four_v3 or package.module:attr, got {value!r}")


def _absolute(directories: list[str] | None) -> list[str] | None:
    return None if directories is None else [os.path.abspath(d) for d in directories]


@attrs.frozen(kw_only=True)
class PettingZooConfig:
    """``module``: the env module (``env()`` = AEC, ``parallel_env()`` = Parallel) or
    ``module:attr``; ``path``: directories ``module`` is imported from before the installed
    packages (as PYTHONPATH), made absolute (relative ones from the current directory) so
    that other processes, ``--resume`` and ``popmarl eval`` find it; default: the current
    directory (unset or null), for a module that is not installed (a user's own), else none; ``kwargs``:
    passed to the constructor; ``api``: which constructor
    (``auto`` prefers ``parallel_env``); ``max_steps``: truncate episodes after this many
    steps; ``flatten``: Box observations as 1-D vectors (else they keep their shape);
    ``has_chance``: whether chance takes part in play (dice, shuffled cards, random
    starts) — PettingZoo cannot tell, so the game's author says so; it sets
    :attr:`popmarl.api.Env.has_chance`, and a ``psro`` best response then trains against
    its opponents' policies as they are (no opponent exploration unless ``training``
    sets one)."""

    module: str = attrs.field(default="pettingzoo.classic.connect_four_v3", validator=_import_path)
    path: list[str] | None = attrs.field(default=None, converter=_absolute)
    kwargs: dict[str, Any] = attrs.field(factory=dict)
    api: Literal["auto", "aec", "parallel"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "aec", "parallel")))
    max_steps: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.ge(1)))
    flatten: bool = True
    has_chance: bool = False

    def __attrs_post_init__(self) -> None:
        if self.path is None:  # unset or null: decided here, in the process that reads the config
            object.__setattr__(self, "path", default_path(self.module))


class PettingZooEnv(Env):
    """A PettingZoo env; :meth:`vector` makes N instances stepped in batches. A closed
    vector's instances are kept and reused by the next one (every copy is reset with
    its new seed before it plays): making PettingZoo envs (their spaces, wrappers) costs
    more than a short batch of episodes."""

    Config = PettingZooConfig
    config: PettingZooConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        cfg = self.config
        self.has_chance = cfg.has_chance
        target = registered(cfg.module) or import_target(cfg.module, cfg.path or ())
        factory, self.api = choose_factory(target, cfg.module, cfg.api)
        self._make = functools.partial(construct, factory, self.api, cfg.kwargs, cfg.module)
        probe = self._make()
        try:
            self._agents, self._observations, self._actions = _describe(probe, self.api, cfg.flatten, cfg.module)
            self.state_space = _state_space(probe, cfg.flatten)
        finally:
            probe.close()
        self._idle: list[Any] = []

    def _copy(self) -> Any:
        return self._idle.pop() if self._idle else self._make()

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        """Pickle as the config; the env is rebuilt (and its module imported) on load."""
        return functools.partial(type(self), config=self.config), ()

    @property
    def agents(self) -> tuple[str, ...]:
        return self._agents

    def observation_space(self, agent: str) -> Box:
        return self._observations[agent].space

    def action_space(self, agent: str) -> Discrete | Box:
        return self._actions[agent].space

    def observe(self, agent: str, observation: object, action_mask: np.ndarray | None = None) -> Observations:
        """``agent``'s batch for one PettingZoo observation: the dict the env gives (with
        its mask), or its observation array with ``action_mask``."""
        if agent not in self._observations:
            raise ValueError(f"agent {agent!r}: not an agent of {self.config.module}; its agents: {', '.join(self._agents)}")
        return self._observations[agent].one(observation, action_mask)

    def match(self, seat: str, *, seed: int) -> PettingZooMatch:
        """A game for a person in ``seat`` (``popmarl play``)."""
        return PettingZooMatch(make=self._make, api=self.api, module=self.config.module, agents=self._agents,
                               observations=self._observations, actions=self._actions,
                               max_steps=self.config.max_steps, seat=seat, seed=seed)

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        cls = AECVector if self.api == "aec" else ParallelVector
        return cls(make=self._copy, agents=self._agents, observations=self._observations, actions=self._actions,
                   num_envs=num_envs, seed=seed, max_steps=self.config.max_steps, release=self._idle.extend,
                   state_shape=None if self.state_space is None else self.state_space.shape)


def _state_space(env: Any, flatten: bool) -> Box | None:
    """The global state's space, where the env implements ``state()`` (read once from a
    freshly reset env: ``_describe`` reset it), else None. Its ``state_space`` gives the
    bounds where it is a Box; 1-D when ``flatten``."""
    state_of = getattr(env, "state", None)
    if not callable(state_of):  # e.g. rps_v2 keeps a dict named state
        return None
    try:
        state = np.asarray(state_of(), dtype=np.float32)
    except (NotImplementedError, AttributeError, TypeError, ValueError):
        return None
    shape = (int(state.size),) if flatten else state.shape
    declared = getattr(env, "state_space", None)
    if isinstance(declared, gs.Box) and declared.shape == state.shape:
        return box_of(declared, shape)
    return Box(shape=shape, low=-np.inf, high=np.inf)


def _describe(env: Any, api: Api, flatten: bool, path: str) -> tuple[
        tuple[str, ...], dict[str, ObservationCodec], dict[str, ActionCodec]]:
    """The agents and their codecs, from a freshly made env (reset once to read infos)."""
    if api == "aec":
        env.reset(seed=0)
        infos: Mapping[str, Any] = env.infos
    else:
        _, infos = env.reset(seed=0)
    agents = tuple(env.possible_agents)
    if not agents:
        raise ConfigError(f"{MODULE}: {path} has no possible_agents")
    odd = [a for a in agents if not isinstance(a, str)]
    if odd:
        raise ConfigError(f"{MODULE}: {path} has non-string agent ids {odd!r}; popmarl names agents by strings")
    in_info = any(isinstance(infos.get(a), Mapping) and MASK_KEY in infos[a] for a in agents)
    actions = {a: ActionCodec(a, env.action_space(a)) for a in agents}
    observations = {}
    for agent in agents:
        space = env.observation_space(agent)
        act = actions[agent].space
        n_actions = act.n if isinstance(act, Discrete) else None
        observations[agent] = ObservationCodec(agent, space, mask_source=mask_source(space, in_info=in_info),
                                               n_actions=n_actions, flatten=flatten)
    return agents, observations, actions
