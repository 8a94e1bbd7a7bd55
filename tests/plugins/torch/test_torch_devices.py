"""popmarl-torch's device settings: parsing, one-line config errors, and ``auto``'s timed choice."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
import torch

import popmarl
from popmarl.api import Algorithm, Box, CheckpointError, ConfigError, Discrete, Observations, Policy, PolicySpace
from popmarl_torch.auto import AutoDevice, DeviceChoice
from popmarl_torch.devices import check_device, device_validator, resolve_device
from popmarl_torch.features import feature_dim
from popmarl_torch.nets import QNet
from popmarl_torch.policies import QPolicy
from popmarl_torch.timing import Step, acting_workload, fastest


@attrs.frozen(kw_only=True)
class ProbeConfig:
    device: str = attrs.field(default="auto", validator=device_validator)
    acting_device: str = attrs.field(default="cpu", validator=device_validator)


class Probe(Algorithm):
    """An algorithm with popmarl-torch's device settings (a Q-policy it never trains)."""

    Config = ProbeConfig

    def make_policy(self, *, space: PolicySpace, seed: int) -> Policy:
        return QPolicy(space=space, qnet=QNet(feature_dim(space.observation_space), 2, [4]))


def validate(**params: Any) -> Any:
    registries = {"algorithms": popmarl.algorithms.with_component("probe", Probe)}
    return popmarl.validate({"env": "matrix", "algorithm": {"name": "probe", "params": params}},
                            registries=registries)


@pytest.mark.parametrize("value", ["gpu", "cuda:x", "CPU", "cuda:"])
def test_a_malformed_device_is_a_one_line_config_error_naming_the_field(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(acting_device=value)
    message = str(info.value)
    assert message == f"algorithm.params.acting_device: must be auto, cpu, cuda or cuda:N (N a GPU index), got {value!r}"


def test_a_gpu_torch_does_not_see_is_a_one_line_config_error() -> None:
    spec = f"cuda:{torch.cuda.device_count() + 2}"
    with pytest.raises(ConfigError) as info:
        validate(device=spec)
    message = str(info.value)
    assert message.startswith(f"algorithm.params.device: {spec} requested but torch sees ") and "\n" not in message


def test_valid_settings_validate_and_resolve() -> None:
    assert validate(device="cpu", acting_device="auto").algorithm is not None
    for spec in ("auto", "cpu"):
        check_device(spec)
    with pytest.raises(ValueError, match=r"^must be auto, cpu, cuda or cuda:N \(N a GPU index\), got 3$"):
        check_device(3)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_fastest_times_every_candidate_and_keeps_the_first_of_the_fastest() -> None:
    seconds = iter([0.3, 0.1, 0.1])

    def timer(step: Step, device: torch.device) -> float:
        step()
        return next(seconds)

    best, timings = fastest(["cpu", "cpu", "cpu"], acting_workload(QNet(3, 2, [4]), rows=5), timer)
    assert best == "cpu" and [s for _, s in timings] == [0.3, 0.1, 0.1]


def test_auto_decides_once_per_workload_and_remembers_a_restored_choice() -> None:
    calls: list[int] = []

    def timer(step: Step, device: torch.device) -> float:
        calls.append(1)
        return 0.002 if len(calls) % 2 else 0.001

    auto = AutoDevice(["cpu", "cpu"], timer)
    workload = acting_workload(QNet(3, 2, [4]), rows=8)
    choice = auto.choose("auto", workload, key="net", rows=8)
    assert choice.timings == (("cpu", 0.002), ("cpu", 0.001)) and choice.rows == 8 and len(calls) == 2
    assert auto.choose("auto", workload, key="net", rows=8) == choice and len(calls) == 2  # cached
    assert auto.choose("cpu", workload, key="net", rows=8).timings == ()  # explicit: never timed
    restored = DeviceChoice.from_json(choice.to_json(), "devices.device")
    assert restored == choice and auto.usable(restored)
    other = AutoDevice(["cpu", "cpu"], timer)
    other.remember("net", restored)
    assert other.choose("auto", workload, key="net", rows=8) == choice and len(calls) == 2


@pytest.mark.parametrize("data", [None, {"spec": "auto"}, {"spec": "tpu", "device": "cpu", "rows": 1, "timings": []},
                                  {"spec": "auto", "device": "cpu", "rows": 1, "timings": [["cpu", float("nan")]]}])
def test_a_malformed_recorded_choice_is_a_checkpoint_error(data: object) -> None:
    with pytest.raises(CheckpointError, match=r"^trainer state trainer.json: devices.device is not a device choice"):
        DeviceChoice.from_json(data, "devices.device")


def test_the_probe_policy_acts() -> None:
    space = PolicySpace(population="p", agents=("a",), observation_space=Box(shape=(3,), low=0.0, high=1.0),
                        action_space=Discrete(n=2))
    policy = Probe().make_policy(space=space, seed=0)
    batch = Observations(obs=np.zeros((4, 3), np.float32), mask=np.array([[True, False]] * 4))
    assert policy.act(batch, explore=False, rng=np.random.default_rng(0)).tolist() == [0, 0, 0, 0]
