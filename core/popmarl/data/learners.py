"""Learners as records: which seats a train task's learner plays, how it starts, and
everything it is (its state, in safe formats, for checkpoints and for ``init: restore``)."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from popmarl.data.policies import PolicySpec, Weights


LEARNER_INITS = ("fresh", "from", "continue", "restore")


@attrs.frozen(kw_only=True)
class LearnerState:
    """Everything a learner is, in safe formats: its policy's weights and its trainer's
    state (:data:`popmarl.interfaces.trainer.TrainerState`: named files); a team's other members'
    weights by population (``members``). With its population's algorithm and ``seed``,
    enough to rebuild it exactly (``init: restore``)."""

    key: str
    population: str
    seed: int
    weights: Weights
    trainer: Mapping[str, bytes] = attrs.field(factory=dict)
    members: Mapping[str, Weights] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class LearnerInit:
    """How a train task's learner starts.

    ``fresh``: a new policy and trainer (from the learner's seed). ``from``: a new
    trainer on the weights of the frozen policy ``policy_id`` (a warm start).
    ``continue``: the learner as the last task that named its key left it (policy,
    trainer, optimiser, replay buffer, exploration schedule, random generators); with
    ``policy_id``, its policy takes that frozen policy's weights (e.g. the snapshot
    ``keep: best`` kept) and its trainer carries on. ``restore``: the learner rebuilt
    from ``state`` (a checkpoint), then as ``continue`` (``policy_id`` included)."""

    kind: str = "fresh"
    policy_id: str | None = None
    state: LearnerState | None = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in LEARNER_INITS:
            raise ValueError(f"LearnerInit.kind: {self.kind!r} is not allowed; allowed: {', '.join(LEARNER_INITS)}")
        if self.kind == "from" and self.policy_id is None:
            raise ValueError("LearnerInit: kind 'from' needs a policy_id")
        if self.kind == "fresh" and self.policy_id is not None:
            raise ValueError("LearnerInit: kind 'fresh' takes no policy_id")
        if (self.kind == "restore") != (self.state is not None):
            raise ValueError("LearnerInit: state goes with kind 'restore', and only with it")

    @classmethod
    def start_from(cls, policy_id: str) -> LearnerInit:
        return cls(kind="from", policy_id=policy_id)

    @classmethod
    def restore(cls, state: LearnerState, policy_id: str | None = None) -> LearnerInit:
        return cls(kind="restore", state=state, policy_id=policy_id)


@attrs.frozen(kw_only=True)
class LearnerSpec:
    """One learner of a train task: its ``key`` (its identity across tasks), the
    ``population`` whose algorithm and spaces it uses, the ``seats`` (agents) it plays,
    how it starts (``init``), its ``seed`` (for ``fresh`` and ``from``), and
    ``snapshot``: freeze its weights after the task and return them under this spec
    (None: return no snapshot).

    ``one_seat``: per episode it plays one of ``seats``, drawn uniformly (the other seats
    are the opponents'; a PSRO best response of a shared population); otherwise it plays
    all of them in every episode (parameter sharing in co-learning).

    A **team**: ``seats`` of several populations (e.g. every seat of a ``per_player``
    mapping, for a centralized critic or a mixer). It is one learner (one key, one
    checkpoint, one update) whose trainer improves one policy per member population
    (its algorithm, ``population``'s, must read the joint view); ``team_snapshots``
    freeze the other members' policies (``snapshot`` freezes ``population``'s)."""

    key: str
    population: str
    seats: tuple[str, ...]
    seed: int
    init: LearnerInit = attrs.field(factory=LearnerInit)
    snapshot: PolicySpec | None = None
    one_seat: bool = False
    team_snapshots: tuple[PolicySpec, ...] = ()
