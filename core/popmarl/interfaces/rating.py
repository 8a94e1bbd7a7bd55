"""The Rating interface: a way to rate the players of a cross-play tournament.

``popmarl rank`` plays every pairing of the policies it is given (a :class:`CrossPlay`)
and asks each rating registered under ``popmarl.ratings`` that it is configured with for
one figure per player and column: the core registers ``elo`` (win/draw/loss counts, see
:mod:`popmarl.gametheory.ratings`); plugins add others (popmarl-solvers: ``alpharank`` and
``nash_averaging``, from the mean returns).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import ClassVar

import attrs
import numpy as np

from popmarl.interfaces.component import Component


@attrs.frozen(kw_only=True)
class CrossPlay:
    """The results a rating receives: seat 0's policies (rows) against seat 1's (columns).

    ``returns[k, i, j]``: seat ``k``'s mean return when row policy ``i`` plays seat 0 and
    column policy ``j`` seat 1; ``outcomes[:, i, j]``: seat 0's wins, draws and losses
    (counts; exact probabilities times the nominal number of games). ``shared``: rows and
    columns are the same players (one population in both seats of a symmetric game; the
    diagonal is not played and holds 0); otherwise they are different players."""

    returns: np.ndarray
    outcomes: np.ndarray
    shared: bool

    @property
    def players(self) -> int:
        """How many players are rated: the rows' when shared, else the rows' then the columns'."""
        rows, columns = np.shape(self.returns)[1:]
        return int(rows if self.shared else rows + columns)


class Rating(Component):
    """Rates the players of a :class:`CrossPlay`. Register under ``popmarl.ratings``;
    ``columns`` names the figures :meth:`rate` returns, in the order a report lists them."""

    columns: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def rate(self, play: CrossPlay) -> Mapping[str, np.ndarray]:
        """Per name of :attr:`columns`, one figure per player (:attr:`CrossPlay.players`):
        the rows' players, then (unless shared) the columns'."""
