"""One decision of a vector of games: the actions of every row an agent acts on.

The rows of a decision are grouped by the policy that plays them (the codes of a
:class:`~popmarl.engine.seating.SeatTable`), each policy acts once on its rows, opponents
that can act together do so in one ``act_grouped`` call, and opponents' actions may be
perturbed to uniformly random legal ones. :func:`applied` is what the env then receives.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from popmarl.data.episodes import Observations
from popmarl.engine.episode_recording import EpisodeRecorder
from popmarl.engine.seating import IDLE, SeatTable
from popmarl.interfaces.policy import masked_uniform, sample_rows
from popmarl.interfaces.spaces import Box, Space


def choose_actions(
    table: SeatTable,
    codes: np.ndarray,
    batch: Observations,
    explore: bool,
    rng: np.random.Generator,
    learner_codes: set[int],
    recorded_codes: set[int],
    recorder: EpisodeRecorder | None,
    env_ids: np.ndarray,
    space: Space,
    opponent_epsilon: float,
) -> np.ndarray:
    """The rows' actions as chosen (a Box action before clipping: :func:`applied`):
    one batched ``act`` per distinct policy among the rows, except that opponents
    (policies other than the learners', acting without exploring) with equal
    ``group_key`` act in one ``act_grouped`` call; idle games take any legal action
    (their results are ignored). Policies act, and opponents' actions are perturbed
    (``opponent_epsilon``), unit by unit in the order of their first code, a group's
    members in code order: ``rng`` is drawn from in an order fixed by the inputs."""
    unique = np.unique(codes)
    if len(unique) == 1:
        code = int(unique[0])
        return _act_alone(table, code, batch, None, explore, rng, code in learner_codes, recorded_codes,
                          recorder, env_ids, space, opponent_epsilon)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], unique).tolist() + [len(codes)]
    rows_of = {int(c): order[bounds[k]:bounds[k + 1]] for k, c in enumerate(unique)}
    # Units in the order of their first code: a policy alone, or a group's members.
    units: list[list[int]] = []
    members_of: dict[Hashable, list[int]] = {}
    for code in rows_of:
        key = None if code == IDLE or code in learner_codes else table.keys[code]
        if key is None:
            units.append([code])
        elif key in members_of:
            members_of[key].append(code)
        else:
            members_of[key] = [code]
            units.append(members_of[key])
    actions: np.ndarray | None = None
    for unit in units:
        if len(unit) == 1:
            rows = rows_of[unit[0]]
            chosen = _act_alone(table, unit[0], batch, rows, explore, rng, unit[0] in learner_codes,
                                recorded_codes, recorder, env_ids, space, opponent_epsilon)
        else:
            rows = np.concatenate([rows_of[c] for c in unit])
            sub = _take(batch, rows)
            ends = np.cumsum([len(rows_of[c]) for c in unit]).tolist()
            parts = [_slice(sub, a, b) for a, b in zip([0, *ends[:-1]], ends)]
            members = [table.policies[c] for c in unit]
            chosen = np.concatenate([np.asarray(a) for a in type(members[0]).act_grouped(members, parts, rng=rng)])
            if opponent_epsilon > 0:
                chosen = _perturb(chosen, sub, space, opponent_epsilon, rng)
        if actions is None:
            actions = np.zeros((len(codes), *chosen.shape[1:]), dtype=chosen.dtype)
        actions[rows] = chosen
    assert actions is not None
    return actions


def _act_alone(
    table: SeatTable, code: int, batch: Observations, rows: np.ndarray | None, explore: bool,
    rng: np.random.Generator, is_learner: bool, recorded_codes: set[int], recorder: EpisodeRecorder | None,
    env_ids: np.ndarray, space: Space, opponent_epsilon: float,
) -> np.ndarray:
    """The actions of one policy (``code``) on ``rows`` of the batch (None: all)."""
    sub = batch if rows is None else _take(batch, rows)
    if code == IDLE:
        return _any_legal(sub, space)
    chosen = np.asarray(table.policies[code].act(sub, explore=explore and is_learner, rng=rng))
    if is_learner and recorder is not None and code in recorded_codes:
        recorder.decide(env_ids if rows is None else env_ids[rows], sub, chosen)
    elif not is_learner and opponent_epsilon > 0:
        chosen = _perturb(chosen, sub, space, opponent_epsilon, rng)
    return chosen


def applied(actions: np.ndarray, space: Space) -> np.ndarray:
    """What the env receives: Box actions clipped to the bounds (a learner's episode
    keeps the policy's own sample, e.g. a Gaussian draw past a bound, which is what its
    log-probability is of)."""
    return space.clip(actions) if isinstance(space, Box) else actions


def _take(batch: Observations, rows: np.ndarray) -> Observations:
    return Observations(
        obs=batch.obs[rows],
        mask=None if batch.mask is None else batch.mask[rows],
        keys=None if batch.keys is None else tuple(batch.keys[r] for r in rows),
        agent=batch.agent,
    )


def _slice(batch: Observations, start: int, stop: int) -> Observations:
    """Rows ``start:stop`` of ``batch`` (views)."""
    return Observations(
        obs=batch.obs[start:stop],
        mask=None if batch.mask is None else batch.mask[start:stop],
        keys=None if batch.keys is None else batch.keys[start:stop],
        agent=batch.agent,
    )


def _perturb(
    chosen: np.ndarray, batch: Observations, space: Space, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """``chosen`` with each row replaced, with probability ``epsilon``, by a uniformly
    random legal action."""
    rows = np.flatnonzero(rng.random(len(chosen)) < epsilon)
    if not len(rows):
        return chosen
    chosen = chosen.copy()
    if isinstance(space, Box):
        chosen[rows] = space.sample(rng, n=len(rows))
    else:
        mask = None if batch.mask is None else np.asarray(batch.mask)[rows]
        chosen[rows] = sample_rows(masked_uniform(mask, len(rows), space.n), rng)
    return chosen


def _any_legal(batch: Observations, space: Space) -> np.ndarray:
    """A legal action per row (for games with no more episodes to play)."""
    if isinstance(space, Box):
        return np.broadcast_to(space.clip(np.zeros(space.shape)), (len(batch), *space.shape)).copy()
    if batch.mask is None:
        return np.zeros(len(batch), dtype=np.int64)
    return np.asarray(batch.mask).argmax(axis=1)
