"""Env wrappers that watch every step, for the pettingzoo plugin tests.

A guard wraps a real PettingZoo env and, independently of the plugin, checks that every
live action is legal under the mask the env shows, that dead agents get ``None``, and
sums the env's own per-step ``rewards`` into episode totals. Guarded envs are put into a
throwaway module (``pz_guard``) so configs can name them: ``module: "pz_guard:tictactoe"``.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping
from typing import Any

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper

#: name in ``pz_guard`` -> (env module, api)
GUARDED = {
    "tictactoe": ("pettingzoo.classic.tictactoe_v3", "aec"),
    "connect_four": ("pettingzoo.classic.connect_four_v3", "aec"),
    "leduc": ("pettingzoo.classic.leduc_holdem_v4", "aec"),
    "rps": ("pettingzoo.classic.rps_v2", "parallel"),
    "kaz": ("pettingzoo.butterfly.knights_archers_zombies_v11", "aec"),
    "spread": ("mpe2.simple_spread_v3", "parallel"),
    "spread_aec": ("mpe2.simple_spread_v3", "aec"),
    "adversary": ("mpe2.simple_adversary_v3", "parallel"),
}


class Ledger:
    """What every guarded instance saw: its episodes (agent -> summed reward, truncated,
    live steps), rule violations, and how many agents left while others played on."""

    def __init__(self) -> None:
        self.instances: list[Any] = []
        self.violations: list[str] = []
        self.left_early = 0

    def episodes(self) -> list[tuple[dict[str, float], bool, int]]:
        return [e for guard in self.instances for e in guard.episodes]


class _Episodes:
    """Per-instance episode totals, flushed at the natural end or when reset cuts it off."""

    def _begin(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.episodes: list[tuple[dict[str, float], bool, int]] = []
        self._totals: dict[str, float] = {}
        self._steps = 0
        self._truncated = False
        ledger.instances.append(self)

    def _add(self, rewards: Mapping[str, float]) -> None:
        for agent, reward in rewards.items():
            self._totals[agent] = self._totals.get(agent, 0.0) + float(reward)

    def _flush(self, *, cut: bool) -> None:
        if self._steps:
            self.episodes.append((dict(self._totals), self._truncated or cut, self._steps))
        self._totals, self._steps, self._truncated = {}, 0, False

    def _check(self, agent: str, action: Any, mask: np.ndarray | None) -> None:
        if action is None:
            self.ledger.violations.append(f"{agent}: None for a live agent")
        elif mask is not None and not mask[int(action)]:
            self.ledger.violations.append(f"{agent}: illegal action {action} (mask {mask.tolist()})")


class AECGuard(_Episodes, BaseWrapper):  # type: ignore[misc]
    def __init__(self, env: Any, ledger: Ledger) -> None:
        BaseWrapper.__init__(self, env)
        self._begin(ledger)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._flush(cut=True)
        self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> None:
        raw = self.env.unwrapped
        agent = raw.agent_selection
        if raw.terminations[agent] or raw.truncations[agent]:
            if action is not None:
                self.ledger.violations.append(f"{agent}: action {action} for a dead agent")
            self._truncated |= bool(raw.truncations[agent] and not raw.terminations[agent])
            if raw.terminations[agent] and any(
                    not (raw.terminations[a] or raw.truncations[a]) for a in raw.agents):
                self.ledger.left_early += 1
        else:
            obs = self.env.observe(agent)
            info = raw.infos.get(agent, {})
            mask = obs["action_mask"] if isinstance(obs, dict) and "action_mask" in obs else info.get("action_mask")
            self._check(agent, action, mask)
            self._steps += 1
        self.env.step(action)
        self._add(raw.rewards)
        if not raw.agents:
            self._flush(cut=False)


class ParallelGuard(_Episodes, BaseParallelWrapper):  # type: ignore[misc]
    def __init__(self, env: Any, ledger: Ledger) -> None:
        BaseParallelWrapper.__init__(self, env)
        self._begin(ledger)
        self._last: tuple[Any, Any] = ({}, {})

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self._flush(cut=True)
        obs, infos = self.env.reset(seed=seed, options=options)
        self._last = (obs, infos)
        return obs, infos

    def step(self, actions: dict[str, Any]) -> Any:
        obs_before, infos_before = self._last
        if set(actions) != set(self.env.agents):
            self.ledger.violations.append(f"actions for {sorted(actions)}, live agents {sorted(self.env.agents)}")
        for agent, action in actions.items():
            o, info = obs_before.get(agent), infos_before.get(agent) or {}
            mask = o["action_mask"] if isinstance(o, dict) and "action_mask" in o else info.get("action_mask")
            self._check(agent, action, mask)
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        self._steps += 1
        self._add(rewards)
        self._truncated |= any(t and not terminations.get(a, False) for a, t in truncations.items())
        self._last = (obs, infos)
        if not self.env.agents:
            self._flush(cut=False)
        return obs, rewards, terminations, truncations, infos


def guarded_module(ledger: Ledger) -> types.ModuleType:
    """A module with one ``env()`` / ``parallel_env()`` holder per :data:`GUARDED` entry."""
    module = types.ModuleType("pz_guard")
    for name, (path, api) in GUARDED.items():
        def make(*, _path: str = path, _api: str = api, **kwargs: Any) -> Any:
            target = importlib.import_module(_path)
            if _api == "aec":
                return AECGuard(target.env(**kwargs), ledger)
            return ParallelGuard(target.parallel_env(**kwargs), ledger)
        holder = types.SimpleNamespace(**{("env" if api == "aec" else "parallel_env"): make})
        setattr(module, name, holder)
    return module


def random_actions(env: Any, step: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Uniformly random legal actions for every decision of ``step``."""
    actions = {}
    for agent, (_, batch) in step.decisions.items():
        space = env.action_space(agent)
        rows = [space.sample(rng, None if batch.mask is None else batch.mask[r]) for r in range(len(batch))]
        actions[agent] = np.asarray(rows)
    return actions
