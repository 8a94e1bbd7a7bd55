"""Exact best responses: a best-response question answered by a population's algorithm.

An algorithm that answers exactly (``exact_br``: it overrides
:meth:`~popmarl.interfaces.algorithm.Algorithm.best_response`) computes its policy from the
opponents alone: no learner, trainer, progress or weight copies are involved. Backends
run :func:`answer` for each :class:`~popmarl.data.tasks.BestResponseTask`
(:meth:`~popmarl.interfaces.backend.Backend.best_respond`); :func:`popmarl.engine.learner_loop.run_task` uses
:func:`exact_answer` for a train task's learner whose algorithm answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from popmarl.interfaces.agent import AgentInterface
from popmarl.interfaces.env import CorrelatedProfile, MixedProfile
from popmarl.interfaces.policy import Policy
from popmarl.data.policies import FrozenPolicy, Weights
from popmarl.data.tasks import BestResponseResult, BestResponseTask, JointOpponents, Opponents

PolicyOf = Callable[[str], Policy]


def answer(agent: AgentInterface, task: BestResponseTask, policy_of: PolicyOf) -> BestResponseResult:
    """``task`` answered by ``agent``'s algorithm (None: it declined), frozen as its snapshot."""
    start = time.monotonic()
    weights = exact_answer(agent, task.opponents, task.joint, seed=task.seed, policy_of=policy_of)
    policy = None if weights is None else FrozenPolicy(spec=task.snapshot, weights=weights)
    return BestResponseResult(policy=policy, seconds=time.monotonic() - start)


def exact_answer(agent: AgentInterface, opponents: Sequence[Opponents], joint: JointOpponents | None, *, seed: int,
                 policy_of: PolicyOf) -> Weights | None:
    """The weights of ``agent``'s exact best response to the seats' mixtures or their
    joint distribution (None: the algorithm declined, e.g. the game is too large)."""
    policy = agent.best_response(mixed_profile(opponents, policy_of), seed=seed,
                                 correlated=correlated_profile(joint, policy_of))
    return None if policy is None else policy.get_weights()


def mixed_profile(opponents: Sequence[Opponents], policy_of: PolicyOf) -> MixedProfile:
    """Each seat's mixture as (policy, probability) pairs (an exact oracle's view)."""
    return {o.agent: [(policy_of(pid), p) for pid, p in o.support()] for o in opponents}


def correlated_profile(joint: JointOpponents | None, policy_of: PolicyOf) -> CorrelatedProfile | None:
    """A joint distribution over the seats' profiles as live policies (None without one)."""
    if joint is None:
        return None
    return [({a: policy_of(pid) for a, pid in zip(joint.agents, profile, strict=True)}, p)
            for profile, p in joint.support()]
