"""The ``device`` parameter of dqn, ppo and a2c: updates on the configured device, acting
and published weights on the CPU, a one-line config error for a GPU torch does not see.

CI has no GPU, so the GPU code path (the trainer trains device copies of the policy's
modules and copies them back after each update) is run here on the CPU, forced through
:class:`~popmarl_torch.placement.Placement` ``separate=True``: it must train exactly as
the default CPU path, which trains the policy's own modules.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from tianshou.data import Batch
from tianshou_helpers import ALGORITHMS, BOX_SPACE, Bandit, algorithm, box_episodes, run_psro

import popmarl
from popmarl.interfaces.algorithm import Algorithm, PolicySpace, TrainerContext
from popmarl.errors import ConfigError
from popmarl.interfaces.policy import Policy
from popmarl.data.episodes import Episode
from popmarl.data.policies import Weights
from popmarl.runs.rundir import RunDirectory
from popmarl.interfaces.trainer import Trainer
from popmarl_torch.devices import resolve_device
from popmarl_torch.nets import CategoricalActor, GaussianActor, QNet, ValueCritic
from popmarl_torch.placement import Placement
from popmarl_torch.policies import TorchPolicy

SMALL: dict[str, dict[str, Any]] = {
    "dqn": {"hidden": [16], "learning_starts": 16, "batch_size": 16, "buffer_size": 100, "target_update_freq": 5,
            "n_step": 2, "eps_decay_steps": 500},
    "ppo": {"hidden": [16], "batch_size": 16, "epochs": 2},
    "a2c": {"hidden": [16], "batch_size": 16},
}
BANDIT = Bandit.make()
Collect = Callable[[Policy, np.random.Generator], list[Episode]]


def bandit(policy: Policy, rng: np.random.Generator) -> list[Episode]:
    return BANDIT.episodes(policy, 40, rng)


def box(policy: Policy, rng: np.random.Generator) -> list[Episode]:
    return box_episodes(policy, 40, rng)


def learner(algo: Algorithm, space: PolicySpace) -> tuple[TorchPolicy, Trainer]:
    policy = algo.make_policy(space=space, seed=0)
    trainer = algo.make_trainer(policy=policy, space=space, seed=0,
                                context=TrainerContext.alone(policy=policy, space=space))
    assert isinstance(policy, TorchPolicy) and trainer is not None
    return policy, trainer


def parameters(policy: TorchPolicy) -> list[torch.Tensor]:
    return [p for module in policy.modules.values() for p in module.parameters()]


def trained_modules(trainer: Trainer) -> list[torch.nn.Module]:
    """The modules the trainer's Tianshou algorithm updates for the policy."""
    tianshou_policy = trainer.algorithm.policy  # type: ignore[attr-defined]
    return [getattr(tianshou_policy, "model", None) or tianshou_policy.actor]


def completed_rps_run(tmp_path: Path, name: str, params: dict[str, Any], *, iterations: int) -> Path:
    """A small psro run of ``name`` with ``params`` on rock-paper-scissors, which must
    complete; its run directory."""
    summary, run_dir = run_psro(tmp_path, name, env={"name": "matrix", "params": {"game": "rps"}},
                                algorithm={"name": name, "params": {**params, "hidden": [16]}},
                                solver={"name": "uniform"}, stopping={"max_iterations": iterations},
                                training={"max_env_steps": 600, "num_envs": 16})
    assert summary["status"] == "completed"
    return run_dir


def stored_arrays(run_dir: Path, policy_id: str) -> Weights:
    """The stored weights of ``policy_id``, which must be plain (CPU) numpy arrays."""
    trained = RunDirectory(run_dir).load_policy(policy_id)
    assert all(isinstance(value, np.ndarray) and value.dtype != object for value in trained.values())
    return trained


# -- cpu and auto ---------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "auto"])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_cpu_and_auto_train_the_policys_own_modules_and_publish_cpu_arrays(name: str, device: str) -> None:
    algo = algorithm(name, **SMALL[name], device=device)
    placement = algo.placement()  # type: ignore[attr-defined]
    if placement is None:  # (a GPU machine: each trainer times auto, see test_device_auto.py)
        return
    assert placement.device == torch.device("cpu") and not placement.separate
    policy, trainer = learner(algo, BANDIT.space)
    assert trained_modules(trainer) == list(policy.modules.values())  # no copy on the CPU
    before = policy.get_weights()
    rng = np.random.default_rng(0)
    for _ in range(3):
        assert "loss" in trainer.update(bandit(policy, rng))
    after = policy.get_weights()
    assert all(isinstance(value, np.ndarray) for value in after.values())
    assert any(not np.array_equal(before[key], after[key]) for key in before), "the update changed nothing"
    assert all(p.device.type == "cpu" for p in parameters(policy))


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_run_with_device_cpu_trains_and_stores_cpu_arrays(tmp_path: Path, name: str) -> None:
    run_dir = completed_rps_run(tmp_path, name, {"device": "cpu"}, iterations=1)
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["algorithm"]["params"]["device"] == "cpu"
    assert not stored_arrays(run_dir, "player_0/1")["initial.uniform"]


# -- a GPU torch does not see, and malformed values ---------------------------------------
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # torch sees no GPU in the child, on any machine


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_a_gpu_is_a_one_line_config_error(device: str, tmp_path: Path, write_config, run_cli) -> None:
    config = write_config(algorithm={"name": "dqn", "params": {"device": device}})
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_cli("run", config, "--out", "out", env=NO_GPU)
    assert result.returncode == 2, result
    assert result.stdout == "", result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result
    assert (f"algorithm.params.device: {device} requested but torch sees no GPU "
            "(torch.cuda.is_available() is False); use auto or cpu") in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_a_gpu_index_out_of_range_is_a_config_error() -> None:
    count = torch.cuda.device_count()
    with pytest.raises(ConfigError) as info:
        popmarl.validate({"env": "matrix", "algorithm": {"name": "ppo", "params": {"device": f"cuda:{count + 3}"}}})
    message = str(info.value)
    assert message.startswith(f"algorithm.params.device: cuda:{count + 3} requested but torch sees ")
    assert "\n" not in message


@pytest.mark.parametrize("field", ["device", "acting_device"])
@pytest.mark.parametrize("value", ["gpu", "cuda:x", "CUDA", "cuda:", "cuda:-1", " cpu", "cpu:0", "mps"])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_malformed_device_names_the_field_and_the_allowed_forms(name: str, value: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        popmarl.validate({"env": "matrix", "algorithm": {"name": name, "params": {field: value}}})
    assert str(info.value) == (f"algorithm.params.{field}: must be auto, cpu, cuda or cuda:N (N a GPU index), "
                               f"got {value!r}")


def test_acting_on_a_gpu_torch_does_not_see_is_a_one_line_config_error(tmp_path: Path, write_config, run_cli) -> None:
    config = write_config(algorithm={"name": "ppo", "params": {"acting_device": "cuda"}})
    result = run_cli("run", config, "--out", "out", env=NO_GPU)
    assert result.returncode == 2, result
    assert result.stderr.strip() == ("popmarl: error: algorithm.params.acting_device: cuda requested but torch sees "
                                     "no GPU (torch.cuda.is_available() is False); use auto or cpu"), result
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ALGORITHMS)
def test_policies_act_on_the_cpu_unless_configured(name: str) -> None:
    """``acting_device`` defaults to ``cpu`` whatever ``device`` is; with ``auto``
    policies are built on the CPU (a trainer moves its own learner's policy where timing
    says: test_device_auto.py); a trainer updating where its policy acts trains the
    policy's own modules."""
    assert algorithm(name).config.acting_device == "cpu"
    for acting, expected in (("cpu", torch.device("cpu")), ("auto", torch.device("cpu"))):
        policy = algorithm(name, hidden=[8], acting_device=acting).make_policy(space=BANDIT.space, seed=0)
        assert isinstance(policy, TorchPolicy)
        assert policy.device == expected and all(p.device == expected for p in parameters(policy))
    assert not algorithm(name, device="cpu", acting_device="cpu").placement().separate
    for device, acting in (("auto", "auto"), ("auto", "cpu")):  # timed by each trainer where torch sees a GPU
        placement = algorithm(name, device=device, acting_device=acting).placement()
        assert placement is None if torch.cuda.is_available() else not placement.separate


def test_a_per_population_device_error_names_its_population() -> None:
    with pytest.raises(ConfigError) as info:
        popmarl.validate({"env": "matrix", "algorithm": {"player_0": {"name": "dqn", "params": {"device": "gpu"}},
                                                         "player_1": "a2c"}})
    assert str(info.value).startswith("algorithm.player_0.params.device: must be auto, cpu, cuda or cuda:N")


def test_resolve_device() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="must be auto, cpu, cuda or cuda:N"):
        resolve_device("tpu")


# -- the GPU path (separate device copies), on the CPU --------------------------------------
def separate(name: str, **params: Any) -> Algorithm:
    """Algorithm ``name`` whose trainers train separate copies of the policy's modules,
    as on a GPU, here on the CPU."""
    base = type(algorithm(name))

    class Separate(base):  # type: ignore[valid-type,misc]
        def placement(self) -> Placement:
            return Placement(device=torch.device("cpu"), separate=True)

    return Separate(**params)


CASES = [*[(name, BANDIT.space, bandit) for name in ALGORITHMS], *[(name, BOX_SPACE, box) for name in ("ppo", "a2c")]]


@pytest.mark.parametrize(("name", "space", "collect"), CASES,
                         ids=[f"{n}-{'box' if s is BOX_SPACE else 'discrete'}" for n, s, _ in CASES])
def test_the_copy_path_trains_exactly_as_the_shared_path(name: str, space: PolicySpace, collect: Collect) -> None:
    """Same seeds, same episodes: the policy trained through device copies (copied back
    after every update) has the shared path's weights bitwise, update after update; a
    policy whose weights are replaced between updates trains from the new weights on
    both paths; the states are the same files, and each path loads the other's."""
    shared_policy, shared = learner(algorithm(name, **SMALL[name], device="cpu"), space)
    copy_algo = separate(name, **SMALL[name], device="cpu")
    copy_policy, copied = learner(copy_algo, space)
    assert all(m not in trained_modules(copied) for m in copy_policy.modules.values())  # it trains copies
    rng = np.random.default_rng(0)
    other = algorithm(name, **SMALL[name], device="cpu").make_policy(space=space, seed=5).get_weights()
    for round_ in range(6):
        if round_ == 3:  # e.g. a learner continued from another policy's weights
            shared_policy.set_weights(other)
            copy_policy.set_weights(other)
        episodes = collect(shared_policy, rng)
        before = copy_policy.get_weights()
        metrics = shared.update(episodes)
        assert "loss" in metrics
        assert copied.update(episodes) == metrics
        after = copy_policy.get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before), "nothing copied back"
        assert all(np.array_equal(value, shared_policy.get_weights()[key]) for key, value in after.items())
    state, weights = shared.state(), shared_policy.get_weights()
    assert copied.state() == state  # byte for byte
    episodes = collect(shared_policy, rng)
    metrics = shared.update(episodes)
    # Either path, rebuilt from the copy path's state, continues as the original did.
    for algo in (copy_algo, algorithm(name, **SMALL[name], device="cpu")):
        policy = algo.make_policy(space=space, seed=9)
        policy.set_weights(weights)
        trainer = algo.make_trainer(policy=policy, space=space, seed=9,
                                    context=TrainerContext.alone(policy=policy, space=space))
        assert trainer is not None
        trainer.load_state(copied.state())
        assert trainer.update(episodes) == metrics
        assert all(np.array_equal(v, shared_policy.get_weights()[k]) for k, v in policy.get_weights().items())
        assert trainer.state() == shared.state()


# -- networks feed their inputs to their own device ------------------------------------------
NETS = {
    "qnet": lambda: QNet(4, 3, [8]),
    "categorical": lambda: CategoricalActor(4, 3, [8]),
    "gaussian": lambda: GaussianActor(4, 2, [8], log_std_init=-0.5),
    "critic": lambda: ValueCritic(4, [8]),
}


@pytest.mark.parametrize("name", NETS)
def test_a_network_moved_to_a_device_takes_numpy_batches_there(name: str) -> None:
    """What a trainer on a GPU does with Tianshou's numpy batches, on torch's ``meta``
    device (shapes without data), which any machine has; back on the CPU, the inputs
    stay where they are (None: no transfer on the acting path)."""
    net = NETS[name]()
    obs = Batch(obs=np.eye(4, dtype=np.float32)[[0, 1]], mask=np.array([[True, False, True], [True, True, False]]))
    assert net.input_device is None
    net.to("meta")
    assert net.input_device == torch.device("meta")
    out = net(obs) if name == "critic" else net(obs)[0]
    for tensor in out if isinstance(out, tuple) else (out,):
        assert tensor.device.type == "meta" and tensor.shape[0] == 2
    net.to_empty(device="cpu")
    assert net.input_device is None
    out = net(obs) if name == "critic" else net(obs)[0]
    assert all(t.device.type == "cpu" for t in (out if isinstance(out, tuple) else (out,)))


# -- a real GPU (skipped where torch sees none: CI; run on a GPU machine) --------------------
def without_devices(metrics: dict[str, float]) -> set[str]:
    """The metric names but those naming the device (``device/cpu``, ``device/cuda:0``...)."""
    return {key for key in metrics if not key.startswith(("device/", "acting_device/", "device_ms/",
                                                          "acting_device_ms/"))}


requires_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU")


@requires_gpu
@pytest.mark.parametrize(("name", "space", "collect"), CASES,
                         ids=[f"{n}-{'box' if s is BOX_SPACE else 'discrete'}" for n, s, _ in CASES])
def test_on_a_gpu_updates_run_there_and_train_as_on_the_cpu(name: str, space: PolicySpace, collect: Collect) -> None:
    """``device: cuda``: the trainer's modules are on the GPU, the policy's stay on the CPU
    and publish CPU arrays, and the weights track the CPU path's to float tolerance
    (cuBLAS and the CPU kernels sum in different orders; TF32 is off by default)."""
    cpu_policy, cpu = learner(algorithm(name, **SMALL[name], device="cpu"), space)
    gpu_policy, gpu = learner(algorithm(name, **SMALL[name], device="cuda"), space)
    assert all(p.device.type == "cuda" for module in trained_modules(gpu) for p in module.parameters())
    rng = np.random.default_rng(0)
    for _ in range(4):
        episodes = collect(cpu_policy, rng)
        expected, got = cpu.update(episodes), gpu.update(episodes)
        assert without_devices(got) == without_devices(expected)
        assert got[f"device/cuda:{torch.cuda.current_device()}"] == expected["device/cpu"] == 1.0
        assert all(p.device.type == "cpu" for p in parameters(gpu_policy))
        weights = gpu_policy.get_weights()
        for key, value in cpu_policy.get_weights().items():
            assert isinstance(weights[key], np.ndarray)
            np.testing.assert_allclose(weights[key], value, rtol=1e-3, atol=1e-4, err_msg=key)


@requires_gpu
@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_gpu_trainer_state_resumes_on_the_cpu_and_back(name: str) -> None:
    """A checkpoint written by a GPU trainer loads into a CPU trainer and vice versa
    (states hold CPU tensors), and the resumed trainer continues to float tolerance."""
    space = BANDIT.space
    rng = np.random.default_rng(1)
    gpu_policy, gpu = learner(algorithm(name, **SMALL[name], device="cuda"), space)
    for _ in range(3):
        gpu.update(bandit(gpu_policy, rng))
    state, weights = gpu.state(), gpu_policy.get_weights()
    episodes = bandit(gpu_policy, rng)
    gpu.update(episodes)
    for device in ("cpu", "cuda"):
        algo = algorithm(name, **SMALL[name], device=device)
        policy = algo.make_policy(space=space, seed=3)
        policy.set_weights(weights)
        trainer = algo.make_trainer(policy=policy, space=space, seed=3,
                                    context=TrainerContext.alone(policy=policy, space=space))
        assert trainer is not None
        trainer.load_state(state)
        trainer.update(episodes)
        for key, value in gpu_policy.get_weights().items():
            np.testing.assert_allclose(policy.get_weights()[key], value, rtol=1e-3, atol=1e-4, err_msg=f"{device} {key}")


@requires_gpu
@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_psro_run_with_device_cuda_completes_and_stores_cpu_arrays(tmp_path: Path, name: str) -> None:
    stored_arrays(completed_rps_run(tmp_path, name, {"device": "cuda"}, iterations=2), "player_0/2")


@requires_gpu
@pytest.mark.parametrize("name", ALGORITHMS)
def test_on_a_gpu_policies_acting_there_act_as_on_the_cpu(name: str) -> None:
    """``acting_device: cuda``: the policy's modules are on the GPU, its probabilities
    and Q-values match the same weights on the CPU, its weights publish as CPU arrays,
    and a trainer updating on the same GPU trains the policy's own modules (no copies)."""
    cpu_policy = algorithm(name, **SMALL[name]).make_policy(space=BANDIT.space, seed=0)
    gpu_algo = algorithm(name, **SMALL[name], device="cuda", acting_device="cuda")
    gpu_policy = gpu_algo.make_policy(space=BANDIT.space, seed=0)
    assert isinstance(gpu_policy, TorchPolicy) and gpu_policy.device.type == "cuda"
    weights = gpu_policy.get_weights()
    assert all(isinstance(value, np.ndarray) for value in weights.values())
    cpu_policy.set_weights(weights)
    _, batch = BANDIT.decisions(64, np.random.default_rng(0))
    np.testing.assert_allclose(gpu_policy.probabilities(batch), cpu_policy.probabilities(batch), atol=1e-5)
    actions = gpu_policy.act(batch, explore=True, rng=np.random.default_rng(1))
    assert actions.shape == (64,) and np.all(batch.mask[np.arange(64), actions])
    policy, trainer = learner(gpu_algo, BANDIT.space)
    assert trained_modules(trainer) == list(policy.modules.values())  # trained where it acts: no copies
    rng = np.random.default_rng(2)
    for _ in range(3):
        assert "loss" in trainer.update(bandit(policy, rng))
    assert all(p.device.type == "cuda" for p in parameters(policy))


@requires_gpu
def test_a_psro_run_acting_on_the_gpu_completes(tmp_path: Path) -> None:
    run_dir = completed_rps_run(tmp_path, "ppo", {"device": "cuda", "acting_device": "cuda"}, iterations=2)
    stored_arrays(run_dir, "player_0/2")
