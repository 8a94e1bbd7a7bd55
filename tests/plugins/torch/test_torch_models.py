"""Network models (popmarl_torch.models): ``mlp`` keeps the networks of runs made before
models, image observations get ``cnn`` by default and it learns an image game, a user's
module by path and a model plugin from outside, pip-installed, are used by name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from image_game import OPTIMAL, UNIFORM, ImageGame, images

import popmarl
from popmarl.api import Box, ConfigError, Discrete, Observations, PolicySpace, Space
from popmarl.builtin.random_policy import UniformRandomPolicy
from popmarl.data.learners import LearnerSpec
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.policies import PolicySpec
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.engine.learner_loop import run_task
from popmarl.engine.learners import Learners
from popmarl.engine.rollout import RolloutWorker
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl_torch.mlp import mlp
from popmarl_torch.models import CNN, Model, network, resolve
from popmarl_torch.seeding import seeded

pytestmark = pytest.mark.skipif("ppo" not in popmarl.algorithms.names(),
                                reason="the torch algorithms (plugin popmarl-tianshou) are not installed")

HERE = Path(__file__).resolve().parent
POPMARL = str(Path(sys.executable).parent / "popmarl")
ALGORITHMS = ("dqn", "ppo", "a2c")
IMAGE = Box(shape=(8, 8, 3), low=0, high=255, dtype="uint8")
FLAT = Box(shape=(5,), low=-1.0, high=1.0)


def _space(observation: Space, actions: int = 4) -> PolicySpace:
    return PolicySpace(population="p", agents=("a",), observation_space=observation, action_space=Discrete(n=actions))


def _registries() -> dict[str, Any]:
    return {"envs": popmarl.envs.with_component("which_quadrant", ImageGame)}


def _run(tmp_path: Path, algorithm: dict[str, Any], **config: Any) -> dict[str, Any]:
    raw = {"scenario": "psro", "env": "which_quadrant", "algorithm": algorithm, "solver": "uniform",
           "stopping": {"max_iterations": 1}, "training": {"max_env_steps": 256, "episodes_per_update": 64},
           "evaluation": {"episodes_per_entry": 16}, "trackers": [], **config}
    summary = popmarl.run(popmarl.validate(raw, registries=_registries()), out=str(tmp_path / "run"),
                          registries=_registries())
    assert summary["status"] == "completed", summary
    return summary


@pytest.mark.parametrize("name", ALGORITHMS)
def test_image_observations_get_cnn_by_default_and_flat_ones_the_same_mlp(name: str) -> None:
    algorithm = popmarl.algorithms.load(name)(hidden=[32, 16])
    assert "cnn" in algorithm.describe(_space(IMAGE)) and "mlp" not in algorithm.describe(_space(IMAGE))
    weights = algorithm.make_policy(space=_space(IMAGE), seed=0).get_weights()
    assert any(".convs.0.weight" in key for key in weights)
    # A flat observation: the networks of runs made before models, name for name and weight for weight.
    assert algorithm.describe(_space(FLAT)).startswith(("q-network mlp [32, 16]", "actor mlp [32, 16]"))
    flat = algorithm.make_policy(space=_space(FLAT), seed=3).get_weights()
    with seeded(3):
        expected = mlp(5, [32, 16], 4, out_gain=None if name == "dqn" else 0.01)
    prefix = "q.net" if name == "dqn" else "actor.net"
    assert sorted(k for k in flat if k.startswith(prefix)) == sorted(f"{prefix}.{k}" for k in expected.state_dict())
    for key, value in expected.state_dict().items():
        np.testing.assert_array_equal(flat[f"{prefix}.{key}"], value.numpy())


def test_cnn_reads_channels_first_or_last_and_scales_uint8() -> None:
    last = IMAGE
    first = Box(shape=(3, 8, 8), low=0, high=255, dtype="uint8")
    floats = Box(shape=(8, 8, 3), low=0.0, high=1.0)
    rng = np.random.default_rng(0)
    hwc = images(rng.integers(0, 4, size=5), 8, rng).astype(np.float32)
    chw = hwc.transpose(0, 3, 1, 2)
    outputs = []
    for space, batch in ((last, hwc), (first, chw), (floats, hwc / 255)):
        with seeded(0):
            net = network(CNN(channels=[4, 8]), space, 4)
        outputs.append(net(torch.as_tensor(batch.reshape(5, -1), dtype=torch.float32)).detach().numpy())
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outputs[2], outputs[0], rtol=1e-5, atol=1e-6)


def test_cnn_refuses_a_flat_observation_and_a_stack_too_large_for_the_image() -> None:
    with pytest.raises(ConfigError, match="image observations"):
        resolve("cnn", FLAT, hidden=[8]).build(FLAT)
    with pytest.raises(ConfigError, match="do not fit"):
        CNN(channels=[4, 4, 4], kernels=[5]).build(IMAGE)


def test_a_wrong_model_fails_when_the_config_is_validated() -> None:
    raw = {"env": "matrix", "algorithm": {"name": "ppo", "params": {"critic_model": {"name": "cnn",
                                                                                     "params": {"chanels": [8]}}}}}
    with pytest.raises(ConfigError, match=r"algorithm.params.critic_model: model cnn: params.chanels: unknown key "
                                          r"\(did you mean 'channels'\?\); allowed: channels, "):
        popmarl.validate(raw)
    with pytest.raises(ConfigError, match=r"unknown model 'cnnn' \(did you mean 'cnn'\?\)"):
        popmarl.validate({"env": "matrix", "algorithm": {"name": "dqn", "params": {"model": "cnnn"}}})


def test_a_recurrent_model_is_refused_by_a_feedforward_algorithm(monkeypatch: pytest.MonkeyPatch) -> None:
    class Remembers(Model):
        recurrent = True

        def build(self, space: Space, *, extra: int = 0) -> Any:
            return torch.nn.GRU(1, 1)

    monkeypatch.setattr(popmarl, "models", popmarl.models.with_component("remembers", Remembers))
    with pytest.raises(ConfigError, match="model: model remembers is recurrent"):
        popmarl.algorithms.load("dqn")(model="remembers").make_policy(space=_space(FLAT), seed=0)


def _train(algorithm: Any, *, steps: int, seed: int = 0) -> Any:
    """A fresh policy of ``algorithm`` trained as player_0 of the image game against a
    uniformly random player_1, through the rollout engine."""
    env = ImageGame()
    space = PolicySpace(population="player_0", agents=("player_0",), observation_space=env.observation_space("player_0"),
                        action_space=env.action_space("player_0"))
    opponent = UniformRandomPolicy(4)
    snapshot = PolicySpec(policy_id="player_0/new", population="player_0", algorithm="test", iteration=1)
    task = TrainTask(learners=(LearnerSpec(key="player_0", population="player_0", seats=("player_0",), seed=seed,
                                           snapshot=snapshot),),
                     seed=seed, opponents=MetaStrategy.independent({"player_1": (("player_1/0",), [1.0])}),
                     budget=TrainBudget(max_env_steps=steps, episodes_per_update=64))
    learners = Learners({"player_0": PopulationAlgorithm(space=space, algorithm=algorithm, env=env)})
    (frozen,) = run_task(task, learners=learners, rollout=RolloutWorker(env=env, num_envs=64),
                         policy_of={"player_1/0": opponent}.__getitem__).policies
    policy = algorithm.make_policy(space=space, seed=0)
    policy.set_weights(frozen.weights)
    return policy


def test_the_default_cnn_learns_the_image_game_to_nine_tenths_of_optimal() -> None:
    """PPO with no model configured (so ``cnn``: the observations are images) names the
    quadrant of the square on fresh images at least 90% as well as the optimum."""
    algorithm = popmarl.algorithms.load("ppo")(lr=1e-3, batch_size=64, epochs=4)
    assert "actor cnn" in algorithm.describe(_space(IMAGE))
    policy = _train(algorithm, steps=6_000)
    rng = np.random.default_rng(123)
    quadrants = rng.integers(0, 4, size=2000)
    batch = Observations(obs=images(quadrants, 8, rng), agent="player_0")
    value = float(np.mean(policy.probabilities(batch)[np.arange(2000), quadrants]))
    assert value >= 0.9 * OPTIMAL > UNIFORM, value


def test_the_run_log_names_each_network_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, {"name": "ppo", "params": {"critic_model": {"name": "cnn", "params": {"channels": [4]}}}})
    out = capsys.readouterr().out
    assert ("popmarl: ppo (player_0, player_1): actor cnn channels [16, 32] kernels [3] strides [1] hidden [128], "
            "critic cnn channels [4] kernels [3] strides [1] hidden [128]\n") in out, out


def test_a_user_module_by_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = {"name": "module", "params": {"path": "user_nets:Pooled", "kwargs": {"width": 12}}}
    _run(tmp_path, {"name": "dqn", "params": {"model": model, "learning_starts": 64, "batch_size": 32}})
    assert "popmarl: dqn (player_0, player_1): q-network module user_nets:Pooled\n" in capsys.readouterr().out
    weights = np.load(tmp_path / "run" / "checkpoints" / "policies" / "player_0" / "1.npz")
    assert weights["q.net.0.layer.weight"].shape == (12, 3) and weights["q.net.1.weight"].shape == (4, 12)


@pytest.fixture(scope="module")
def tiny_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model plugin popmarl-tiny-model, installed into a folder of its own (no network,
    no isolation); the runs put it on ``PYTHONPATH``."""
    root = tmp_path_factory.mktemp("tiny-model")
    shutil.copytree(HERE / "popmarl-tiny-model", root / "src",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                             "--no-index", "--target", str(root / "site"), str(root / "src")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return root / "site"


def test_a_model_plugin_from_outside_is_used_by_name(tiny_site: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tiny_site), "POPMARL_STRICT_PLUGINS": "1"}

    def popmarl_cli(*args: str) -> str:
        result = subprocess.run([POPMARL, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout

    (row,) = [r for r in popmarl_cli("plugins", "--check").splitlines() if r.split()[:2] == ["model", "tiny"]]
    assert row.split()[2] == "popmarl-tiny-model" and row.split()[-1] == "ok", row
    config = tmp_path / "tiny.yaml"
    config.write_text("scenario: psro\nenv: {name: matrix, params: {game: rps}}\n"
                      "algorithm: {name: ppo, params: {model: {name: tiny, params: {width: 6}}}}\n"
                      "stopping: {max_iterations: 1}\ntraining: {max_env_steps: 256}\ntrackers: []\n")
    out = popmarl_cli("run", str(config), "--out", str(tmp_path / "run"))
    assert "popmarl: ppo (player_0, player_1): actor tiny width 6, critic tiny width 6\n" in out, out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "completed"
    weights = np.load(tmp_path / "run" / "checkpoints" / "policies" / "player_0" / "1.npz")
    assert weights["actor.net.0.0.weight"].shape == (6, 1) and weights["actor.net.1.weight"].shape == (3, 6)


@pytest.mark.parametrize(("algorithm", "mapping"), [("vdn", "shared"), ("mappo", "per_player")])
def test_a_team_of_image_observations_gets_cnn(algorithm: str, mapping: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A team's networks read every seat at once (``[B, seats, D]``), with the seat's id
    appended where a population plays several seats (``shared``)."""
    params = {"learning_starts": 16, "batch_size": 16} if algorithm == "vdn" else {"minibatches": 1, "epochs": 1}
    raw = {"scenario": "marl", "env": "which_quadrant", "agents": {"mapping": mapping},
           "algorithm": {"name": algorithm, "params": {**params, "model": {"name": "cnn", "params": {"channels": [4]}}}},
           "stopping": {"max_iterations": 1}, "training": {"max_env_steps": 128, "episodes_per_update": 16,
                                                           "num_envs": 16},
           "evaluation": {"episodes_per_entry": 8}, "trackers": []}
    summary = popmarl.run(popmarl.validate(raw, registries=_registries()), out=str(tmp_path / "run"),
                          registries=_registries())
    assert summary["status"] == "completed", summary
    network = "q-network" if algorithm == "vdn" else "actor"
    critic = "" if algorithm == "vdn" else ", critic mlp [64, 64] tanh"  # the critic reads the state: no cnn
    assert f"{network} cnn channels [4] kernels [3] strides [1] hidden [128]{critic}\n" in capsys.readouterr().out
