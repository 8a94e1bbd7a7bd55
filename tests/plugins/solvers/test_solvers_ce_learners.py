"""``ce`` with a learning oracle and ``training.init: previous``: each population carries
on the learner of its first recommendation only (the others start new, under keys of
their own), so a run resumed from its checkpoint ends as an uninterrupted one."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from popmarl.interfaces.algorithm import Algorithm, PolicySpace, TrainerContext
from popmarl.builtin.matrix_env import MixedStrategyPolicy
from popmarl.data.episodes import Episode
from popmarl.interfaces.spaces import Discrete
from popmarl.interfaces.trainer import Trainer, TrainerState


class MomentumTrainer(Trainer):
    """REINFORCE on the strategy's logits with momentum: its velocity is state of its own
    (not the policy's weights), so a carried-on learner differs from a new one."""

    def __init__(self, policy: MixedStrategyPolicy, lr: float = 2.0, momentum: float = 0.9) -> None:
        self.policy, self.lr, self.momentum = policy, lr, momentum
        self.velocity = np.zeros(policy.probs.size)

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        probs = self.policy.probs
        actions = [int(np.asarray(e.actions).reshape(-1)[0]) for e in episodes]
        grad = np.mean([(np.eye(probs.size)[a] - probs) * e.episode_return for a, e in zip(actions, episodes)], axis=0)
        self.velocity = self.momentum * self.velocity + grad
        logits = np.log(np.maximum(probs, 1e-12)) + self.lr * self.velocity
        weights = np.exp(logits - logits.max())
        self.policy.probs = weights / weights.sum()
        return {"episodes": float(len(episodes))}

    def state(self) -> TrainerState:
        return {"trainer.json": json.dumps({"velocity": self.velocity.tolist()}).encode()}

    def load_state(self, state: TrainerState) -> None:
        self.velocity = np.array(json.loads(state["trainer.json"])["velocity"], dtype=float)


class Momentum(Algorithm):
    """``momentum``: a mixed strategy learned by :class:`MomentumTrainer` (test only)."""

    learns = True

    def make_policy(self, *, space: PolicySpace, seed: int) -> MixedStrategyPolicy:
        assert isinstance(space.action_space, Discrete)
        return MixedStrategyPolicy(np.full(space.action_space.n, 1.0 / space.action_space.n))

    def make_trainer(self, *, policy: object, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        assert isinstance(policy, MixedStrategyPolicy)
        return MomentumTrainer(policy)


#: Rock-paper-scissors (BASE_CONFIG's game), ce, the momentum learner carried on.
CONFIG: dict[str, Any] = {
    "algorithm": {"name": "momentum"}, "solver": {"name": "ce"}, "trackers": ["jsonl"],
    "training": {"max_env_steps": None, "max_episodes": 64, "episodes_per_update": 16, "init": "previous"},
}


def _without_times(record: Mapping[str, Any]) -> dict[str, Any]:
    """A summary or metrics line minus everything measured in seconds."""
    return {k: v for k, v in record.items() if not k.endswith("_s")}


def _policies(run_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    """Every policy file of a run, by its path under ``checkpoints/policies``."""
    root = run_dir / "checkpoints" / "policies"
    policies = {}
    for path in sorted(root.rglob("*.npz")):
        with np.load(path, allow_pickle=False) as data:
            policies[str(path.relative_to(root))] = {k: data[k] for k in data.files}
    return policies


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def test_a_resumed_ce_run_with_carried_on_learners_ends_as_an_uninterrupted_one(
        tmp_path: Path, config_writer: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("momentum", Momentum))

    def run(out: str, iterations: int, *, resume: bool = False) -> dict[str, Any]:
        path = config_writer(tmp_path, f"{out}-{iterations}.yaml", stopping={"max_iterations": iterations}, **CONFIG)
        config = popmarl.load_config(str(path))
        return popmarl.run(config, resume=str(tmp_path / out)) if resume else popmarl.run(config, out=str(tmp_path / out))

    straight = run("straight", 4)
    run("cut", 2)
    resumed = run("cut", 4, resume=True)
    metrics = _metrics(tmp_path / "straight")
    # Some population best-responded to several recommendations in one iteration: more
    # than one policy joined it (so the learner carried on into the next one mattered).
    sizes = [[1] + [m[f"population_size/{p}"] for m in metrics] for p in ("player_0", "player_1")]
    assert any(b - a >= 2 for size in sizes for a, b in zip(size[:-1], size[1:])), sizes
    assert resumed["iterations"] == straight["iterations"] == 4
    for key in ("populations", "meta_strategies", "joint_meta_strategy", "nash_conv"):
        assert resumed[key] == straight[key], key
    assert _without_times(resumed) == _without_times(straight)
    policies, expected = _policies(tmp_path / "cut"), _policies(tmp_path / "straight")
    assert sorted(policies) == sorted(expected)
    for name, weights in expected.items():
        for k, array in weights.items():
            np.testing.assert_array_equal(policies[name][k], array, err_msg=name)
    assert [_without_times(m) for m in _metrics(tmp_path / "cut")] == [_without_times(m) for m in metrics]
    # Each further recommendation's learner reports under a key of its own.
    assert any(k.startswith("train/player_0/recommendation1/") for m in metrics for k in m)
