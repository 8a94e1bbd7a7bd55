"""``popmarl bench rollout``: evaluate-mode throughput of the rollout engine.

Freshly initialised policies of ``--algorithm`` (default ``dqn``, an MLP of ``--hidden``
units) play every population, greedy and masked, on ``--num-envs`` games of an env;
the figure is env steps (decisions) per second.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import yaml

from popmarl.config.schema import ComponentConfig
from popmarl.errors import ConfigError
from popmarl.interfaces.policy import Policy
from popmarl.data.population import AgentMapping
from popmarl.engine.rollout import RolloutWorker
from popmarl.runs.runner import build, policy_spaces


@attrs.frozen(kw_only=True)
class BenchResult:
    env: str
    algorithm: str
    num_envs: int
    env_steps: int
    episodes: int
    seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / self.seconds if self.seconds > 0 else 0.0


def parse_params(items: Sequence[str], flag: str) -> dict[str, Any]:
    """``K=V`` pairs (YAML-typed values) into a mapping."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag}: expected KEY=VALUE, got {item!r}")
        try:
            params[key] = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ConfigError(f"{flag} {key}: value is not valid YAML") from None
    return params


def bench_rollout(*, env_name: str, env_params: Mapping[str, Any], algorithm_name: str,
                  algorithm_params: Mapping[str, Any], num_envs: int, steps: int, seed: int = 0,
                  warmup_steps: int = 1000) -> BenchResult:
    """Time evaluate-mode rollouts of fresh policies until ``steps`` decisions."""
    env = build("envs", ComponentConfig(name=env_name, params=dict(env_params)), "--env-param")
    algorithm = build("algorithms", ComponentConfig(name=algorithm_name, params=dict(algorithm_params)),
                      "--algorithm-param")
    mapping = AgentMapping.resolve("per_player", env.agents)
    spaces = policy_spaces(env, mapping)
    policies = {p: algorithm.make_policy(space=s, seed=seed + k) for k, (p, s) in enumerate(spaces.items())}
    profile: dict[str, Policy] = {a: policies[mapping.population_of[a]] for a in env.agents}
    worker = RolloutWorker(env=env, num_envs=num_envs)

    def until(limit: int):  # type: ignore[no-untyped-def]
        return lambda taken: None if taken >= limit else (profile, None)

    worker.run(until(warmup_steps), seed=seed, explore=False)
    start = time.perf_counter()
    result = worker.run(until(steps), seed=seed + 1, explore=False)
    seconds = time.perf_counter() - start
    return BenchResult(env=env_name, algorithm=algorithm_name, num_envs=num_envs, env_steps=result.env_steps,
                       episodes=len(result.tags), seconds=seconds)
