"""The backend's parts without actors: batching, the episode server's staleness rule,
one-line errors, the config."""

from __future__ import annotations

import asyncio
import logging

import attrs
import numpy as np
import pytest
from ray.exceptions import ActorDiedError, RayTaskError

from popmarl.errors import ConfigError
from popmarl.data.outcomes import PlayedGames
from popmarl.data.seeds import stream_seed
from popmarl.data.episodes import Episode, EpisodeBatch
from popmarl.data.learners import LearnerInit, LearnerSpec, LearnerState
from popmarl.data.tasks import EvalTask, TrainResult, TrainTask
from popmarl_ray import RayConfig
from popmarl_ray.faults import RayBackendError, Retries, actor_died, first_line
from popmarl_ray.placement import Placement
from popmarl_ray.spreading import split
from popmarl_ray.servers import Batch, EpisodeServerActor, ParameterServerActor


def _tasks(n: int) -> list[EvalTask]:
    return [EvalTask(index=(i, 0), profile={"a": f"a/{i}"}, episodes=10, seed=7) for i in range(n)]


def test_split_covers_every_entry_once_in_seeded_batches() -> None:
    tasks = _tasks(23)
    batches = split(tasks, 8)
    assert len(batches) == 8 and {len(b) for b in batches} == {2, 3}
    assert [t.index for b in batches for t in b] == [t.index for t in tasks]
    seeds = [b[0].seed for b in batches]
    assert len(set(seeds)) == len(batches)  # one seed per batch ...
    assert all(len({t.seed for t in b}) == 1 for b in batches)  # ... shared by its entries
    assert seeds == [b[0].seed for b in split(tasks, 8)]  # and the same every time
    assert len(split(tasks[:3], 8)) == 3 and split(tasks, 1)[0][0].index == (0, 0)


def test_split_keeps_each_seed_apart_and_seeds_its_batches_from_it() -> None:
    """Each task's own seed is honoured: a batch holds the tasks of one seed, seeded from it."""
    tasks = [attrs.evolve(t, seed=7 if i < 6 else 8) for i, t in enumerate(_tasks(8))]
    batches = split(tasks, 4)
    assert [t.index for b in batches for t in b] == [t.index for t in tasks]
    assert [[t.index[0] for t in b] for b in batches] == [[0, 1], [2, 3], [4, 5], [6, 7]]  # seed 7's six tasks in 3 batches, seed 8's two in 1
    assert [b[0].seed for b in batches] == [stream_seed(seed, "ray.eval_batch", k) for seed, k in ((7, 0), (7, 1), (7, 2), (8, 0))]
    assert [b[0].seed for b in batches[:3]] == [b[0].seed for b in split(tasks[:6], 3)]


def _episode(ret: float) -> Episode:
    return Episode(agent="a", obs=np.zeros((1, 1)), actions=np.zeros(1), rewards=np.zeros(1), masks=None,
                   terminated=True, truncated=False, episode_return=ret)


def _games(ret: float, n: int) -> EpisodeBatch:
    """``n`` one-decision games with return ``ret``, as a worker puts them."""
    return EpisodeBatch.of([_episode(ret)] * n)


def _returns(batch: Batch) -> list[float]:
    return [float(r) for _, part in batch.parts for r in part.returns]


def test_episode_server_drops_stale_episodes_and_refuses_closed_keys() -> None:
    async def scenario() -> None:
        server = EpisodeServerActor(capacity=5)
        assert not await server.put("k", 1, _games(0.0, 1), 1, 3)  # not open yet
        await server.open("k")
        assert await server.wait_open("k", 0.01) == "open"
        two = PlayedGames(players=(("a", "x"), ("a", "y")), returns=np.array([[1.0, -0.5], [1.0, -0.5]]))
        assert await server.put("k", 1, _games(1.0, 2), 2, 4, two)
        one = PlayedGames(players=(("a", "x"),), returns=np.array([[1.0, 0.5]]))
        assert await server.put("k", 3, _games(3.0, 1), 1, 2, one)
        batch = await server.take("k", min_items=1, min_version=2, timeout_s=0.01)  # version 1 is too old
        assert _returns(batch) == [3.0] and batch.games.players == (("a", "x"),)
        assert batch.games.team_returns.tolist() == [1.5]
        assert (batch.env_steps, batch.played, batch.dropped) == (6, 3, 2)
        waiter = asyncio.ensure_future(server.take("k", min_items=2, min_version=3, timeout_s=5))
        await asyncio.sleep(0.01)
        await server.put("k", 3, _games(4.0, 2), 2, 2)  # wakes the waiting learner
        assert _returns(await waiter) == [4.0, 4.0]
        for ret in (5.0, 6.0, 7.0):  # 9 games for room for 5: the oldest whole batches go
            await server.put("k", 3, _games(ret, 3), 3, 3)
        batch = await server.take("k", min_items=1, min_version=3, timeout_s=0.01)
        assert _returns(batch) == [7.0] * 3 and batch.dropped == 2 + 6
        await server.close("k")
        assert not await server.put("k", 4, _games(0.0, 1), 1, 1)
        assert await server.wait_open("k", 0.01) == "closed"
        assert await server.wait_open("never", 0.01) == "new"

    asyncio.run(scenario())


def test_episode_server_puts_one_batch_per_learner_of_a_task() -> None:
    async def scenario() -> None:
        server = EpisodeServerActor()
        for key in ("t/a", "t/b"):
            await server.open(key)
        assert await server.put_many([("t/a", 1, _games(1.0, 2)), ("t/b", 4, _games(-1.0, 2))], 2, 6)
        a = await server.take("t/a", min_items=2, min_version=0, timeout_s=0.01)
        b = await server.take("t/b", min_items=2, min_version=0, timeout_s=0.01)
        assert (_returns(a), _returns(b)) == ([1.0, 1.0], [-1.0, -1.0])
        assert [v for v, _ in a.parts] == [1] and [v for v, _ in b.parts] == [4]
        assert (a.played, a.env_steps) == (b.played, b.env_steps) == (2, 6)
        await server.close("t/b")
        assert not await server.put_many([("t/a", 1, _games(1.0, 1)), ("t/b", 4, _games(1.0, 1))], 1, 1)

    asyncio.run(scenario())


def test_an_on_policy_stream_opens_with_its_wish_and_a_worker_gets_no_more_of_it() -> None:
    """Two co-learning on-policy learners: a worker that reserves while only one stream
    is open gets nothing; once both are open, exactly the wished games of those versions.
    (Opened first and wished for after, the second stream took unlimited games of its
    first version from a worker in between: it later dropped them as stale, and a run on
    one worker stopped equalling the local one.)"""
    async def scenario() -> None:
        server = EpisodeServerActor()
        held = [("t/a", 1), ("t/b", 1)]
        await server.open("t/a", (1, 32))
        assert await server.reserve(held, 100, 0.01) == (0, -1)  # t/b is not open yet
        await server.open("t/b", (1, 32))
        assert await server.reserve(held, 100, 0.01) == (32, 0)
        assert await server.reserve(held, 100, 0.01) == (0, -1)  # used up until the next wish
        await server.open("t/off")  # an off-policy learner's stream: no wish, no limit
        assert await server.reserve([("t/off", 3)], 100, 0.01) == (100, -1)

    asyncio.run(scenario())


def test_episode_server_drops_the_streams_of_ended_attempts() -> None:
    async def scenario() -> None:
        server = EpisodeServerActor(capacity=5)
        for attempt in range(50):
            key = f"p#{attempt}"
            waiter = asyncio.ensure_future(server.wait_open(key, 5))
            await asyncio.sleep(0)
            await server.open(key)
            assert await waiter == "open"
            assert await server.put(key, 1, _games(1.0, 3), 3, 3)
            batch = await server.take(key, min_items=1, min_version=1, timeout_s=0.01)
            assert _returns(batch) == [1.0] * 3 and not batch.closed
            await server.close(key)
        assert await server.size() == 0  # nothing kept of 50 ended attempts
        assert await server.wait_open("p#0", 0.01) == "closed"  # still refused when late
        assert not await server.put("p#0", 2, _games(1.0, 1), 1, 1) and await server.size() == 0
        await server.open("p#0")
        assert (await server.take("p#0", min_items=1, min_version=0, timeout_s=0.01)).closed
        assert await server.wait_open("never", 0.01) == "new" and await server.size() == 0  # a wait leaves nothing
        assert not await server.put("never", 1, _games(1.0, 1), 1, 1) and await server.size() == 0
        await server.open("k")
        waiter = asyncio.ensure_future(server.take("k", min_items=1, min_version=0, timeout_s=5))
        await asyncio.sleep(0.01)
        await server.close("k")  # wakes its learner, which stops
        assert (await waiter).closed and await server.size() == 0

    asyncio.run(scenario())


def test_parameter_server_versions() -> None:
    server = ParameterServerActor()
    assert server.pull("k", 0) is None and server.version("k") == 0
    assert server.push("k", ["w1"]) == 1 and server.push("k", ["w2"]) == 2  # type: ignore[list-item]
    assert server.pull("k", 1) == (2, ["w2"]) and server.pull("k", 2) is None
    server.drop("k")
    assert server.version("k") == 0


def test_ray_errors_become_one_line() -> None:
    died = ActorDiedError()
    assert actor_died(died) and first_line(died) == "The actor died unexpectedly before finishing this task."
    task_error = RayTaskError("evaluate", "Traceback ...\n  many lines", ValueError("bad value\nmore"))
    assert not actor_died(task_error) and first_line(task_error) == "ValueError: bad value"
    retries = Retries("rollout worker", 1)
    retries.failed("batch", died)
    with pytest.raises(RayBackendError, match=r"^ray backend: rollout worker failed 2 times: The actor died"):
        retries.failed("batch", died)
    user = RayTaskError("train", "Traceback", ConfigError("algorithm.params.x: must be >= 1"))
    with pytest.raises(ConfigError, match=r"^algorithm.params.x: must be >= 1$"):
        retries.failed("other", user)  # the component's own error, not retried


def test_config_defaults_and_validation() -> None:
    config = RayConfig()
    assert config.address is None and config.local and config.num_rollout_workers == 2
    assert not RayConfig(address="auto").local and not RayConfig(address="ray://head:10001").local
    assert RayConfig(address="10.0.0.1:6379").address == "10.0.0.1:6379"
    with pytest.raises(ValueError, match="must be null"):
        RayConfig(address="http://head/")
    with pytest.raises(ValueError):
        RayConfig(num_rollout_workers=0)
    assert config.task_timeout_s == 3600 and RayConfig(task_timeout_s=None).task_timeout_s is None
    with pytest.raises(ValueError, match="must be > 0"):
        RayConfig(task_timeout_s=0)


def _learner(key: str, population: str, init: LearnerInit | None = None) -> LearnerSpec:
    return LearnerSpec(key=key, population=population, seats=(population,), seed=0, init=init or LearnerInit())


def test_placement_keeps_each_learner_in_one_actor_and_restores_it_after_a_replacement(
        caplog: pytest.LogCaptureFixture) -> None:
    placement = Placement(("player_0", "player_1"))
    colearn = TrainTask(learners=(_learner("a", "player_1"), _learner("b", "player_0")), seed=0)
    assert placement.slot(colearn) == 1  # the first learner's population's actor
    state = LearnerState(key="a", population="player_1", seed=0, weights={"w": np.ones(2)})
    placement.done(colearn, 1, 0, TrainResult(states={"a": state}))
    later = TrainTask(learners=(_learner("b", "player_0", LearnerInit(kind="continue")),), seed=1)
    assert placement.slot(later) == 1  # b stays where it was started, not in player_0's actor
    assert placement.task_for(later, 1, 0, retry=False).learners[0].init.kind == "continue"
    again = TrainTask(learners=(_learner("a", "player_1", LearnerInit(kind="continue", policy_id="player_1/3")),),
                      seed=2)
    caplog.set_level(logging.WARNING, logger="popmarl_ray")
    restored = placement.task_for(again, 1, 1, retry=False).learners[0].init  # actor 1 was replaced
    assert restored.kind == "restore" and restored.state is state and restored.policy_id == "player_1/3"
    assert ("ray backend: learner actor for player_1 died and was replaced; learner a rebuilt from its last "
            "checkpointed state") in caplog.text
    with pytest.raises(RayBackendError, match=r"^ray backend: learner b: its learner actor \(that of player_1\) "
                                              r"died and was replaced, and no state of it was returned"):
        placement.task_for(later, 1, 1, retry=False)  # b's state was never returned
    with pytest.raises(RayBackendError, match=r"^ray backend: learner c: init continue, but no learner actor holds"):
        placement.task_for(TrainTask(learners=(_learner("c", "player_0", LearnerInit(kind="continue")),), seed=0),
                           0, 0, retry=False)
    placement.done(TrainTask(learners=(_learner("d", "player_0"),), seed=0), 0, 0, TrainResult())
    with pytest.raises(RayBackendError, match=r"co-trains learners held by different learner actors \(a by that of "
                                              r"player_1, d by that of player_0\)"):
        placement.slot(TrainTask(learners=(_learner("a", "player_1"), _learner("d", "player_0")), seed=0))


def test_placement_spreads_new_keys_of_one_population_over_the_least_busy_actors() -> None:
    """Per key, not per population: a call's tasks go to the actor with the fewest of them,
    the learner's own population's actor first on a tie, then the one holding fewest keys."""
    placement = Placement(("player_0", "player_1", "learner2"))
    running = [0, 0, 0]
    slots = []
    for key in ("main", "exploiter", "league_exploiter", "main2"):
        slot = placement.slot(TrainTask(learners=(_learner(key, "player_0"),), seed=0), running)
        running[slot] += 1
        slots.append(slot)
    assert slots == [0, 1, 2, 0]
    for key, slot in zip(("main", "exploiter", "league_exploiter"), slots):
        placement.done(TrainTask(learners=(_learner(key, "player_0"),), seed=0), slot, 0, TrainResult())
    held_twice = TrainTask(learners=(_learner("exploiter", "player_0", LearnerInit(kind="continue")),), seed=1)
    assert placement.slot(held_twice, [5, 0, 0]) == 1  # a key stays where it lives, however busy
    fresh = TrainTask(learners=(_learner("new", "player_1"),), seed=1)
    assert placement.slot(fresh, [1, 1, 1]) == 1  # a tie: its population's actor
    assert placement.slot(fresh, [0, 1, 0]) == 0  # else the least busy, then fewest keys held (0 and 2 hold one)
