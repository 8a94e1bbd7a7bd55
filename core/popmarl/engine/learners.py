"""Learners: a policy being trained with everything its training needs, kept by key.

A :class:`Learner` is its population's algorithm's policy and trainer (which holds the
optimiser, replay buffer, exploration schedule and random generators). It persists
across train tasks in the process that holds it (:class:`Learners`); a task says how
each of its learners starts (:class:`~popmarl.data.learners.LearnerInit`), and its whole
state (:meth:`Learner.state`) is what a scenario checkpoints and restores.

A **team** learner plays seats of several populations (``LearnerSpec.seats``): it holds
one policy per member population (``members``) and one trainer over all of them, made
by the lead population's algorithm, which every member population must use and which
must read the joint view (the members' seats may differ in spaces).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from popmarl.interfaces.population_algorithm import PopulationAlgorithm, LearnerError
from popmarl.interfaces.policy import Policy
from popmarl.data.learners import LearnerSpec, LearnerState
from popmarl.data.policies import Weights
from popmarl.interfaces.trainer import Trainer

class Learner:
    """One learning policy and its trainer (None for an algorithm that does not learn);
    a team's policy per member population in ``members`` (the lead's is ``policy``)."""

    def __init__(self, *, key: str, agent: PopulationAlgorithm, policy: Policy, trainer: Trainer | None,
                 seed: int, members: Mapping[str, Policy] | None = None) -> None:
        self.key = key
        self.agent = agent
        self.policy = policy
        self.trainer = trainer
        self.seed = seed
        self.members: dict[str, Policy] = {agent.population: policy, **(members or {})}

    @property
    def population(self) -> str:
        return self.agent.space.population

    def weights(self) -> dict[str, Weights]:
        """Every member's weights, by population."""
        return {population: policy.get_weights() for population, policy in self.members.items()}

    def state(self) -> LearnerState:
        """Its whole state: the policies' weights and the trainer's state."""
        return LearnerState(key=self.key, population=self.population, seed=self.seed,
                            weights=self.policy.get_weights(),
                            trainer=dict(self.trainer.state()) if self.trainer is not None else {},
                            members={p: policy.get_weights() for p, policy in self.members.items()
                                     if p != self.population})


class Learners:
    """The learners one process holds, by key; :meth:`prepare` starts each as its task says."""

    def __init__(self, populations: Mapping[str, PopulationAlgorithm]) -> None:
        self.populations = populations
        self.held: dict[str, Learner] = {}
        self.population_of = {seat: population for population, agent in populations.items()
                              for seat in agent.space.agents}

    def team_of(self, spec: LearnerSpec) -> tuple[str, ...]:
        """The populations whose seats ``spec`` plays, its own first (a seat of its own
        population is its own, even where other populations map to that seat too)."""
        own = self.populations[spec.population].space.agents
        others = [seat for seat in spec.seats if seat not in own]
        unknown = [seat for seat in others if seat not in self.population_of]
        if unknown:
            raise LearnerError(f"learner {spec.key}: seat {', '.join(unknown)} belongs to no population of this run")
        return tuple(dict.fromkeys([spec.population, *(self.population_of[seat] for seat in others)]))

    def prepare(self, spec: LearnerSpec, policy_of: Callable[[str], Policy]) -> Learner:
        """The learner ``spec`` names, started as ``spec.init`` says (and held from now on)."""
        init = spec.init
        team = self.team_of(spec)
        if len(team) > 1:
            self._check_team(spec, team)
        if init.kind in ("fresh", "from"):
            weights = policy_of(init.policy_id).get_weights() if init.policy_id is not None else None
            fresh = self.held[spec.key] = self._new(spec.key, team, seed=spec.seed, seats=spec.seats,
                                                    weights={spec.population: weights} if weights else None,
                                                    warm_start=init.kind == "from")
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
        if tuple(learner.members) != team:
            raise LearnerError(f"learner {spec.key}: a team of {', '.join(learner.members)}, not of {', '.join(team)}")
        if init.policy_id is not None:
            learner.policy.set_weights(policy_of(init.policy_id).get_weights())
        return learner

    def _check_team(self, spec: LearnerSpec, team: tuple[str, ...]) -> None:
        """A team's members share the lead's algorithm, which reads the joint view."""
        lead = self.populations[spec.population]
        others = [p for p in team[1:] if self.populations[p].algorithm_name != lead.algorithm_name]
        if others:
            raise LearnerError(f"learner {spec.key}: a team over populations {', '.join(team)} trains with one "
                               f"algorithm, and {', '.join(others)} do not use {lead.algorithm_name}")
        if not lead.algorithm.joint_view:
            raise LearnerError(f"learner {spec.key}: algorithm {lead.algorithm_name} learns from its own seats' "
                               f"decisions, so it cannot train a team over populations {', '.join(team)}; "
                               "a team needs an algorithm that reads the joint view")
        if spec.init.policy_id is not None:
            raise LearnerError(f"learner {spec.key}: a team starts fresh, continues or is restored; a warm start "
                               f"(policy_id {spec.init.policy_id}) names one population's policy")

    def _new(self, key: str, team: tuple[str, ...], *, seed: int, seats: tuple[str, ...],
             weights: Mapping[str, Weights | None] | None = None, warm_start: bool = False) -> Learner:
        """A learner of ``team`` (its lead first): each member's policy (with ``weights``
        where given), the lead's algorithm's trainer over all of them."""
        lead = self.populations[team[0]]
        weights = weights or {}
        members = {p: self.populations[p].make_policy(seed=seed) for p in team[1:]}
        for population, policy in members.items():
            if weights.get(population) is not None:
                policy.set_weights(weights[population])  # type: ignore[arg-type]
        policy, trainer = lead.new_learner(seed=seed, weights=weights.get(team[0]), warm_start=warm_start,
                                           seats=seats, team=members,
                                           spaces={p: self.populations[p].space for p in team})
        return Learner(key=key, agent=lead, policy=policy, trainer=trainer, seed=seed, members=members)

    def rebuild(self, state: LearnerState, *, seats: tuple[str, ...] = ()) -> Learner:
        """A learner exactly as ``state`` was taken (not held until :meth:`prepare`),
        playing ``seats`` (default: its population's)."""
        missing = [p for p in (state.population, *state.members) if p not in self.populations]
        if missing:
            raise LearnerError(f"learner {state.key}: saved for population {', '.join(missing)}, which this run "
                               f"does not have (populations: {', '.join(self.populations)})")
        team = (state.population, *state.members)
        learner = self._new(state.key, team, seed=state.seed, seats=seats,
                            weights={state.population: state.weights, **state.members})
        if learner.trainer is not None:
            learner.trainer.load_state(state.trainer)
        return learner
