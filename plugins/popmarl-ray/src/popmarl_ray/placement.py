"""Where learners live: each learner key in one learner actor, for the whole run.

Learners are placed per key, not per population: the first time a task names keys no
actor holds, it goes to the learner actor with the fewest tasks of the current ``train``
call (then the actor named after the learner's population, where there is one; then the
one holding the fewest keys), so that learners of one population
(a league's roles) train at the same time on different actors. A key stays on its actor
ever after (its policy, trainer, optimiser and buffer stay there between tasks). The driver keeps the last :class:`~popmarl.api.LearnerState`
each task returned (``return_state``), so that a learner whose actor died and was
replaced is rebuilt from it: the next ``continue`` of its key becomes a ``restore``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from popmarl.api import LearnerInit, LearnerState, TrainResult, TrainTask
from popmarl_ray.faults import RayBackendError, log


class Placement:
    """The learner actor slot of each key, the generation of that actor that last ran
    it, and its last state returned; ``populations[slot]`` names the actor of ``slot``
    (a population's name while there is one actor per population, else ``learner<k>``)."""

    def __init__(self, populations: Sequence[str]) -> None:
        self.populations = tuple(populations)
        self.home: dict[str, int] = {}
        self.ran_in: dict[str, int] = {}
        self.states: dict[str, LearnerState] = {}

    def slot(self, task: TrainTask, running: Sequence[int] = ()) -> int:
        """The learner actor that runs ``task``: the one holding its learners, else the
        least busy (``running``: the tasks of this call placed on each actor so far)."""
        homes = {self.home[spec.key] for spec in task.learners if spec.key in self.home}
        if len(homes) > 1:
            held = ", ".join(f"{spec.key} by that of {self.populations[self.home[spec.key]]}"
                             for spec in task.learners if spec.key in self.home)
            raise RayBackendError(f"ray backend: a train task co-trains learners held by different learner actors "
                                  f"({held}); learners trained apart cannot be trained together later")
        if homes:
            return homes.pop()
        keys_held = [0] * len(self.populations)
        for home in self.home.values():
            keys_held[home] += 1
        own = task.learners[0].population

        def load(slot: int) -> tuple[int, bool, int, int]:
            return (running[slot] if slot < len(running) else 0, self.populations[slot] != own, keys_held[slot], slot)

        return min(range(len(self.populations)), key=load)

    def task_for(self, task: TrainTask, slot: int, generation: int, *, retry: bool) -> TrainTask:
        """``task`` as the actor of ``slot`` in ``generation`` runs it: a ``continue`` of a
        learner that this actor does not hold (its actor died and was replaced), or that
        a failed attempt may have changed (``retry``), restores its last state."""
        specs = []
        for spec in task.learners:
            if spec.init.kind == "continue":
                replaced = spec.key in self.ran_in and self.ran_in[spec.key] != generation
                state = self.states.get(spec.key)
                if spec.key not in self.ran_in:
                    raise RayBackendError(f"ray backend: learner {spec.key}: init continue, but no learner actor "
                                          "holds it (start it with fresh, from or restore)")
                if replaced and state is None:
                    raise RayBackendError(
                        f"ray backend: learner {spec.key}: its learner actor (that of {self.populations[slot]}) died "
                        "and was replaced, and no state of it was returned to rebuild it from (train it with "
                        "return_state); it cannot continue")
                if replaced or (retry and state is not None):
                    assert state is not None
                    if replaced:
                        log.warning("ray backend: learner actor for %s died and was replaced; learner %s rebuilt "
                                    "from its last checkpointed state", self.populations[slot], spec.key)
                    spec = attrs.evolve(spec, init=LearnerInit.restore(state, policy_id=spec.init.policy_id))
            specs.append(spec)
        return attrs.evolve(task, learners=tuple(specs))

    def done(self, task: TrainTask, slot: int, generation: int, result: TrainResult) -> None:
        """``task`` ran in the actor of ``slot`` in ``generation``: its learners live there
        now, as its result's states say (a state not returned is out of date: dropped)."""
        for spec in task.learners:
            self.home[spec.key] = slot
            self.ran_in[spec.key] = generation
            state = result.states.get(spec.key)
            if state is not None:
                self.states[spec.key] = state
            else:
                self.states.pop(spec.key, None)
