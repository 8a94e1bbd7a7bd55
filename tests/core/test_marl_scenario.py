"""The marl scenario and the rollout engine's learning path, with a small real learner:
a softmax policy over the actions of a one-shot game, trained by REINFORCE."""

from __future__ import annotations

import json

import attrs
import numpy as np
import pytest
import yaml

import popmarl
from learning_schedule import json_state, read_json_state
from popmarl.interfaces.policy import ExplicitPolicy, masked_uniform
from popmarl.data.episodes import Observations


class SoftmaxPolicy(ExplicitPolicy):
    def __init__(self, n: int, seed: int) -> None:
        self.logits = np.random.default_rng(seed).normal(0, 0.01, n)

    def probabilities(self, batch: Observations) -> np.ndarray:
        p = np.exp(self.logits - self.logits.max())
        p = np.broadcast_to(p / p.sum(), (len(batch), p.size)) * masked_uniform(batch.mask, len(batch), p.size)
        return p / p.sum(axis=1, keepdims=True)

    def get_weights(self):
        return {"logits": self.logits.copy()}

    def set_weights(self, weights):
        self.logits = np.array(weights["logits"], dtype=float)


class Reinforce(popmarl.Trainer):
    def __init__(self, policy: SoftmaxPolicy, lr: float) -> None:
        self.policy, self.lr, self.updates = policy, lr, 0

    def update(self, episodes):
        grad = np.zeros_like(self.policy.logits)
        probs = self.policy.probabilities(Observations(obs=np.ones((1, 1))))[0]
        baseline = np.mean([e.episode_return for e in episodes])
        for e in episodes:
            for a, r in zip(e.actions, e.rewards):
                onehot = np.eye(probs.size)[int(a)]
                grad += (onehot - probs) * (r - baseline)
        self.policy.logits += self.lr * grad / len(episodes)
        self.updates += 1
        return {"baseline": float(baseline)}

    def state(self):
        return json_state(updates=self.updates)

    def load_state(self, state):
        self.updates = int(read_json_state(state, "updates")["updates"])


@attrs.frozen(kw_only=True)
class ReinforceConfig:
    lr: float = 0.5


class ReinforceAlgorithm(popmarl.Algorithm):
    learns = True
    Config = ReinforceConfig

    def make_policy(self, *, space, seed):
        return SoftmaxPolicy(space.action_space.n, seed)

    def make_trainer(self, *, policy, space, seed, context):
        return Reinforce(policy, self.config.lr)


@pytest.fixture
def with_reinforce(monkeypatch):
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("reinforce", ReinforceAlgorithm))


def _run(tmp_path, config: dict, name: str = "run"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return popmarl.run(popmarl.load_config(str(path)), out=str(tmp_path / name))


def test_marl_learners_find_the_cooperative_optimum(tmp_path, with_reinforce):
    """A coordination game: both players earn 1 only when both pick action 2."""
    payoffs = np.zeros((2, 3, 3))
    payoffs[:, 2, 2] = 1.0
    np.save(tmp_path / "coord.npy", payoffs)
    summary = _run(tmp_path, {
        "scenario": "marl", "env": {"name": "matrix", "params": {"game": "file", "path": str(tmp_path / "coord.npy")}},
        "algorithm": {"name": "reinforce", "params": {"lr": 2.0}},
        "training": {"max_episodes": 256, "episodes_per_update": 32, "max_env_steps": None},
        "evaluation": {"exact": "never", "episodes_per_entry": 200},
        "stopping": {"max_iterations": 4}, "trackers": [],
    })
    assert summary["status"] == "completed" and summary["iterations"] == 4
    # Random play coordinates with probability 1/9; the learners must do much better.
    assert summary["initial_returns"]["player_0"] < 0.3
    assert summary["mean_returns"]["player_0"] > 0.8
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines] == [1, 2, 3, 4]
    assert all(m["iteration_env_steps"] == 2 * 256 for m in lines)  # two agents decide once per episode


def test_marl_frozen_population_does_not_change(tmp_path, with_reinforce):
    summary = _run(tmp_path, {
        "scenario": {"name": "marl", "params": {"frozen": {"player_1": "initial"}}},
        "env": {"name": "matrix", "params": {"game": "rps"}},
        "algorithm": "reinforce", "training": {"max_episodes": 64, "max_env_steps": None},
        "evaluation": {"episodes_per_entry": 10}, "stopping": {"max_iterations": 2}, "trackers": [],
    })
    assert summary["populations"]["player_1"]["policies"] == ["player_1/0"]
    assert summary["populations"]["player_0"]["policies"] == ["player_0/0", "player_0/1", "player_0/2"]


def test_psro_with_a_learner_beats_the_initial_policy(tmp_path, with_reinforce):
    """PSRO whose oracle learns by rollouts against the meta-strategy (opponents drawn
    once per episode): in prisoner's dilemma the learner must find 'defect' (action 1)."""
    summary = _run(tmp_path, {
        "env": {"name": "matrix", "params": {"game": "prisoners_dilemma"}},
        "algorithm": {"name": "reinforce", "params": {"lr": 1.0}},
        "training": {"max_episodes": 320, "episodes_per_update": 32, "max_env_steps": None},
        "stopping": {"max_iterations": 2}, "trackers": [],
    })
    weights = popmarl.runs.rundir.RunDirectory(tmp_path / "run").load_policy("player_0/2")
    assert np.argmax(weights["logits"]) == 1
    assert summary["nash_conv"] < 0.5


def test_marl_rejects_an_algorithm_that_does_not_learn(tmp_path):
    with pytest.raises(popmarl.ConfigError, match="does not learn"):
        _run(tmp_path, {"scenario": "marl", "env": "matrix", "algorithm": "random", "trackers": [],
                        "stopping": {"max_iterations": 1}})


@pytest.mark.parametrize(("key", "value"), [("self_play", 0.5), ("opponent_epsilon", 0.5), ("keep", "best"),
                                            ("target_win_rate", 0.9)])
def test_marl_rejects_training_keys_that_only_psro_uses(tmp_path, with_reinforce, key, value):
    with pytest.raises(popmarl.ConfigError, match=rf"training\.{key}: applies to scenario psro only"):
        _run(tmp_path, {"scenario": "marl", "env": "matrix", "algorithm": "reinforce", "trackers": [],
                        "training": {"max_episodes": 64, "max_env_steps": None, key: value},
                        "stopping": {"max_iterations": 1}})
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


@pytest.mark.parametrize(("settings", "key"), [
    ({"stopping": {"max_iterations": 1, "target_nash_conv": 0.1}}, "stopping.target_nash_conv"),
    ({"solver": "latest"}, "solver"),
])
def test_marl_rejects_what_only_psro_uses(tmp_path, with_reinforce, settings, key):
    """A solver or a NashConv target would be silently ignored by marl."""
    with pytest.raises(popmarl.ConfigError) as raised:
        _run(tmp_path, {"scenario": "marl", "env": "matrix", "algorithm": "reinforce", "trackers": [],
                        "training": {"max_episodes": 64, "max_env_steps": None},
                        "stopping": {"max_iterations": 1}, **settings})
    assert str(raised.value).startswith(f"{key}: applies to scenario psro only")
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


@pytest.mark.parametrize("null", ["null", ""])
def test_a_psro_config_runs_as_marl_once_its_solver_is_unset(tmp_path, with_reinforce, null):
    """``--set scenario=marl`` on a PSRO config is refused for its solver ("remove it");
    ``--set solver=null`` removes it, and the run goes."""
    path = tmp_path / "psro.yaml"
    path.write_text(yaml.safe_dump({
        "scenario": "psro", "env": "matrix", "algorithm": "reinforce", "solver": {"name": "latest"}, "trackers": [],
        "training": {"max_episodes": 32, "max_env_steps": None}, "evaluation": {"episodes_per_entry": 10},
        "stopping": {"max_iterations": 1}}))
    with pytest.raises(popmarl.ConfigError, match=r"^solver: applies to scenario psro only .*; remove it$"):
        popmarl.run(popmarl.load_config(str(path), ["scenario=marl"]), out=str(tmp_path / "refused"))
    config = popmarl.load_config(str(path), ["scenario=marl", f"solver={null}"])
    summary = popmarl.run(config, out=str(tmp_path / "run"))
    assert summary["scenario"] == "marl" and summary["status"] == "completed" and summary["iterations"] == 1


def test_marl_accepts_the_default_solver_written_out(tmp_path, with_reinforce):
    summary = _run(tmp_path, {"scenario": "marl", "env": "matrix", "algorithm": "reinforce", "trackers": [],
                              "solver": {"name": "uniform"}, "training": {"max_episodes": 32, "max_env_steps": None},
                              "evaluation": {"episodes_per_entry": 10}, "stopping": {"max_iterations": 1}})
    assert summary["status"] == "completed" and summary["iterations"] == 1


def test_psro_self_play_learner_stays_a_best_response_for_its_own_seat(tmp_path, with_reinforce):
    """Each seat is paid 1 for its own action only (seat 0 for action 0, seat 1 for action 1),
    whoever plays the other seat. With self_play 1 each learner plays its own seat against a
    copy of itself and learns from that seat only: player_0 learns action 0, player_1
    action 1 (learning from both seats, each would be pulled both ways)."""
    payoffs = np.zeros((2, 2, 2))
    payoffs[0, 0, :] = 1.0
    payoffs[1, :, 1] = 1.0
    np.save(tmp_path / "own.npy", payoffs)
    _run(tmp_path, {
        "env": {"name": "matrix", "params": {"game": "file", "path": str(tmp_path / "own.npy")}},
        "algorithm": {"name": "reinforce", "params": {"lr": 2.0}},
        "training": {"max_episodes": 320, "episodes_per_update": 32, "max_env_steps": None, "self_play": 1.0},
        "stopping": {"max_iterations": 1}, "trackers": [],
    })
    run = popmarl.runs.rundir.RunDirectory(tmp_path / "run")
    for population, action in (("player_0", 0), ("player_1", 1)):
        logits = run.load_policy(f"{population}/1")["logits"]
        probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        assert probs[action] > 0.9, (population, probs)
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert metrics["iteration_env_steps"] == 2 * 320 * 2  # two learners, 320 games each, two moves a game
