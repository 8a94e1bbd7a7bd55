"""Rating ``elo``: the core's rating of a cross-play tournament's players.

The Bradley–Terry fit of seat 0's win/draw/loss counts (:func:`popmarl.api.elo`, as
OpenSpiel computes it), the table made square by :func:`popmarl.api.head_to_head`: with a
shared pool both seat orders of a pair add up; per seat, seat 0's policies meet seat 1's
in a bipartite table. The lowest rating is 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from popmarl.api import CrossPlay, Rating, elo, head_to_head


class Elo(Rating):
    """Each player's Elo rating from the tournament's outcomes."""

    columns = ("elo",)

    def rate(self, play: CrossPlay) -> Mapping[str, np.ndarray]:
        won, drawn = head_to_head(*play.outcomes, shared=play.shared)
        return {"elo": elo(won, drawn)}
