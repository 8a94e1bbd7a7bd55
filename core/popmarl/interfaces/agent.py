"""AgentInterface: one per population, its spaces and its own algorithm."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from popmarl.interfaces.algorithm import Algorithm, BestResponseProblem, PolicySpace, TrainerContext
from popmarl.interfaces.env import CorrelatedProfile, Env, MixedProfile
from popmarl.errors import PopmarlError
from popmarl.interfaces.policy import Policy
from popmarl.data.policies import Weights
from popmarl.interfaces.trainer import Trainer


class LearnerError(PopmarlError):
    """A task names a learner that cannot be started as asked."""


class AgentInterface:
    """What a population's policies are made by: its algorithm (registered as
    ``algorithm_name``), over its spaces. Each population may have its own algorithm
    (``algorithm: {population: component}``)."""

    def __init__(self, *, space: PolicySpace, algorithm: Algorithm, env: Env, algorithm_name: str = "") -> None:
        self.space = space
        self.algorithm = algorithm
        self.env = env
        self.algorithm_name = algorithm_name or type(algorithm).__name__

    @property
    def population(self) -> str:
        return self.space.population

    @property
    def learns(self) -> bool:
        """Whether the algorithm trains policies (it overrides ``make_trainer``)."""
        return type(self.algorithm).make_trainer is not Algorithm.make_trainer

    @property
    def answers(self) -> bool:
        """Whether the algorithm may answer a best-response problem exactly."""
        return type(self.algorithm).best_response is not Algorithm.best_response

    def make_policy(self, *, seed: int) -> Policy:
        """A fresh policy (deterministic in ``seed``)."""
        return self.algorithm.make_policy(space=self.space, seed=seed)

    def frozen(self, weights: Weights) -> Policy:
        """The frozen policy with ``weights``."""
        policy = self.make_policy(seed=0)
        policy.set_weights(weights)
        return policy

    def initial_policy(self, *, seed: int) -> Policy:
        """The population's first policy (PSRO iteration 0)."""
        return self.algorithm.initial_policy(space=self.space, seed=seed)

    def new_learner(self, *, seed: int, weights: Weights | None = None, warm_start: bool = False,
                    seats: Sequence[str] = (), team: Mapping[str, Policy] | None = None,
                    spaces: Mapping[str, PolicySpace] | None = None) -> tuple[Policy, Trainer | None]:
        """A learning policy (with ``weights``, else fresh from ``seed``) and its trainer
        (None for an algorithm that does not learn), for a learner playing ``seats``
        (default: the population's); a team's other members' policies (``team``) and
        every member's spaces (``spaces``) by population. ``warm_start``: ``weights`` are
        another policy's, which this new learner starts from
        (:meth:`~popmarl.interfaces.algorithm.Algorithm.warm_start`)."""
        policy = self.make_policy(seed=seed)
        if weights is not None:
            policy.set_weights(weights)
            if warm_start:
                self.algorithm.warm_start(policy, seed=seed)
        if not self._takes_context:
            if team:
                raise LearnerError(f"algorithm {self.algorithm_name}: its make_trainer takes no context, so it "
                                   "cannot train a team of several populations")
            return policy, self.algorithm.make_trainer(policy=policy, space=self.space, seed=seed)
        context = self.trainer_context(tuple(seats) or self.space.agents, policies={self.population: policy,
                                                                                       **(team or {})},
                                       spaces=spaces or {self.population: self.space})
        make_trainer: Any = self.algorithm.make_trainer  # an override that takes context (see Algorithm.make_trainer)
        return policy, make_trainer(policy=policy, space=self.space, seed=seed, context=context)

    def trainer_context(self, seats: tuple[str, ...], *, policies: Mapping[str, Policy],
                        spaces: Mapping[str, PolicySpace]) -> TrainerContext:
        """What a trainer of a learner playing ``seats`` learns from: those seats' spaces
        (every seat's, for an algorithm that reads the joint view), the state space, and
        its policies and spaces by population (several for a team)."""
        env = self.env
        read = env.agents if self.algorithm.joint_view else seats
        return TrainerContext(seats={a: (env.observation_space(a), env.action_space(a)) for a in read},
                              own_seats=seats, state_space=env.state_space, policies=policies, spaces=spaces)

    @functools.cached_property
    def _takes_context(self) -> bool:
        """Whether the algorithm's ``make_trainer`` accepts ``context`` (trainers written
        before it existed do not, and are called as they were)."""
        parameters = inspect.signature(self.algorithm.make_trainer).parameters.values()
        return any(p.name == "context" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)

    def best_response(self, opponents: MixedProfile, *, seed: int,
                      correlated: CorrelatedProfile | None = None) -> Policy | None:
        """The algorithm's exact best response to ``opponents`` or, if given, to the
        ``correlated`` distribution over the other seats' profiles (None: it has none, train)."""
        problem = BestResponseProblem(env=self.env, space=self.space, opponents=opponents, seed=seed,
                                      correlated=correlated)
        return self.algorithm.best_response(problem)
