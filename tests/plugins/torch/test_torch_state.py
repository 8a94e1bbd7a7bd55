"""popmarl-torch's state files: torch files of plain tensors, module states, generators as JSON."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from popmarl.api import CheckpointError
from popmarl_torch.mlp import mlp
from popmarl_torch.state import (copied, generator_from_json, generator_json, load_module, load_modules, module_bytes,
                                 modules_bytes, random_state_from_json, random_state_json, read_torch, torch_bytes)


def test_torch_bytes_and_read_torch_round_trip_plain_containers() -> None:
    obj: dict[str, Any] = {"a": torch.arange(3.0), "nested": [torch.ones(2, 2), (torch.zeros(1), 4)], "n": 7}
    back = read_torch({"x.pt": torch_bytes(obj)}, "x.pt")
    assert torch.equal(back["a"], obj["a"]) and torch.equal(back["nested"][0], torch.ones(2, 2))
    assert isinstance(back["nested"][1], tuple) and back["nested"][1][1] == 4 and back["n"] == 7


class Code:
    """Not a tensor: a torch file holding it must not load with weights_only."""


@pytest.mark.parametrize("content", [b"not a torch file", None])
def test_an_unreadable_torch_file_is_a_one_line_checkpoint_error(content: bytes | None) -> None:
    data = content if content is not None else _pickled_code()
    with pytest.raises(CheckpointError) as info:
        read_torch({"x.pt": data}, "x.pt")
    message = str(info.value)
    assert message.startswith("trainer state x.pt: not a readable torch file (") and "\n" not in message


def _pickled_code() -> bytes:
    import io

    out = io.BytesIO()
    torch.save({"code": Code()}, out)
    return out.getvalue()


def test_a_module_round_trips_and_a_misfit_names_the_key_and_shapes() -> None:
    net = mlp(3, [4], 2)
    state = {"net.pt": module_bytes(net)}
    fresh = mlp(3, [4], 2)
    load_module(state, "net.pt", fresh)
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), fresh.state_dict().values()))
    with pytest.raises(CheckpointError, match=r"^trainer state net.pt: 0.weight has shape \(4, 3\), this trainer's "
                                              r"network needs \(5, 3\) \(another config\?\)$"):
        load_module(state, "net.pt", mlp(3, [5], 2))


def test_module_bytes_is_a_snapshot() -> None:
    net = mlp(3, [], 1)
    layer = net[0]
    assert isinstance(layer, nn.Linear)
    snapshot = copied(net.state_dict())
    data = module_bytes(net)
    with torch.no_grad():
        layer.weight.add_(1.0)
    assert torch.equal(read_torch({"n": data}, "n")["0.weight"], snapshot["0.weight"])
    assert not torch.equal(snapshot["0.weight"], layer.weight)


def test_modules_and_optimisers_round_trip_by_name() -> None:
    net = mlp(2, [3], 1)
    optim = torch.optim.Adam(net.parameters(), lr=0.1)
    net(torch.ones(4, 2)).sum().backward()
    optim.step()
    data = {"trainer.pt": modules_bytes({"net": net, "optim": optim})}
    net2 = mlp(2, [3], 1)
    optim2 = torch.optim.Adam(net2.parameters(), lr=0.5)
    load_modules(data, "trainer.pt", {"net": net2, "optim": optim2})
    assert optim2.param_groups[0]["lr"] == 0.1
    assert torch.equal(optim2.state_dict()["state"][0]["exp_avg"], optim.state_dict()["state"][0]["exp_avg"])
    with pytest.raises(CheckpointError, match=r"^trainer state trainer.pt: holds \['net', 'optim'\], this trainer has "
                                              r"\['net'\]$"):
        load_modules(data, "trainer.pt", {"net": nn.Linear(1, 1)})


def test_numpy_generators_round_trip_through_json() -> None:
    legacy = np.random.RandomState(4)
    legacy.rand(3)
    state = random_state_from_json(random_state_json(legacy.get_state()), "random")
    restored = np.random.RandomState()
    restored.set_state(state)
    assert np.array_equal(restored.rand(5), legacy.rand(5))
    rng = np.random.default_rng(9)
    rng.random(2)
    assert np.array_equal(generator_from_json(generator_json(rng), "rng").random(4), rng.random(4))


@pytest.mark.parametrize("read", [random_state_from_json, generator_from_json])
def test_a_bad_generator_state_is_a_one_line_checkpoint_error(read) -> None:
    with pytest.raises(CheckpointError, match=r"^trainer state trainer.json: rng is not a numpy generator state \("):
        read({"keys": "nonsense"}, "rng")
