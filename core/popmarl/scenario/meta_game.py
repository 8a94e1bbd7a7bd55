"""The meta-game of the population scenarios, shared so that they keep and measure it alike.

psro and league checkpoint theirs as a payoff table and one meta-strategy per seat,
under fixed array names (``payoffs``, ``filled``, ``meta_<seat>``; a table that knows its
axes' policy ids also ``agents``, ``policy_ids_<seat>`` and ``digest``: the arrays of
``payoffs.npz``, which the checkpoint then commits in place of its own copy); a meta-strategy
stands for a mixed profile of the real game, whose NashConv (and, in two-player zero-sum
games, exploitability) every scenario reports where the env computes it exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from popmarl.data.population import AgentMapping
from popmarl.gametheory.payoffs import PayoffTable
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.interfaces.env import Env, ExactEnv, MixedProfile
from popmarl.interfaces.env import mixed_profile as live_mixed_profile
from popmarl.interfaces.policy import Policy


def table_arrays(table: PayoffTable) -> dict[str, np.ndarray]:
    """The checkpoint arrays of a payoff table: those of its ``payoffs.npz`` where it knows
    its axes' policy ids (:meth:`~popmarl.gametheory.payoffs.PayoffTable.file_arrays`),
    else ``payoffs`` and ``filled``."""
    if table.policy_ids is not None:
        return table.file_arrays()
    return {"payoffs": table.values, "filled": table.filled}


def meta_arrays(meta: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The checkpoint arrays of a per-seat meta-strategy."""
    return {f"meta_{k}": m for k, m in enumerate(meta)}


def read_table(arrays: Mapping[str, np.ndarray],
               agents: tuple[str, ...]) -> tuple[PayoffTable, tuple[np.ndarray, ...]]:
    """The payoff table (with its policy ids where the arrays hold them) and per-seat
    meta-strategy that :func:`table_arrays` and :func:`meta_arrays` wrote."""
    table = PayoffTable.from_arrays({k: v for k, v in arrays.items() if k != "agents"}, agents)
    return table, tuple(arrays[f"meta_{k}"] for k in range(len(agents)))


def seat_meta_strategy(agents: Sequence[str], axis_ids: Sequence[Sequence[str]],
                       meta: Sequence[np.ndarray]) -> MetaStrategy:
    """A per-seat meta-strategy over the table's axes: seat ``agents[k]`` mixes the
    policy ids ``axis_ids[k]`` with ``meta[k]``."""
    return MetaStrategy.independent({agent: (axis_ids[k], meta[k]) for k, agent in enumerate(agents)})


def mixed_profile(agents: Sequence[str], axis_ids: Sequence[Sequence[str]], meta: Sequence[np.ndarray],
                  policies: Mapping[str, Policy]) -> MixedProfile:
    """The real game's mixed profile a meta-strategy stands for: per seat, its policies
    (``axis_ids``, the table's axes) with positive weight."""
    return live_mixed_profile(seat_meta_strategy(agents, axis_ids, meta), policies.__getitem__)


def population_meta(meta: Sequence[np.ndarray], mapping: AgentMapping, agents: Sequence[str],
                    population: str) -> np.ndarray:
    """A population's meta-strategy: the mean of its seats' mixtures."""
    return np.mean([meta[k] for k, a in enumerate(agents) if mapping.population_of[a] == population], axis=0)


def exact_env(env: Env) -> ExactEnv | None:
    """``env`` where it computes NashConv and best responses exactly, else None."""
    return env if isinstance(env, ExactEnv) and env.supports_exact() else None


def exact_nash_conv(env: Env, profile: MixedProfile) -> float | None:
    """NashConv of ``profile`` in the real game, where the env computes it exactly."""
    exact = exact_env(env)
    return float(exact.nash_conv(profile)) if exact is not None else None


def exploitability(env: Env, nash_conv: float | None) -> float | None:
    """Half the NashConv in a two-player zero-sum game; None in any other."""
    if nash_conv is None or len(env.agents) != 2 or not getattr(env, "zero_sum", False):
        return None
    return nash_conv / 2
