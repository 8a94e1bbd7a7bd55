"""PopulationAlgorithm: one per population, its spaces and its own algorithm."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from popmarl.interfaces.algorithm import Algorithm, BestResponseProblem, PolicySpace, TrainerContext
from popmarl.interfaces.env import CorrelatedProfile, Env, MixedProfile
from popmarl.errors import PopmarlError
from popmarl.interfaces.policy import Policy
from popmarl.data.policies import Weights
from popmarl.interfaces.trainer import Trainer


class LearnerError(PopmarlError):
    """A task names a learner that cannot be started as asked."""


class PopulationAlgorithm:
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
        """Whether the algorithm trains policies (:attr:`~popmarl.interfaces.algorithm.Algorithm.learns`)."""
        return self.algorithm.learns

    @property
    def answers(self) -> bool:
        """Whether the algorithm may answer a best-response problem exactly
        (:attr:`~popmarl.interfaces.algorithm.Algorithm.answers`)."""
        return self.algorithm.answers

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
        (None for an algorithm that does not learn: its ``make_trainer`` is not called),
        for a learner playing ``seats`` (default: the population's); a team's other
        members' policies (``team``) and every member's spaces (``spaces``) by population.
        The trainer is always given its context (:meth:`trainer_context`). ``warm_start``: ``weights`` are
        another policy's, which this new learner starts from
        (:meth:`~popmarl.interfaces.algorithm.Algorithm.warm_start`)."""
        policy = self.make_policy(seed=seed)
        if weights is not None:
            policy.set_weights(weights)
            if warm_start:
                self.algorithm.warm_start(policy, seed=seed)
        if not self.learns:
            return policy, None
        context = self.trainer_context(tuple(seats) or self.space.agents, policies={self.population: policy,
                                                                                       **(team or {})},
                                       spaces=spaces or {self.population: self.space})
        return policy, self.algorithm.make_trainer(policy=policy, space=self.space, seed=seed, context=context)

    def trainer_context(self, seats: tuple[str, ...], *, policies: Mapping[str, Policy],
                        spaces: Mapping[str, PolicySpace]) -> TrainerContext:
        """What a trainer of a learner playing ``seats`` learns from: those seats' spaces
        (every seat's, for an algorithm that reads the joint view), the state space, and
        its policies and spaces by population (several for a team)."""
        env = self.env
        read = env.agents if self.algorithm.joint_view else seats
        return TrainerContext(seats={a: (env.observation_space(a), env.action_space(a)) for a in read},
                              own_seats=seats, state_space=env.state_space, policies=policies, spaces=spaces)

    def best_response(self, opponents: MixedProfile, *, seed: int,
                      correlated: CorrelatedProfile | None = None) -> Policy | None:
        """The algorithm's exact best response to ``opponents`` or, if given, to the
        ``correlated`` distribution over the other seats' profiles (None: it has none, or
        answers no problem at all, train)."""
        if not self.answers:
            return None
        problem = BestResponseProblem(env=self.env, space=self.space, opponents=opponents, seed=seed,
                                      correlated=correlated)
        return self.algorithm.best_response(problem)
