"""Learning at scale on Ray: every train task is fed by the rollout workers (co-learning
``marl`` too, which ran unfed inside one learner actor before), and learners are placed
per key, so two learners of one population train at the same time."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import ray

from popmarl.interfaces.algorithm import PolicySpace, TrainerContext
from popmarl.interfaces.backend import Components, RunSetup
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.data.population import AgentMapping
from popmarl.data.episodes import Episode, Observations
from popmarl.data.learners import LearnerSpec
from popmarl.data.policies import PolicySpec
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.runs.runner import policy_spaces
from popmarl.interfaces.trainer import Trainer
from popmarl.data.trajectories import JointEpisodes
from popmarl_ray import RayBackend
from ray_helpers import Bandit, BanditPolicy, BanditTrainer, run, with_bandit

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the actors cannot import this module


@attrs.frozen(kw_only=True)
class LogConfig:
    """``log``: the file each exploring act and each update is noted in (pid, time)."""

    log: str = ""


def _note(path: str, what: str) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"{what} {os.getpid()} {time.time():.6f}\n")


def _notes(path: Path, what: str) -> list[tuple[int, float]]:
    return [(int(pid), float(t)) for kind, pid, t in (line.split() for line in path.read_text().splitlines())
            if kind == what]


class LoggedPolicy(BanditPolicy):
    def __init__(self, n_actions: int, log: str) -> None:
        super().__init__(n_actions)
        self.log = log

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if explore:
            _note(self.log, "act")
        return super().act(batch, explore=explore, rng=rng)


class LoggedTrainer(BanditTrainer):
    """A bandit trainer that notes its updates and takes a while over each (as a network would)."""

    def __init__(self, policy: BanditPolicy, log: str) -> None:
        super().__init__(policy)
        self.log = log

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        _note(self.log, "update")
        time.sleep(0.05)
        return super().update(episodes)


class LoggedBandit(Bandit):
    Config = LogConfig

    def make_policy(self, *, space: PolicySpace, seed: int) -> LoggedPolicy:
        return LoggedPolicy(space.action_space.n, self.config.log)  # type: ignore[union-attr]

    def make_trainer(self, *, policy: Any, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        return LoggedTrainer(policy, self.config.log)


def test_a_co_learning_marl_task_is_played_by_the_rollout_workers(tmp_path: Path, monkeypatch: Any) -> None:
    """Two learning populations co-learn in one task: every exploring act happens in a
    rollout worker, none in the learner actor that updates them."""
    with_bandit(monkeypatch)
    import popmarl
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("logged_bandit", LoggedBandit))
    log = tmp_path / "log"
    config = {"scenario": "marl", "env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 4}},
              "algorithm": {"name": "logged_bandit", "params": {"log": str(log)}}, "stopping": {"max_iterations": 2},
              "training": {"max_env_steps": 400, "episodes_per_update": 25}, "trackers": [],
              "backend": {"name": "ray", "params": {"num_rollout_workers": 2}}}
    summary = run(config, tmp_path / "run")
    assert summary["status"] == "completed"
    acting = {pid for pid, _ in _notes(log, "act")}
    updating = {pid for pid, _ in _notes(log, "update")}
    assert len(_notes(log, "update")) >= 2 * 2 * 2  # both learners, both iterations, more than one round each
    assert acting and updating and not acting & updating, (acting, updating)
    assert os.getpid() not in acting | updating
    assert len(acting) == 2  # both workers played


def test_two_learners_of_one_population_train_at_the_same_time(tmp_path: Path) -> None:
    env = MatrixEnv(game="rps")
    mapping = AgentMapping.resolve("shared", env.agents)
    spaces = policy_spaces(env, mapping)
    (population,) = spaces
    log = tmp_path / "log"
    setup = RunSetup(env_name="matrix", env_params={"game": "rps"}, mapping=mapping, spaces=spaces, seed=0,
                     algorithms={population: ("logged_bandit", {"log": str(log)})},
                     local_components={("algorithms", "logged_bandit"): LoggedBandit})
    backend = RayBackend(num_rollout_workers=2, num_learners=2)
    backend.start(setup, Components(env=env, algorithms={population: LoggedBandit(log=str(log))}))
    try:
        backend.add_policy(f"{population}/0", {"q": np.zeros(3), "n": np.zeros(3)})
        opponents = MetaStrategy.pure({"player_1": f"{population}/0"})
        tasks = [TrainTask(learners=(LearnerSpec(key=role, population=population, seats=("player_0",), seed=k,
                                                 snapshot=PolicySpec(policy_id=f"{population}/{k + 1}",
                                                                     population=population, algorithm="logged_bandit",
                                                                     iteration=1)),),
                           seed=k, opponents=opponents, budget=TrainBudget(max_env_steps=2400, episodes_per_update=50))
                 for k, role in enumerate(("main", "exploiter"))]
        results = backend.train(tasks)
        assert [r.policies[0].spec.policy_id for r in results] == [f"{population}/1", f"{population}/2"]
        held = backend.held_learners()
        assert sorted(held.values()) == [["exploiter"], ["main"]]  # one per learner actor
        pids = backend.learner_pids()
    finally:
        backend.close()
    updates = _notes(log, "update")
    by_pid: dict[int, list[float]] = {}
    for pid, t in updates:
        by_pid.setdefault(pid, []).append(t)
    assert set(by_pid) == set(pids.values())
    first, second = (sorted(times) for times in by_pid.values())
    assert len(first) >= 3 and len(second) >= 3
    # The two learners updated at the same time: their updates interleave (one after the
    # other, the merged order would switch learner once).
    merged = sorted([(t, 0) for t in first] + [(t, 1) for t in second])
    switches = sum(1 for (_, a), (_, b) in zip(merged, merged[1:]) if a != b)
    assert switches >= 3, merged


class TeamBanditTrainer(Trainer):
    """One trainer over a team's bandits: each member learns its seat's first action's
    return from the joint view of the team's games."""

    def __init__(self, policies: Mapping[str, Any], log: str) -> None:
        self.policies = policies
        self.log = log

    def update(self, episodes: Any) -> Mapping[str, float]:
        assert isinstance(episodes, JointEpisodes)
        _note(self.log, "update")
        for k, seat in enumerate(episodes.seats):
            policy = self.policies[seat]  # per_player: the seat's population is named after it
            for action, ret in zip(episodes.rows[seat].actions[episodes.starts[:-1]], episodes.returns[:, k]):
                policy.n[action] += 1
                policy.q[action] += (ret - policy.q[action]) / policy.n[action]
        return {"games": float(len(episodes))}

    def state(self) -> Mapping[str, bytes]:
        return {}

    def load_state(self, state: Mapping[str, bytes]) -> None:
        pass


class TeamBandit(LoggedBandit):
    joint_view = True

    def make_trainer(self, *, policy: Any, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        return TeamBanditTrainer(context.policies, self.config.log)


def test_a_team_of_two_populations_trains_on_ray_from_the_workers_games(tmp_path: Path) -> None:
    env = MatrixEnv(game="rps")
    mapping = AgentMapping.resolve("per_player", env.agents)
    spaces = policy_spaces(env, mapping)
    log = tmp_path / "log"
    setup = RunSetup(env_name="matrix", env_params={"game": "rps"}, mapping=mapping, spaces=spaces, seed=0,
                     algorithms={p: ("team_bandit", {"log": str(log)}) for p in spaces},
                     local_components={("algorithms", "team_bandit"): TeamBandit})
    backend = RayBackend(num_rollout_workers=2)
    backend.start(setup, Components(env=env, algorithms={p: TeamBandit(log=str(log)) for p in spaces}))

    def snapshot(population: str) -> PolicySpec:
        return PolicySpec(policy_id=f"{population}/1", population=population, algorithm="team_bandit", iteration=1)

    try:
        spec = LearnerSpec(key="team", population="player_0", seats=("player_0", "player_1"), seed=0,
                           snapshot=snapshot("player_0"), team_snapshots=(snapshot("player_1"),))
        (result,) = backend.train([TrainTask(learners=(spec,), seed=0, return_state=True,
                                             budget=TrainBudget(max_env_steps=800, episodes_per_update=50))])
        pids = backend.learner_pids()
        workers = set(backend.worker_pids())
    finally:
        backend.close()
    counts = {p.spec.population: float(p.weights["n"].sum()) for p in result.policies}
    assert set(counts) == {"player_0", "player_1"} and counts["player_0"] == counts["player_1"] >= 300
    assert set(result.states["team"].members) == {"player_1"}
    acting = {pid for pid, _ in _notes(log, "act")}
    assert acting and acting <= workers and not acting & set(pids.values())
    assert {pid for pid, _ in _notes(log, "update")} <= set(pids.values())


class OnPolicyBandit(Bandit):
    """``bandit`` taken for on-policy: on Ray its learners learn in lock step."""

    on_policy = True


def _final_policies(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    stored = run_dir / "checkpoints" / "policies"
    policies = {}
    for path in sorted(stored.rglob("*.npz")):
        with np.load(path) as data:
            policies[str(path.relative_to(stored))] = {k: data[k] for k in data.files}
    return policies


def test_on_policy_co_learning_on_ray_drops_nothing_and_with_one_worker_equals_local(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Lock step: the workers play only the games an on-policy learner wants of its
    current weights, so nothing is dropped, the budget is kept, and with one worker the
    games are the local backend's (the same seeds per version): the same policies."""
    import popmarl
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("on_policy_bandit", OnPolicyBandit))
    config = {"scenario": "marl", "env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 4}},
              "agents": {"mapping": "per_player"}, "algorithm": "on_policy_bandit", "stopping": {"max_iterations": 2},
              "training": {"max_env_steps": None, "max_episodes": 6 * 32, "episodes_per_update": 32}, "trackers": ["jsonl"]}
    local = run(config, tmp_path / "local")
    one = run({**config, "backend": {"name": "ray", "params": {"num_rollout_workers": 1}}}, tmp_path / "one")
    two = run({**config, "backend": {"name": "ray", "params": {"num_rollout_workers": 2}}}, tmp_path / "two")
    assert local["status"] == one["status"] == two["status"] == "completed"
    want, got = _final_policies(tmp_path / "local"), _final_policies(tmp_path / "one")
    assert list(want) == list(got) and len(want) == 2 * 3
    for name in want:
        for k in want[name]:
            np.testing.assert_array_equal(got[name][k], want[name][k], err_msg=name)
    for run_dir in (tmp_path / "one", tmp_path / "two"):
        metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        for line in metrics:
            assert line["train/dropped_episodes"] == 0
            assert line["train/player_0/updates"] == line["train/player_1/updates"] == 6
            assert line["iteration_env_steps"] == 2 * 6 * 32  # the budget, not a game more (two seats' moves each)


def test_a_leagues_players_train_at_the_same_time(tmp_path: Path, monkeypatch: Any) -> None:
    """Each player of a league is a learner of its own key: with a learner actor each,
    they update at the same time, and the win-rate table learns from the games the
    rollout workers played for them."""
    import popmarl

    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("logged_bandit", LoggedBandit))
    log = tmp_path / "log"
    config = {"scenario": {"name": "league", "params": {"steps_per_round": 1_600}},
              "env": {"name": "matrix", "params": {"game": "rps"}}, "agents": {"mapping": "shared"},
              "algorithm": {"name": "logged_bandit", "params": {"log": str(log)}}, "stopping": {"max_iterations": 2},
              "training": {"episodes_per_update": 50}, "trackers": [],
              "backend": {"name": "ray", "params": {"num_rollout_workers": 2, "num_learners": 3}}}
    summary = run(config, tmp_path / "run")
    assert summary["status"] == "completed"
    assert len(summary["league"]["players"]) == 3
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for player in summary["league"]["players"]:
        assert 0.0 <= metrics[-1][f"win_rate/{player['key']}"] <= 1.0
    updates = _notes(log, "update")
    assert len({pid for pid, _ in updates}) == 3  # a learner actor per player
    by_time = [pid for pid, _ in sorted(updates, key=lambda u: u[1])]
    switches = sum(1 for a, b in zip(by_time, by_time[1:]) if a != b)
    assert switches >= 3 * 2 * 2, by_time  # the players' updates interleave in each round


def test_a_pipelines_learners_train_at_the_same_time(tmp_path: Path, monkeypatch: Any) -> None:
    """Pipeline PSRO on Ray: each population's active learners (one key each) update at
    the same time on learner actors of their own."""
    import popmarl

    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("logged_bandit", LoggedBandit))
    log = tmp_path / "log"
    config = {"scenario": "psro", "env": {"name": "matrix", "params": {"game": "rps"}},
              "agents": {"mapping": "per_player"}, "algorithm": {"name": "logged_bandit", "params": {"log": str(log)}},
              "solver": "uniform", "stopping": {"max_iterations": 2},
              "training": {"max_env_steps": 1_600, "episodes_per_update": 50, "pipeline": 2}, "trackers": [],
              "backend": {"name": "ray", "params": {"num_rollout_workers": 2, "num_learners": 4}}}
    summary = run(config, tmp_path / "run")
    assert summary["status"] == "completed"
    assert [len(p["policies"]) for p in summary["populations"].values()] == [3, 3]
    updates = _notes(log, "update")
    assert len({pid for pid, _ in updates}) == 4  # a learner actor per active learner
    by_time = [pid for pid, _ in sorted(updates, key=lambda u: u[1])]
    switches = sum(1 for a, b in zip(by_time, by_time[1:]) if a != b)
    assert switches >= 4 * 2, by_time
