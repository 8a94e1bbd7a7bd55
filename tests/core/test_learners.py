"""The train-task protocol in one process (:meth:`popmarl.engine.executor.Executor.train`): how a
learner starts and carries on (``LearnerInit``), co-learning in the same episodes,
opponents drawn per episode from mixtures and from a joint distribution, and learner
states through the run directory.

The learner is ``learning_schedule``'s: version ``v`` of its weights plays the pure action
``schedule[(v - 1) % 3]`` and its trainer's state is its update count, so which weights
played and how many updates a trainer has made are known exactly."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from popmarl.interfaces.backend import Components, RunSetup
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.errors import CheckpointError
from popmarl.engine.executor import Executor
from popmarl.engine.learners import LearnerError
from popmarl.data.population import AgentMapping
from popmarl.data.episodes import Episode
from popmarl.data.learners import LearnerInit, LearnerSpec, LearnerState
from popmarl.data.policies import PolicySpec
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import TrainBudget, TrainResult, TrainTask
from popmarl.runs.rundir import RunDirectory
from popmarl.runs.runner import policy_spaces

from learning_schedule import ScheduleAlgorithm

ROCK, PAPER, SCISSORS = np.eye(3)


def executor(env: MatrixEnv | None = None, mapping: str = "per_player") -> Executor:
    """One process's executor: every population learns with the schedule rock, paper, scissors."""
    env = env or MatrixEnv(game="rps")
    resolved = AgentMapping.resolve(mapping, env.agents)
    algorithms = {p: ScheduleAlgorithm(schedule=[0, 1, 2]) for p in resolved.populations}
    setup = RunSetup(env_name="matrix", env_params={}, algorithms={p: ("schedule", {}) for p in algorithms},
                     mapping=resolved, spaces=policy_spaces(env, resolved), seed=0, train_num_envs=8)
    run = Executor(setup, Components(env=env, algorithms=algorithms))
    for population in resolved.populations:
        for k, probs in enumerate((ROCK, PAPER, SCISSORS)):
            run.add_policy(f"{population}/{k}", {"probs": probs})
    return run


def learner(key: str = "p0", init: LearnerInit | None = None, *, population: str = "player_0",
            seats: tuple[str, ...] = ("player_0",), one_seat: bool = False) -> LearnerSpec:
    return LearnerSpec(key=key, population=population, seats=seats, seed=0, init=init or LearnerInit(),
                       one_seat=one_seat, snapshot=PolicySpec(policy_id=f"{population}/new", population=population,
                                                              algorithm="schedule", iteration=1))


def against(pid: str, agent: str = "player_1") -> MetaStrategy:
    """Seat ``agent`` always played by the frozen policy ``pid``."""
    return MetaStrategy.pure({agent: pid})


def task(*learners: LearnerSpec, episodes: int = 8, per_update: int = 4, opponents: tuple[MetaStrategy, ...] = (),
         return_state: bool = False) -> TrainTask:
    """A task against ``opponents`` (their seats merged into one meta-strategy)."""
    return TrainTask(learners=learners, seed=3, opponents=MetaStrategy.merged(*opponents), return_state=return_state,
                     budget=TrainBudget(max_env_steps=None, max_episodes=episodes, episodes_per_update=per_update))


def train(run: Executor, *learners: LearnerSpec, **kwargs: object) -> TrainResult:
    """A task of ``learners`` against rock in player_1's seat (unless opponents are given)."""
    kwargs.setdefault("opponents", (against("player_1/0"),))
    return run.train(task(*learners, **kwargs))  # type: ignore[arg-type]


def updates(run: Executor, key: str = "p0") -> int:
    trainer = run.learners.held[key].trainer
    return trainer.updates  # type: ignore[union-attr,attr-defined,no-any-return]


def probs(run: Executor, key: str = "p0") -> np.ndarray:
    return np.asarray(run.learners.held[key].policy.get_weights()["probs"])


def snapshot(result: TrainResult) -> np.ndarray:
    (frozen,) = result.policies
    return np.asarray(frozen.weights["probs"])


def recorded(run: Executor, spec: LearnerSpec) -> list[Episode]:
    """Start ``spec``'s learner now; the list fills with the episodes its trainer is given
    (run it on with ``init: continue``)."""
    held = run.learners.prepare(spec, run.policy)
    assert held.trainer is not None
    seen: list[Episode] = []
    update = held.trainer.update
    held.trainer.update = lambda episodes: (seen.extend(episodes), update(episodes))[1]  # type: ignore[method-assign]
    return seen


# -- how a learner starts -----------------------------------------------------------------------
def test_fresh_starts_a_new_learner_and_continue_carries_it_on() -> None:
    run = executor()
    first = train(run, learner())
    assert updates(run) == 2 and first.learner_metrics["p0"]["updates"] == 2
    np.testing.assert_array_equal(snapshot(first), SCISSORS)  # version 3: two updates
    held = run.learners.held["p0"]
    second = train(run, learner(init=LearnerInit(kind="continue")))
    assert run.learners.held["p0"] is held and updates(run) == 4
    np.testing.assert_array_equal(snapshot(second), PAPER)  # version 5: schedule[4 % 3]
    # Against rock: four games with scissors (-1), then four with rock (version 4, 0).
    assert second.learner_metrics["p0"]["window_return"] == -0.5
    train(run, learner())  # fresh again: a new learner, its count from zero
    assert run.learners.held["p0"] is not held and updates(run) == 2


def test_from_starts_a_new_trainer_on_a_frozen_policys_weights() -> None:
    run = executor()
    train(run, learner())
    warm = train(run, learner(init=LearnerInit.start_from("player_0/1")), episodes=4)
    assert updates(run) == 1  # a new trainer
    assert warm.learner_metrics["p0"]["window_return"] == 1.0  # it played paper against rock
    cold = train(run, learner(), episodes=4)
    assert cold.learner_metrics["p0"]["window_return"] == 0.0  # rock against rock


def test_continue_with_a_policy_id_takes_its_weights_and_keeps_the_trainer() -> None:
    run = executor()
    train(run, learner())  # two updates: it plays scissors now
    on = train(run, learner(init=LearnerInit(kind="continue")), episodes=4)
    assert on.learner_metrics["p0"]["window_return"] == -1.0  # scissors against rock
    run2 = executor()
    train(run2, learner())
    kept = train(run2, learner(init=LearnerInit(kind="continue", policy_id="player_0/1")), episodes=4)
    assert kept.learner_metrics["p0"]["window_return"] == 1.0  # paper, the frozen policy's weights
    assert updates(run2) == 3  # the trainer carried on
    np.testing.assert_array_equal(probs(run2), ROCK)  # schedule[3 % 3]


@pytest.mark.parametrize("policy_id", [None, "player_0/1"])
def test_restore_rebuilds_a_learner_from_its_state_in_another_process(policy_id: str | None) -> None:
    """A learner rebuilt from the state a task returned continues exactly as the one that
    stayed in its process."""
    stayed, moved = executor(), executor()
    state = train(stayed, learner(), return_state=True).states["p0"]
    assert state.key == "p0" and state.population == "player_0" and state.trainer
    np.testing.assert_array_equal(state.weights["probs"], SCISSORS)
    on = train(stayed, learner(init=LearnerInit(kind="continue", policy_id=policy_id)), return_state=True)
    again = train(moved, learner(init=LearnerInit.restore(state, policy_id=policy_id)), return_state=True)
    assert updates(moved) == updates(stayed) == 4
    np.testing.assert_array_equal(snapshot(again), snapshot(on))
    assert again.learner_metrics["p0"] == on.learner_metrics["p0"]
    assert dict(again.states["p0"].trainer) == dict(on.states["p0"].trainer)


def test_continue_without_a_held_learner_says_how_to_start_it() -> None:
    with pytest.raises(LearnerError) as raised:
        train(executor(), learner(init=LearnerInit(kind="continue")))
    assert str(raised.value) == ("learner p0: init continue, but this process holds no such learner "
                                 "(start it with fresh, from or restore)")


def test_a_learner_of_another_population_or_an_unknown_one_is_refused() -> None:
    run = executor()
    train(run, learner())
    with pytest.raises(LearnerError, match=r"^learner p0: of population player_0, not player_1$"):
        train(run, learner(init=LearnerInit(kind="continue"), population="player_1", seats=("player_1",)),
              opponents=(against("player_0/0", "player_0"),))
    lost = LearnerState(key="p0", population="player_9", seed=0, weights={"probs": ROCK})
    with pytest.raises(LearnerError, match=r"^learner p0: saved for population player_9, which this run does not "
                                           r"have \(populations: player_0, player_1\)$"):
        train(run, learner(init=LearnerInit.restore(lost)))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "warm"}, "LearnerInit.kind: 'warm' is not allowed; allowed: fresh, from, continue, restore"),
    ({"kind": "from"}, "LearnerInit: kind 'from' needs a policy_id"),
    ({"kind": "fresh", "policy_id": "player_0/1"}, "LearnerInit: kind 'fresh' takes no policy_id"),
    ({"kind": "restore"}, "LearnerInit: state goes with kind 'restore', and only with it"),
    ({"kind": "continue", "state": LearnerState(key="p0", population="player_0", seed=0, weights={})},
     "LearnerInit: state goes with kind 'restore', and only with it"),
])
def test_a_malformed_init_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        LearnerInit(**kwargs)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_a_task_needs_learners_with_distinct_keys() -> None:
    with pytest.raises(ValueError, match="^TrainTask: needs at least one learner$"):
        task()
    with pytest.raises(ValueError, match="^TrainTask: learner keys must differ, got p0, p0$"):
        task(learner(), learner(population="player_1", seats=("player_1",)))


# -- co-learning ------------------------------------------------------------------------------
def test_two_learners_co_learn_in_the_same_episodes() -> None:
    run = executor()
    seen = {"p0": recorded(run, learner("p0")),
            "p1": recorded(run, learner("p1", population="player_1", seats=("player_1",)))}
    result = run.train(task(learner("p0", LearnerInit(kind="continue")),
                            learner("p1", LearnerInit(kind="continue"), population="player_1", seats=("player_1",)),
                            episodes=12))
    assert result.episodes == 12 and result.env_steps == 24
    for key, agent in (("p0", "player_0"), ("p1", "player_1")):
        assert len(seen[key]) == 12 and {e.agent for e in seen[key]} == {agent}
        assert result.learner_metrics[key]["updates"] == 3 and updates(run, key) == 3
    # The same games from both sides: zero-sum returns, episode by episode (same versions
    # in lockstep: rock-rock, paper-paper, scissors-scissors are all draws).
    assert sorted(e.episode_return for e in seen["p0"]) == sorted(-e.episode_return for e in seen["p1"]) == [0.0] * 12
    assert [frozen.spec.population for frozen in result.policies] == ["player_0", "player_1"]


def test_a_task_reports_who_played_each_seat_and_how_each_game_ended() -> None:
    """Versions 1 (rock) and 2 (paper) play 4 games each against rock: 4 draws, then 4 wins."""
    result = train(executor(), learner("p0"), episodes=8, per_update=4)
    assert list(result.outcomes) == [("p0", "player_1/0")]
    counts = result.outcomes[("p0", "player_1/0")]  # win / draw / loss rows, a column per seat
    assert counts[:, 0].tolist() == [4, 4, 0] and counts[:, 1].tolist() == [0, 4, 4]


def test_a_learner_plays_all_its_seats_or_one_per_episode() -> None:
    both = executor(mapping="shared")
    seats = ("player_0", "player_1")
    all_seats = recorded(both, learner("s", population="shared", seats=seats))
    result = both.train(task(learner("s", LearnerInit(kind="continue"), population="shared", seats=seats),
                             episodes=12))
    assert result.episodes == 12 and result.env_steps == 24
    assert [sum(e.agent == a for e in all_seats) for a in seats] == [12, 12]  # both seats of every game

    one = executor(mapping="shared")
    one_seat = recorded(one, learner("s", population="shared", seats=seats, one_seat=True))
    rock = tuple(against("shared/0", a) for a in seats)
    result = one.train(task(learner("s", LearnerInit(kind="continue"), population="shared", seats=seats,
                                    one_seat=True), episodes=400, per_update=100, opponents=rock))
    assert result.episodes == 400 and result.env_steps == 800 and len(one_seat) == 400
    as_first = sum(e.agent == "player_0" for e in one_seat)
    assert 150 < as_first < 250  # drawn uniformly: 200 +- 10 (sd)


def test_a_seat_no_learner_plays_and_no_opponent_covers_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^train task: no opponents for seat player_1 "):
        train(executor(), learner(), opponents=())


# -- opponents drawn per episode ------------------------------------------------------------------
@pytest.fixture
def three_players(tmp_path: Path) -> MatrixEnv:
    """Three players, three actions; player_0 is paid ``3 * a1 + a2``: its return tells
    which pair of actions the other two played."""
    payoffs = np.zeros((3, 3, 3, 3))
    payoffs[0] = (3 * np.arange(3)[None, :, None] + np.arange(3)[None, None, :]) * np.ones((3, 1, 1))
    np.save(tmp_path / "pairs.npy", payoffs)
    return MatrixEnv(game="file", path=str(tmp_path / "pairs.npy"))


def _pair_frequencies(run: Executor, **kwargs: object) -> Mapping[float, float]:
    seen = recorded(run, learner())
    result = run.train(task(learner(init=LearnerInit(kind="continue")), episodes=4000, per_update=500,
                            **kwargs))  # type: ignore[arg-type]
    assert result.episodes == len(seen) == 4000
    values, counts = np.unique([e.episode_return for e in seen], return_counts=True)
    return dict(zip(values.tolist(), (counts / len(seen)).tolist()))


def test_joint_opponents_are_drawn_as_whole_profiles(three_players: MatrixEnv) -> None:
    """Profiles (rock, rock) 1/4 and (paper, scissors) 3/4; (paper, rock) has probability
    0. Drawn seat by seat, (rock, scissors) and (paper, rock) would occur too."""
    joint = MetaStrategy.correlated(("player_1", "player_2"),
                                    (("player_1/0", "player_2/0"), ("player_1/1", "player_2/2"),
                                     ("player_1/1", "player_2/0")), [0.25, 0.75, 0.0])
    frequencies = _pair_frequencies(executor(three_players), opponents=(joint,))
    assert set(frequencies) == {0.0, 5.0}  # 3 * 0 + 0 and 3 * 1 + 2 only
    assert frequencies[5.0] == pytest.approx(0.75, abs=0.03)  # sd 0.007


def test_a_joint_over_some_seats_and_mixtures_for_the_others(three_players: MatrixEnv) -> None:
    joint = MetaStrategy.correlated(("player_1",), (("player_1/0",), ("player_1/1",)), [0.5, 0.5])
    mixture = MetaStrategy.independent({"player_2": (("player_2/0", "player_2/2"), [0.2, 0.8])})
    frequencies = _pair_frequencies(executor(three_players), opponents=(joint, mixture))
    assert set(frequencies) == {0.0, 2.0, 3.0, 5.0}
    expected = {0.0: 0.1, 2.0: 0.4, 3.0: 0.1, 5.0: 0.4}  # independent draws
    for value, p in expected.items():
        assert frequencies[value] == pytest.approx(p, abs=0.03)


# -- learner states in the run directory ------------------------------------------------------
def _states(run: Executor) -> dict[str, LearnerState]:
    result = run.train(task(learner("p0"), learner("p1", population="player_1", seats=("player_1",)),
                            return_state=True))
    return dict(result.states)


def _assert_same_states(loaded: Mapping[str, LearnerState], saved: Mapping[str, LearnerState]) -> None:
    assert sorted(loaded) == sorted(saved)
    for key, state in saved.items():
        got = loaded[key]
        assert (got.key, got.population, got.seed) == (state.key, state.population, state.seed)
        assert sorted(got.weights) == sorted(state.weights)
        for name in state.weights:
            np.testing.assert_array_equal(got.weights[name], state.weights[name])
        assert dict(got.trainer) == dict(state.trainer)


def _commit(run_dir: RunDirectory, iteration: int, learners: Mapping[str, LearnerState] | None) -> dict[str, object]:
    run_dir.commit({"iteration": iteration}, {"x": np.arange(3)}, [{"iteration": iteration}] if iteration else [],
                   learners=learners)
    state, _ = run_dir.load_state()
    return state


def test_learner_states_round_trip_through_the_run_directory(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create("seed: 0\n")
    states = _states(executor())
    _assert_same_states(run_dir.load_learners(_commit(run_dir, 1, states)), states)
    # A learner rebuilt from what was read back continues as the original.
    moved = executor()
    again = train(moved, learner("p0", LearnerInit.restore(run_dir.load_learners(run_dir.load_state()[0])["p0"])))
    assert updates(moved) == 4
    np.testing.assert_array_equal(snapshot(again), PAPER)
    # The next commit replaces the learner directory; one without learners drops it.
    later = {"p0": LearnerState(key="p0", population="player_0", seed=5, weights={"probs": PAPER},
                                trainer={"trainer.json": b'{"updates": 9}'})}
    _assert_same_states(run_dir.load_learners(_commit(run_dir, 2, later)), later)
    assert sorted(p.name for p in run_dir.checkpoints.glob("learners-*")) == ["learners-000002"]
    assert run_dir.load_learners(_commit(run_dir, 3, None)) == {}
    assert not list(run_dir.checkpoints.glob("learners-*"))


@pytest.mark.parametrize("damage", ["learner.json", "weights.npz", "trainer file", "directory"])
def test_a_damaged_learner_checkpoint_is_a_checkpoint_error(tmp_path: Path, damage: str) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create("seed: 0\n")
    state = _commit(run_dir, 1, _states(executor()))
    where = run_dir.checkpoints / str(state["learners"])
    if damage == "learner.json":
        (where / "p1" / "learner.json").write_text("{not json", encoding="utf-8")
    elif damage == "weights.npz":
        (where / "p0" / "weights.npz").write_bytes(b"PK\x03\x04 truncated")
    elif damage == "trainer file":
        for file in (where / "p0" / "trainer").iterdir():
            file.unlink()
    else:
        for file in where.rglob("learner.json"):
            file.unlink()
    with pytest.raises(CheckpointError) as raised:
        run_dir.load_learners(state)
    assert str(where) in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("name", ["policy", "arrays"])
def test_a_damaged_zip_in_a_checkpoint_is_a_checkpoint_error(tmp_path: Path, name: str) -> None:
    """An ``.npz`` cut short (a zip without its directory) is reported like any other
    damage, not as a ``BadZipFile`` traceback."""
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create("seed: 0\n")
    run_dir.save_policy("player_0/0", {"probs": ROCK})
    state = _commit(run_dir, 1, None)
    damaged = run_dir.checkpoints / "policies" / "player_0" / "0.npz" if name == "policy" else run_dir.checkpoints / str(state["arrays"])
    damaged.write_bytes(damaged.read_bytes()[:40])
    with pytest.raises(CheckpointError, match=f"^{damaged}: corrupt or missing"):
        run_dir.load_policy("player_0/0") if name == "policy" else run_dir.load_state()


def test_a_learner_key_that_cannot_name_a_directory_is_refused(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create("seed: 0\n")
    bad = {"a/b": LearnerState(key="a/b", population="player_0", seed=0, weights={"probs": ROCK})}
    with pytest.raises(ValueError, match=r"^learner key 'a/b': may use only letters, digits, _ \. -"):
        run_dir.commit({"iteration": 1}, {}, [{"iteration": 1}], learners=bad)


# -- when training stops -------------------------------------------------------------------------
def test_patience_stops_a_run_whose_return_no_longer_improves() -> None:
    # Against rock, versions play rock, paper, scissors, rock, ...: round returns 0, 1, -1, 0, 1.
    # Round 2 improves on round 1; rounds 3 and 4 do not: patience 2 ends the run there.
    def run_with(**budget: object) -> TrainResult:
        spec = task(learner(), episodes=100)
        limits = TrainBudget(max_env_steps=None, max_episodes=100, episodes_per_update=4, window=4, **budget)
        return executor().train(TrainTask(learners=spec.learners, seed=3, opponents=against("player_1/0"),
                                          budget=limits))

    stopped = run_with(patience=2)
    assert stopped.episodes == 16 and stopped.learner_metrics["p0"]["updates"] == 4
    # Not before min_env_steps (two env steps per game, one per seat): then at once.
    assert run_with(patience=2, min_env_steps=40).episodes == 20
    # A round that beats the best by no more than its standard error is no improvement:
    # without patience the budget runs out.
    assert run_with().episodes == 100
