"""``popmarl rank``: a cross-play tournament among the policies of runs of one two-player env.

The players are each run's final policies with positive meta-strategy weight (of a run
going or killed: its last committed checkpoint's), or, with ``every=True``, all its
policies. With ``agents.mapping: shared`` in every run (one
population for both seats of a symmetric game) all players are one pool and every pair
plays in both seat orders; otherwise seat 0's policies meet only seat 1's (a shared run's
policies sit in both seats) and ratings are per seat. The games run as evaluate tasks
on a backend (:func:`popmarl.tools.evaluate.evaluation_backend`; the first run's own by
default), exact where the env evaluates exactly, else ``episodes`` sampled per pairing
from a seed of the pairing's own. Each pairing's result is cached in every run directory
it involves (``rank.json``), so asking again (or for a superset of the players) plays only
what is new.

Ratings (:func:`ratings`): each rating registered under ``popmarl.ratings`` that is asked
for (:class:`~popmarl.interfaces.rating.Rating`, by name; :data:`RATINGS` by default): the
core's ``elo`` from the win/draw/loss counts, exact probabilities counting as ``episodes``
games; and, with the popmarl-solvers plugin, ``alpharank`` and ``nash_averaging`` from the
mean returns. A rating that is not installed is left out, and the report's note says so.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from popmarl.config.schema import ComponentConfig
from popmarl.data.atomic import write_json
from popmarl.data.seeds import stream_seed
from popmarl.data.tasks import EvalTask
from popmarl.errors import PopmarlError, UserError
from popmarl.interfaces.rating import CrossPlay, Rating
from popmarl.plugins.registry import Registries
from popmarl.plugins.registry import Registry, checkout_plugins
from popmarl.tools.evaluate import evaluation_backend
from popmarl.tools.loaded_run import LoadedRun, load_run
from popmarl.tools.pools import Pool
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.tools.run_status import RunStatus

CACHE_FILE = "rank.json"
DEFAULT_EPISODES = 200
DEFAULT_MAX_PAIRS = 2000
#: The ratings a report has by default, in its order (those not installed are left out).
RATINGS = ("elo", "alpharank", "nash_averaging")
#: The columns :func:`format_ratings` shows first, in this order; others follow.
COLUMNS = ("elo", "alpharank", "nash_averaging", "nash_weight")


@attrs.frozen(kw_only=True)
class Player:
    """One policy in the tournament: its run, id and seat (None: both seats, shared)."""

    name: str
    run: int
    policy_id: str
    seat: str | None


@attrs.frozen(kw_only=True)
class Tournament:
    """Cross-play results: seat 0's players ``rows`` against seat 1's ``columns`` (the same
    players when ``shared``; the diagonal is then not played). ``returns[k, i, j]``: seat
    ``k``'s mean return; ``outcomes[:, i, j]``: seat 0's wins, draws and losses (counts;
    exact probabilities times ``episodes``); ``statuses``: each run's when it was loaded (a
    run going or killed plays its last committed checkpoint's policies)."""

    runs: tuple[str, ...]
    agents: tuple[str, ...]
    shared: bool
    rows: tuple[Player, ...]
    columns: tuple[Player, ...]
    returns: np.ndarray
    outcomes: np.ndarray
    exact: bool
    episodes: int
    pairs: int
    played: int
    statuses: tuple[RunStatus, ...] = ()


def tournament(paths: Sequence[str | os.PathLike[str]], *, every: bool = False, episodes: int = DEFAULT_EPISODES,
               max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = 0,
               backend: ComponentConfig | None = None) -> Tournament:
    """Play every pairing of the runs' players not yet in the runs' caches; see the module."""
    resolved = [Path(p).resolve() for p in paths]
    twice = sorted({str(p) for p in resolved if resolved.count(p) > 1})
    if twice:
        raise UserError(f"rank: run directory {twice[0]} is given twice")
    runs = [load_run(p) for p in paths]
    first = runs[0]
    for path, run in zip(paths[1:], runs[1:]):
        if (run.config.env.name, run.config.env.params) != (first.config.env.name, first.config.env.params):
            raise UserError(f"rank: {path} is a run of a different env ({run.config.env.name} "
                            f"{dict(run.config.env.params)}) than {paths[0]} ({first.config.env.name} "
                            f"{dict(first.config.env.params)}); rank runs of one env")
    agents = first.env.agents
    if len(agents) != 2:
        raise UserError(f"rank: ratings are for two-player games; {paths[0]} has {len(agents)} seats "
                        f"({', '.join(agents)})")
    shared = all(len(run.mapping.populations) == 1 for run in runs)
    labels = _labels(resolved)
    seats: list[list[Player]] = [[], []]
    pools: dict[tuple[int, str], Pool] = {}
    for r, run in enumerate(runs):
        for population in run.mapping.populations:
            chosen = _chosen(run, population, every)
            pool = _pool(run, population, chosen, prefix=_prefix(r))
            pools[(r, population)] = pool
            for k, agent in enumerate(agents):
                if run.mapping.population_of[agent] == population and (k == 0 or not shared):
                    seats[k] += [Player(name=f"{labels[r]}:{pid}", run=r, policy_id=pid,
                                        seat=None if shared else agent) for pid in chosen]
    rows = tuple(seats[0])
    columns = rows if shared else tuple(seats[1])
    cells = [(i, j) for i in range(len(rows)) for j in range(len(columns)) if not (shared and i == j)]
    pairs = len(cells) // 2 if shared else len(cells)
    if pairs > max_pairs:
        raise UserError(f"rank: {pairs} pairings exceed --max-pairs {max_pairs} ({len(rows)} x {len(columns)} "
                        "players); raise --max-pairs, or rank fewer runs or without --all")
    cache = _read_caches(resolved)
    keys = {cell: _key(resolved, rows[cell[0]], columns[cell[1]], episodes, seed) for cell in cells}
    missing = [cell for cell in cells if keys[cell] not in cache]
    if missing:
        tasks = [EvalTask(index=(n,), profile={agents[0]: _prefix(rows[i].run) + rows[i].policy_id,
                                               agents[1]: _prefix(columns[j].run) + columns[j].policy_id},
                          episodes=episodes, seed=_pair_seed(seed, keys[(i, j)]))
                 for n, (i, j) in enumerate(missing)]
        with evaluation_backend(first, [{str(k): pool for k, pool in pools.items()}], backend) as started:
            results = started.evaluate(tasks)
        fresh = {keys[cell]: {"returns": [float(v) for v in result.returns],
                              "outcomes": [float(v) for v in result.outcome_rates()[:, 0]],
                              "exact": bool(result.exact and result.exact_outcomes),
                              "episodes": int(result.episodes)}
                 for cell, result in zip(missing, results)}
        cache.update(fresh)
        _write_caches(resolved, fresh, missing, keys, rows, columns)
    returns = np.zeros((2, len(rows), len(columns)))
    outcomes = np.zeros((3, len(rows), len(columns)))
    exact = True
    for cell in cells:
        entry = cache[keys[cell]]
        returns[(slice(None), *cell)] = entry["returns"]
        outcomes[(slice(None), *cell)] = np.asarray(entry["outcomes"]) * episodes
        exact = exact and bool(entry["exact"])
    return Tournament(runs=tuple(str(p) for p in paths), agents=agents, shared=shared, rows=rows, columns=columns,
                      returns=returns, outcomes=outcomes, exact=exact, episodes=episodes, pairs=pairs,
                      played=len(missing) // 2 if shared else len(missing),
                      statuses=tuple(run.status for run in runs))


def _labels(paths: Sequence[Path]) -> list[str]:
    """Each run's name in player names: its directory's name, or its position where names repeat."""
    names = [p.name for p in paths]
    return [n if names.count(n) == 1 else f"{n}#{r}" for r, n in enumerate(names)]


def _chosen(run: LoadedRun, population: str, every: bool) -> list[str]:
    found = run.populations[population]
    if every:
        return list(found.policy_ids)
    return [pid for pid, w in zip(found.policy_ids, found.mixture) if w > 0]


def _pool(run: LoadedRun, population: str, chosen: Sequence[str], prefix: str) -> Pool:
    """A pool of the ``chosen`` policies (uniform: only their ids matter), renamed with ``prefix``."""
    seat = run.mapping.agents_of(population)[0]
    like = run.pools[seat]
    found = run.populations[population]
    meta = MetaStrategy.independent({seat: (chosen, np.full(len(chosen), 1 / len(chosen)))})
    pool = Pool(seat=seat, meta=meta, live={pid: found.policy(pid) for pid in chosen}, space=like.space,
                algorithm=like.algorithm)
    return pool.renamed(prefix) if prefix else pool


def _prefix(run: int) -> str:
    """How the policies of the ``run``-th run are renamed in the backend (the first's are not;
    ``:`` is not allowed in a population name, so none collide)."""
    return "" if run == 0 else f"run{run}:"


def _key(paths: Sequence[Path], row: Player, column: Player, episodes: int, seed: int) -> str:
    """A pairing's cache key: both policies (by run directory), the episodes and the seed."""
    return json.dumps([str(paths[row.run]), row.policy_id, str(paths[column.run]), column.policy_id, episodes, seed])


def _pair_seed(seed: int, key: str) -> int:
    """A seed of the pairing's own, so its result does not depend on which others are played."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return stream_seed(seed, "tournament.pair", int.from_bytes(digest[:4], "big"), int.from_bytes(digest[4:8], "big"))


def _read_caches(paths: Sequence[Path]) -> dict[str, Any]:
    cache: dict[str, Any] = {}
    for path in paths:
        try:
            entries = json.loads((path / CACHE_FILE).read_text(encoding="utf-8")).get("pairings", {})
        except (OSError, ValueError, AttributeError):
            continue  # no cache yet, or an unreadable one: play again and rewrite it
        if isinstance(entries, dict):
            cache.update(entries)
    return cache


def _write_caches(paths: Sequence[Path], fresh: Mapping[str, Any], cells: Sequence[tuple[int, int]],
                  keys: Mapping[tuple[int, int], str], rows: Sequence[Player], columns: Sequence[Player]) -> None:
    """Add each fresh pairing to the caches of the runs it involves."""
    for r, path in enumerate(paths):
        mine = {keys[c]: fresh[keys[c]] for c in cells if r in (rows[c[0]].run, columns[c[1]].run)}
        if not mine:
            continue
        old = _read_caches([path])
        write_json(path / CACHE_FILE, {"pairings": {**old, **mine}})


def ratings(t: Tournament, names: Sequence[str] = RATINGS, *, registries: Registries | None = None) -> dict[str, Any]:
    """Per player, the figures of each rating of ``names`` found in ``registries`` (default:
    ``popmarl.ratings``), in that order; ``note`` says which were left out, not installed."""
    registry = (registries or Registries.current()).get("ratings")
    play = CrossPlay(returns=t.returns, outcomes=t.outcomes, shared=t.shared)
    players = list(t.rows) if t.shared else [*t.rows, *t.columns]
    table: dict[str, Any] = {}
    for name in names:
        if name in registry:
            rating: Rating = registry.load(name)()
            table.update(_figures(name, rating.rate(play), play.players))
    missing = [name for name in names if name not in registry]
    rows = [{"player": p.name, "run": t.runs[p.run], "policy": p.policy_id, "seat": p.seat or "both",
             **{k: float(v[n]) for k, v in table.items()}} for n, p in enumerate(players)]
    return {"mode": "shared" if t.shared else "per_seat", "agents": list(t.agents), "exact": t.exact,
            "episodes": t.episodes, "pairs": t.pairs, "played": t.played, "players": rows,
            "note": _left_out(registry, missing)}


def _figures(name: str, figures: Mapping[str, Any], players: int) -> dict[str, np.ndarray]:
    """A rating's answer, each column one finite figure per player; else a one-line error
    (the rating's bug, as a meta-solver's wrong answer is)."""
    checked = {}
    for column, values in figures.items():
        array = np.asarray(values, dtype=float)
        if array.shape != (players,) or not np.all(np.isfinite(array)):
            raise PopmarlError(f"rating {name!r}: {column} must be one finite figure per player ({players}), "
                               f"got shape {array.shape}")
        checked[column] = array
    return checked


def _left_out(registry: Registry, missing: Sequence[str]) -> str:
    """What the note says of the ratings ``missing`` from ``registry``: the plugin of a
    popmarl checkout that registers each, where one does, else that none is installed."""
    by_plugin: dict[tuple[str, str], list[str]] = {}
    unknown = []
    for name in missing:
        plugin = next((p for p in checkout_plugins() if name in p.components.get(registry.kind, ())), None)
        if plugin is None:
            unknown.append(name)
        else:
            by_plugin.setdefault((plugin.distribution, plugin.directory), []).append(name)
    notes = [f"{' and '.join(names)} need the {distribution} plugin (from a popmarl checkout: "
             f"pip install ./plugins/{directory})" for (distribution, directory), names in by_plugin.items()]
    if unknown:
        notes.append(f"{' and '.join(unknown)} left out: no rating of that name is installed "
                     "(popmarl plugins lists the installed ones)")
    return "; ".join(notes)


#: The keys of a player's entry that are not ratings.
_NAMES = ("player", "run", "policy", "seat")


def format_ratings(report: Mapping[str, Any]) -> str:
    """The ratings as a table, best Elo first (per seat when the tournament is per seat)."""
    found = report["players"][0]
    columns = [c for c in COLUMNS if c in found] + [c for c in found if c not in COLUMNS and c not in _NAMES]
    width = max(len("player"), *(len(p["player"]) for p in report["players"])) + 2
    lines = [f"{'player':<{width}}{'seat':<10}" + "".join(f"{c:>16}" for c in columns)]
    ranked = sorted(report["players"], key=lambda p: (p["seat"], -p.get("elo", 0.0)))
    for p in ranked:
        lines.append(f"{p['player']:<{width}}{p['seat']:<10}" + "".join(f"{p[c]:>16.4f}" for c in columns))
    return "\n".join(lines)
