"""The joint view: every seat's rows of whole games, aligned by step.

A learner whose algorithm declares :attr:`~popmarl.interfaces.algorithm.Algorithm.joint_view`
(a centralized critic, a mixer) is handed :class:`JointEpisodes` instead of its own
decisions (:class:`~popmarl.data.episodes.EpisodeBatch`): **one row per (game, env step,
seat)**. At each step of a game every seat has a row; a seat that did not act at that
step has ``acted = False``, zero observation and action, and an all-false mask. Its
``rewards`` are what the seat received between that step and the next, so a seat that
waits still collects its rewards on the rows where it waited (the per-seat view adds
them to the seat's previous decision instead). The global state (where the env declares
one, :attr:`~popmarl.interfaces.env.Env.state_space`) comes per step, and each game says which
policy played each seat (``policy_names``), how it ended for each seat (:meth:`outcomes`)
and which seats the learner itself played (``own``).

Rows are stored column-wise, game after game: ``starts[g]:starts[g + 1]`` are game
``g``'s steps, the same rows in every seat's columns and in ``state``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from popmarl.data.episodes import EpisodeColumns
from popmarl.data.outcomes import outcome_signs


@attrs.frozen(kw_only=True, eq=False)
class SeatRows(EpisodeColumns):
    """One seat's columns of a :class:`JointEpisodes` (``T`` rows in all).

    ``obs`` ``[T, *obs_shape]``, ``actions`` ``[T, *action_shape]`` (as the policy chose
    them: a Box action before clipping), ``masks`` ``[T, n_actions]`` or None (the env
    gives none: every action legal where the seat acted), ``acted`` ``[T]``, ``rewards``
    ``[T]``. ``final_obs`` / ``final_masks``: per game, the seat's observation when the
    game was cut off with the seat in play (None otherwise), to bootstrap from."""

    acted: np.ndarray


@attrs.frozen(kw_only=True, eq=False)
class JointEpisodes:
    """Whole games as every seat saw them (the module's docstring says how rows align).

    ``seats``: the env's agents, in order (``rows[seat]`` each). ``state``: ``[T,
    *state_shape]`` at each step, and ``final_state`` ``[G, *state_shape]`` when each game
    ended or was cut off; None where the env has no state. ``returns`` ``[G, n_seats]``;
    ``truncated`` ``[G]``: the game was cut off (e.g. a time limit) rather than ended.
    ``policies`` ``[G, n_seats]``: indices into ``policy_names`` (a learner's key, a
    frozen policy's id, ``self-play:<key>`` for a copy of a learner); ``own`` ``[G,
    n_seats]``: the seats the receiving learner played."""

    seats: tuple[str, ...]
    starts: np.ndarray
    rows: Mapping[str, SeatRows]
    state: np.ndarray | None
    final_state: np.ndarray | None
    returns: np.ndarray
    truncated: np.ndarray
    policy_names: tuple[str, ...]
    policies: np.ndarray
    own: np.ndarray

    def __attrs_post_init__(self) -> None:
        games, steps = len(self.starts) - 1, int(self.starts[-1])
        if games < 0 or self.starts[0] != 0 or np.any(np.diff(self.starts) <= 0):
            raise ValueError("JointEpisodes: starts must run from 0, every game at least one step long")
        for name in ("returns", "truncated", "policies", "own"):
            if len(getattr(self, name)) != games:
                raise ValueError(f"JointEpisodes: {name} needs one entry per game ({games})")
        if set(self.rows) != set(self.seats):
            raise ValueError(f"JointEpisodes: rows must be given for every seat of {self.seats}")
        for seat, rows in self.rows.items():
            if len(rows.obs) != steps or len(rows.acted) != steps or len(rows.rewards) != steps:
                raise ValueError(f"JointEpisodes: seat {seat} needs {steps} rows")
        if self.state is not None and len(self.state) != steps:
            raise ValueError(f"JointEpisodes: state needs {steps} rows")

    @classmethod
    def join(cls, parts: Sequence[JointEpisodes]) -> JointEpisodes:
        """Several batches of games of one env as one (games in the parts' order;
        policy names merged)."""
        kept = [p for p in parts if len(p)]
        if len(kept) <= 1:
            return kept[0] if kept else parts[0]
        names: dict[str, int] = {}
        for part in kept:
            for name in part.policy_names:
                names.setdefault(name, len(names))
        policies = [np.asarray([names[n] for n in part.policy_names], dtype=np.int64)[part.policies] for part in kept]
        offsets = np.cumsum([0] + [p.steps for p in kept[:-1]])
        first = kept[0]

        def cat(arrays: Sequence[np.ndarray | None]) -> np.ndarray | None:
            return None if any(a is None for a in arrays) else np.concatenate(arrays)  # type: ignore[arg-type]

        rows = {}
        for seat in first.seats:
            seat_parts = [p.rows[seat] for p in kept]
            masks = [r.masks for r in seat_parts]
            width = next((m.shape[1] for m in masks if m is not None), None)
            rows[seat] = SeatRows(
                obs=np.concatenate([r.obs for r in seat_parts]),
                actions=np.concatenate([r.actions for r in seat_parts]),
                masks=None if width is None else np.concatenate(
                    [m if m is not None else np.broadcast_to(r.acted[:, None], (len(r.acted), width))
                     for m, r in zip(masks, seat_parts)]),
                acted=np.concatenate([r.acted for r in seat_parts]),
                rewards=np.concatenate([r.rewards for r in seat_parts]),
                final_obs=tuple(f for r in seat_parts for f in r.final_obs),
                final_masks=tuple(f for r in seat_parts for f in r.final_masks))
        return cls(seats=first.seats,
                   starts=np.concatenate([[0], *[p.starts[1:] + at for p, at in zip(kept, offsets)]]).astype(np.int64),
                   rows=rows, state=cat([p.state for p in kept]), final_state=cat([p.final_state for p in kept]),
                   returns=np.concatenate([p.returns for p in kept]),
                   truncated=np.concatenate([p.truncated for p in kept]),
                   policy_names=tuple(names), policies=np.concatenate(policies),
                   own=np.concatenate([p.own for p in kept]))

    def __len__(self) -> int:
        """The number of games."""
        return len(self.starts) - 1

    @property
    def steps(self) -> int:
        """Rows per seat over all games."""
        return int(self.starts[-1])

    @property
    def game_of_row(self) -> np.ndarray:
        """``[T]``: the game each row belongs to."""
        return np.repeat(np.arange(len(self)), np.diff(self.starts))

    @property
    def decisions(self) -> int:
        """The decisions of the learner's own seats, over all games."""
        game = self.game_of_row
        return sum(int(np.count_nonzero(self.rows[seat].acted & self.own[game, k]))
                   for k, seat in enumerate(self.seats))

    def own_returns(self) -> np.ndarray:
        """The learner's returns: one per (game, seat it played), game after game (as its
        own-decisions view gives one episode per seat played)."""
        return self.returns[self.own]

    def outcomes(self) -> np.ndarray:
        """``[G, n_seats]``: +1 where the seat won the game, 0 drawn, -1 lost
        (:mod:`popmarl.data.outcomes`)."""
        return outcome_signs(self.returns)

