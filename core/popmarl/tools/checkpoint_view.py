"""The meta-strategies of a run's checkpoint: those of its last committed iteration (what a
run that is going or was killed is read from), and the populations of a past one.

A checkpoint is ``checkpoints/state.json`` and the files it names (the iteration's arrays,
its payoff table, its history lines: the first ``history_length`` of ``metrics.jsonl``,
of ``checkpoints/history.jsonl`` in format 1; ``docs/run_format.md``). A commit replaces
``state.json`` and then deletes the previous iteration's arrays, so
:func:`read_checkpoint` reads ``state.json`` once, then what it names, and reads again
once where a commit made a named file vanish meanwhile.

What the last committed iteration gives is what ``summary.json`` gives once the run ends:
each population's policies (``policies`` of the state), each seat's meta-strategy (the
arrays ``meta_<k>`` of psro and league, seat ``k`` in the env's agent order), a
population's the mean of its seats' (without seat arrays: the mixture its history line
records, a marl run's frozen mixture, else its newest policy alone) and a joint
meta-strategy's support (psro's ``joint`` array over the seats' policies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from popmarl.errors import CheckpointError, UserError
from popmarl.gametheory.metagame import joint_support
from popmarl.runs.rundir import RunDirectory

#: Per population: its policy ids and meta-strategy over them.
Mixtures = dict[str, tuple[list[str], np.ndarray]]


@attrs.frozen(kw_only=True)
class Checkpoint:
    """The last committed checkpoint: ``state.json`` (with its ``history`` lines) and its
    ``arrays``, read together."""

    state: Mapping[str, Any]
    arrays: Mapping[str, np.ndarray] = attrs.field(repr=False)
    source: str

    @property
    def iteration(self) -> int:
        return int(self.state["iteration"])

    @property
    def history(self) -> list[dict[str, Any]]:
        return list(self.state["history"])

    @property
    def last_metrics(self) -> dict[str, Any]:
        """The last committed iteration's metrics line (empty at iteration 0)."""
        history = self.state["history"]
        return dict(history[-1]) if history else {}

    def policies(self) -> dict[str, list[str]]:
        """Each population's policy ids, oldest first."""
        policies = self.state.get("policies")
        if not isinstance(policies, dict) or not all(isinstance(ids, list) for ids in policies.values()):
            raise UserError(f"{self.source}: this checkpoint does not list its policies per population (scenario of "
                            "another shape); only its summary.json, once the run ends, can be loaded")
        return {str(p): [str(pid) for pid in ids] for p, ids in policies.items()}

    def seat_mixtures(self, seat_populations: Sequence[str]) -> list[np.ndarray] | None:
        """Each seat's meta-strategy (seats in the env's order, each of ``seat_populations``),
        where the checkpoint holds them (psro, league), else None."""
        if not all(f"meta_{k}" in self.arrays for k in range(len(seat_populations))):
            return None
        policies = self.policies()
        mixtures = []
        for k, population in enumerate(seat_populations):
            mixture = np.asarray(self.arrays[f"meta_{k}"], dtype=float)
            if population not in policies or len(mixture) != len(policies[population]):
                raise CheckpointError(f"{self.source}: seat {k}'s meta-strategy has {len(mixture)} weights for the "
                                      f"{len(policies.get(population, []))} policies of population {population!r}")
            mixtures.append(mixture)
        return mixtures

    def population_mixtures(self, seat_populations: Sequence[str] | None) -> Mixtures:
        """Each population's policies and meta-strategy (see the module), or a UserError
        where a population's cannot be known without its seats (``seat_populations``)."""
        policies = self.policies()
        seats = self.seat_mixtures(seat_populations) if seat_populations is not None else None
        has_seats = "meta_0" in self.arrays
        line = self.last_metrics
        frozen = self.state.get("frozen_mixtures") or {}
        mixtures: Mixtures = {}
        for population, ids in policies.items():
            if seats is not None and seat_populations is not None:
                mine = [m for m, p in zip(seats, seat_populations) if p == population]
                meta = np.mean(mine, axis=0) if mine else None
            else:
                meta = _sized(line.get(f"meta_strategy/{population}"), len(ids))
                if meta is None and not has_seats:
                    meta = _sized(frozen.get(population), len(ids))
                if meta is None and not has_seats:
                    meta = np.eye(len(ids))[-1]  # marl: its newest policy plays
            if meta is None:
                raise UserError(f"{self.source}: population {population!r}'s meta-strategy is in its seats' "
                                "arrays only (give the seats)")
            mixtures[population] = (ids, meta)
        return mixtures

    def joint_meta_strategy(self, agents: Sequence[str],
                            seat_populations: Sequence[str]) -> dict[str, Any] | None:
        """The joint meta-strategy's support as ``summary.json`` has it (seats, one policy
        id per seat per profile, probabilities), or None without one."""
        joint = self.arrays.get("joint")
        if joint is None:
            return None
        policies = self.policies()
        axis_ids = [policies[p] for p in seat_populations]
        if joint.shape != tuple(len(ids) for ids in axis_ids):
            raise CheckpointError(f"{self.source}: the joint meta-strategy's shape {joint.shape} does not match the "
                                  f"seats' policies ({', '.join(str(len(ids)) for ids in axis_ids)})")
        profiles, probabilities = joint_support(joint, axis_ids)
        return {"agents": list(agents), "profiles": profiles, "probabilities": probabilities}

    def main_policies(self) -> dict[str, str] | None:
        """A league's main agents by population (``<population>/main``), or None where the
        checkpoint has no main agents."""
        players = self.state.get("players")
        if not isinstance(players, list):
            return None
        populations = dict.fromkeys(p["population"] for p in players
                                    if isinstance(p, dict) and p.get("role") == "main_agent")
        return {p: f"{p}/main" for p in populations} or None

    def past_mixtures(self, iteration: int, names: Sequence[str], scenario: str, path: str) -> Mixtures:
        """Each population's policies and meta-strategy after ``iteration``, as the history
        records them: its first ``population_size`` policies and the ``meta_strategy`` of
        its history line (without one, as marl's, the newest of them alone)."""
        last = self.iteration
        history = self.state["history"]
        if not 0 <= iteration <= last:
            raise UserError(f"iteration {iteration}: the run at {path} has iterations 0 to {last}; "
                            "leave it unset (None) for the final meta-strategy")
        recorded = all(f"population_size/{p}" in line for line in history for p in names)
        if not recorded:
            raise UserError(f"iteration {iteration}: the run's history does not record its populations per "
                            f"iteration (scenario {scenario}); only its final meta-strategy loads (iteration unset)")
        policies = self.policies()
        if iteration == 0:  # one initial policy each; marl's frozen populations hold their source's mixture
            frozen = self.state.get("frozen_mixtures", {})
            line: Mapping[str, Any] = {
                **{f"population_size/{p}": len(frozen.get(p, [1.0])) for p in names},
                **{f"meta_strategy/{p}": frozen[p] for p in names if p in frozen}}
        else:
            line = history[iteration - 1]
        mixtures: Mixtures = {}
        for p in names:
            size = int(line[f"population_size/{p}"])
            ids = list(policies[p][:size])
            meta = line.get(f"meta_strategy/{p}", [0.0] * (size - 1) + [1.0])
            mixtures[p] = (ids, np.asarray(meta, dtype=float))
        return mixtures


def _sized(values: Any, size: int) -> np.ndarray | None:
    """``values`` as an array of ``size`` weights, or None if it is not one."""
    if not isinstance(values, list) or len(values) != size:
        return None
    return np.asarray(values, dtype=float)


def read_checkpoint(run: RunDirectory) -> Checkpoint | None:
    """The last committed checkpoint, or None before the first. A file a concurrent commit
    removed between reading ``state.json`` and reading it is read again once, from the
    new ``state.json``; a checkpoint that fails twice is corrupt (a CheckpointError)."""
    if not run.state_file.is_file():
        return None
    try:
        state, arrays = run.load_state()
    except CheckpointError:  # a commit between the reads, or a corrupt checkpoint: once more tells
        state, arrays = run.load_state()
    return Checkpoint(state=state, arrays=arrays, source=str(run.state_file))
