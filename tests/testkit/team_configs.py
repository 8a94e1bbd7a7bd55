"""Configs of the torchrl plugin tests: small networks and budgets on mpe2's cooperative games."""

from __future__ import annotations

from typing import Any

SPREAD = {"name": "pettingzoo", "params": {"module": "mpe2.simple_spread_v3", "kwargs": {"N": 3, "max_cycles": 25}}}
SPEAKER_LISTENER = {"name": "pettingzoo", "params": {"module": "mpe2.simple_speaker_listener_v4"}}
#: Small and fast settings of each algorithm (the update paths of the defaults, fewer steps).
PARAMS: dict[str, dict[str, Any]] = {
    "mappo": {"hidden": [16], "critic_hidden": [16], "epochs": 2, "minibatches": 2},
    "vdn": {"hidden": [16], "batch_size": 32, "learning_starts": 100, "eps_decay_steps": 500},
    "qmix": {"hidden": [16], "batch_size": 32, "learning_starts": 100, "eps_decay_steps": 500, "mixing_embed_dim": 8},
    "masac": {"hidden": [16], "critic_hidden": [16], "batch_size": 32, "learning_starts": 50},
}


def marl_config(algorithm: str, env: dict[str, Any], mapping: str = "per_player", *, iterations: int = 2,
                env_steps: int = 600, seed: int = 0, **params: Any) -> dict[str, Any]:
    """A short ``marl`` run of ``algorithm`` (its small :data:`PARAMS`, then ``params``)."""
    return {"scenario": "marl", "seed": seed, "env": env, "agents": {"mapping": mapping},
            "algorithm": {"name": algorithm, "params": {**PARAMS[algorithm], **params}},
            "stopping": {"max_iterations": iterations},
            "training": {"max_env_steps": env_steps, "episodes_per_update": 4, "num_envs": 4},
            "evaluation": {"episodes_per_entry": 8}, "trackers": []}


def box(env: dict[str, Any]) -> dict[str, Any]:
    """``env`` with continuous (Box) actions."""
    params = env["params"]
    return {**env, "params": {**params, "kwargs": {**params.get("kwargs", {}), "continuous_actions": True}}}
