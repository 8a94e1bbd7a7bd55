"""Exact best responses: a best-response question answered by a population's algorithm.

An algorithm that answers exactly (``exact_br``: it sets
:attr:`~popmarl.interfaces.algorithm.Algorithm.answers`) computes its policy from the
opponents alone: no learner, trainer, progress or weight copies are involved. Backends
run :func:`answer` for each :class:`~popmarl.data.tasks.BestResponseTask`
(:meth:`~popmarl.interfaces.backend.Backend.best_respond`), the one way a scenario asks
for an exact answer; a train task trains.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.interfaces.env import correlated_profile, mixed_profile
from popmarl.interfaces.policy import Policy
from popmarl.data.policies import FrozenPolicy, Weights
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import BestResponseResult, BestResponseTask

PolicyOf = Callable[[str], Policy]


def answer(agent: PopulationAlgorithm, task: BestResponseTask, policy_of: PolicyOf) -> BestResponseResult:
    """``task`` answered by ``agent``'s algorithm (None: it declined), frozen as its snapshot."""
    start = time.monotonic()
    weights = exact_answer(agent, task.opponents, seed=task.seed, policy_of=policy_of)
    policy = None if weights is None else FrozenPolicy(spec=task.snapshot, weights=weights)
    return BestResponseResult(policy=policy, seconds=time.monotonic() - start)


def exact_answer(agent: PopulationAlgorithm, opponents: MetaStrategy, *, seed: int, policy_of: PolicyOf) -> Weights | None:
    """The weights of ``agent``'s exact best response to ``opponents``: the seats drawn
    alone as mixtures, its joint seats as a correlated distribution (None: the algorithm
    declined, e.g. the game is too large)."""
    policy = agent.best_response(mixed_profile(opponents, policy_of), seed=seed,
                                 correlated=correlated_profile(opponents, policy_of))
    return None if policy is None else policy.get_weights()
