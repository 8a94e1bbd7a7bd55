"""Learners: a policy being trained with everything its training needs, kept by key.

A :class:`Learner` is its population's algorithm's policy and trainer (which holds the
optimiser, replay buffer, exploration schedule and random generators). It persists
across train tasks in the process that holds it (:class:`Learners`); a task says how
each of its learners starts (:class:`~popmarl.records.LearnerInit`), and its whole
state (:meth:`Learner.state`) is what a scenario checkpoints and restores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from popmarl.agent import AgentInterface
from popmarl.errors import PopmarlError
from popmarl.policy import Policy
from popmarl.records import LearnerSpec, LearnerState
from popmarl.trainer import Trainer


class LearnerError(PopmarlError):
    """A task names a learner that cannot be started as asked."""


class Learner:
    """One learning policy and its trainer (None for an algorithm that does not learn)."""

    def __init__(self, *, key: str, agent: AgentInterface, policy: Policy, trainer: Trainer | None,
                 seed: int) -> None:
        self.key = key
        self.agent = agent
        self.policy = policy
        self.trainer = trainer
        self.seed = seed

    @property
    def population(self) -> str:
        return self.agent.space.population

    def state(self) -> LearnerState:
        """Its whole state: the policy's weights and the trainer's state."""
        return LearnerState(key=self.key, population=self.population, seed=self.seed,
                            weights=self.policy.get_weights(),
                            trainer=dict(self.trainer.state()) if self.trainer is not None else {})


class Learners:
    """The learners one process holds, by key; :meth:`prepare` starts each as its task says."""

    def __init__(self, agents: Mapping[str, AgentInterface]) -> None:
        self.agents = agents
        self.held: dict[str, Learner] = {}

    def prepare(self, spec: LearnerSpec, policy_of: Callable[[str], Policy]) -> Learner:
        """The learner ``spec`` names, started as ``spec.init`` says (and held from now on)."""
        init = spec.init
        if init.kind in ("fresh", "from"):
            weights = policy_of(init.policy_id).get_weights() if init.policy_id is not None else None
            agent = self.agents[spec.population]
            policy, trainer = agent.new_learner(seed=spec.seed, weights=weights, warm_start=init.kind == "from",
                                                seats=spec.seats)
            fresh = self.held[spec.key] = Learner(key=spec.key, agent=agent, policy=policy, trainer=trainer,
                                                  seed=spec.seed)
            return fresh
        if init.kind == "restore":
            assert init.state is not None
            if init.state.key != spec.key:
                raise LearnerError(f"learner {spec.key}: cannot restore the state of learner {init.state.key}")
            rebuilt = self.rebuild(init.state, seats=spec.seats)
            if rebuilt.population != spec.population:
                raise LearnerError(f"learner {spec.key}: of population {rebuilt.population}, not {spec.population}")
            self.held[spec.key] = rebuilt
        learner = self.held.get(spec.key)
        if learner is None:
            raise LearnerError(f"learner {spec.key}: init continue, but this process holds no such learner "
                               "(start it with fresh, from or restore)")
        if learner.population != spec.population:
            raise LearnerError(f"learner {spec.key}: of population {learner.population}, not {spec.population}")
        if init.policy_id is not None:
            learner.policy.set_weights(policy_of(init.policy_id).get_weights())
        return learner

    def rebuild(self, state: LearnerState, *, seats: tuple[str, ...] = ()) -> Learner:
        """A learner exactly as ``state`` was taken (not held until :meth:`prepare`),
        playing ``seats`` (default: its population's)."""
        agent = self.agents.get(state.population)
        if agent is None:
            raise LearnerError(f"learner {state.key}: saved for population {state.population}, which this run "
                               f"does not have (populations: {', '.join(self.agents)})")
        policy, trainer = agent.new_learner(seed=state.seed, weights=state.weights, seats=seats)
        if trainer is not None:
            trainer.load_state(state.trainer)
        return Learner(key=state.key, agent=agent, policy=policy, trainer=trainer, seed=state.seed)
