"""Pipeline PSRO (McAleer et al. 2020): several best responses per population learn at once.

With ``training.pipeline: K`` each population has K **active** learners, ordered by
level. The lowest (level 0) best-responds to the meta-strategy of the frozen policies,
as PSRO's one learner does; the learner at level ``j`` to the meta-strategy of the
restricted game over the frozen policies plus the active ones below it (their weights at
the start of the iteration; one that has not trained yet is left out). Each iteration
every active learner trains for the ``training`` budget (on Ray at the same time, on the
local backend in turn); then the lowest is frozen (the population's next policy) and a
new learner starts at the top, as ``training.init`` says, so each policy has trained up
to K budgets before it is frozen. A learner keeps its key from start to freezing: it is
named after the policy it becomes (``<population>.br<index>``). ``pipeline: 1`` is PSRO.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from popmarl.gametheory.payoffs import PayoffTable


def active_keys(population: str, frozen: int, levels: int) -> list[str]:
    """The keys of a population's active learners, lowest level first, when it holds
    ``frozen`` policies: each is named after the policy index it will be frozen as."""
    return [f"{population}.br{frozen + level}" for level in range(levels)]


def active_policy_id(key: str) -> str:
    """The policy id under which an active learner's weights are played by others
    (``<population>/br<index>``: its population's, never a frozen policy's)."""
    population, name = key.rsplit(".", 1)
    return f"{population}/{name}"


def restricted(table: PayoffTable, sizes: Sequence[int]) -> np.ndarray:
    """The payoff tensor of the game restricted to the first ``sizes[k]`` policies of each seat."""
    return table.values[(slice(None), *(slice(0, n) for n in sizes))]
