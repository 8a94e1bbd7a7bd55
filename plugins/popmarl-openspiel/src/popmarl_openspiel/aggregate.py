"""Reading policies off at every information state, and collapsing mixtures of them.

A mixture of policies ``sum_i w_i pi_i`` is realization-equivalent to one behavioural
policy: at information state ``I`` it plays ``a`` with probability proportional to
``sum_i w_i r_i(I) pi_i(a|I)``, ``r_i(I)`` being the player's own reach of ``I`` under
``pi_i`` -- exactly OpenSpiel's ``PolicyAggregator``, here as a weighted sum of
realization plans (not a per-state average, which would be wrong).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from popmarl.api import ExplicitPolicy, Observations, Policy
from popmarl_openspiel.sequence_form import behaviour, realization_plan
from popmarl_openspiel.tree import InfoStates


def policy_table(policy: Policy, infostates: InfoStates, agent: str, num_actions: int) -> np.ndarray:
    """``[n, A]`` action probabilities of ``policy`` at each of ``infostates``: an explicit
    policy's probabilities, else the deterministic choice it makes when evaluated
    (``act(explore=False)``), one batched call either way."""
    batch = Observations(obs=infostates.obs, mask=infostates.mask, keys=infostates.keys, agent=agent)
    if len(infostates) == 0:
        return np.zeros((0, num_actions))
    if isinstance(policy, ExplicitPolicy):
        probs = np.asarray(policy.probabilities(batch), dtype=float).reshape(len(infostates), num_actions)
    else:
        actions = np.asarray(policy.act(batch, explore=False, rng=np.random.default_rng(0)), dtype=np.int64)
        probs = np.eye(num_actions)[actions.reshape(-1)]
    probs = probs * infostates.mask
    total = probs.sum(axis=1, keepdims=True)
    if np.any(total <= 0):
        raise ValueError(f"{type(policy).__name__} puts no probability on any legal action at some "
                         f"information state of {agent}")
    return np.asarray(probs / total)


def mixture_plan(plans: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """The realization plan of a mixture: the weighted sum of the members' plans."""
    w = np.asarray(weights, dtype=float)
    if w.size == 0 or w.sum() <= 0:
        raise ValueError("a mixture needs at least one policy with positive weight")
    return np.asarray(np.stack(plans, axis=1) @ (w / w.sum()))


def aggregate(tables: Sequence[np.ndarray], weights: Sequence[float], infostates: InfoStates,
              num_actions: int) -> np.ndarray:
    """The behaviour ``[n, A]`` equivalent to playing ``tables[i]`` with probability
    ``weights[i]`` (chosen once per episode)."""
    plans = [realization_plan(t, infostates, num_actions) for t in tables]
    return behaviour(mixture_plan(plans, weights), infostates, num_actions)
