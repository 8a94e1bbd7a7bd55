"""popmarl-torch's networks: seeded construction, MLP shapes and names, the fast paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from popmarl_torch.mlp import inference, mlp, mlp_layout, mlp_params, stacked_inference
from popmarl_torch.nets import GaussianActor, QNet
from popmarl_torch.seeding import seeded
from popmarl_torch.threads import set_torch_threads


def test_seeded_code_is_reproducible_and_leaves_the_global_generator_alone() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    with seeded(7):
        first = mlp(5, [8], 3).state_dict()
    with seeded(7):
        second = mlp(5, [8], 3).state_dict()
    with seeded(8):
        other = mlp(5, [8], 3).state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert not torch.equal(first["0.weight"], other["0.weight"])
    torch.testing.assert_close(torch.rand(3), expected_next)  # as if nothing had been drawn


def test_a_seed_past_torchs_range_is_taken_modulo_2_63() -> None:
    with seeded(5 + (1 << 63)):
        wrapped = torch.rand(4)
    with seeded(5):
        plain = torch.rand(4)
    torch.testing.assert_close(wrapped, plain)


def test_mlp_layers_shapes_and_state_names() -> None:
    net = mlp(6, [16, 8], 3, activation=nn.Tanh, out_gain=0.01)
    assert [type(layer) for layer in net] == [nn.Linear, nn.Tanh, nn.Linear, nn.Tanh, nn.Linear]
    assert {k: tuple(v.shape) for k, v in net.state_dict().items()} == {
        "0.weight": (16, 6), "0.bias": (16,), "2.weight": (8, 16), "2.bias": (8,), "4.weight": (3, 8), "4.bias": (3,)}
    last = net[-1]
    assert isinstance(last, nn.Linear)
    assert torch.count_nonzero(last.bias) == 0 and float(last.weight.detach().abs().max()) < 0.01
    assert net(torch.zeros(10, 6)).shape == (10, 3)
    assert mlp_layout(net) is None  # only ReLU networks run stacked
    assert mlp_layout(mlp(6, [], 3)) == ((3, 6, torch.float32),)


def test_mlp_draws_torchrls_weights_under_one_seed() -> None:
    """popmarl-torchrl's networks were TorchRL MLPs: the same seed gives the same weights."""
    modules = pytest.importorskip("torchrl.modules")
    with seeded(3):
        ours = mlp(5, [16, 16], 4, activation=nn.Tanh, out_gain=0.01)
    with seeded(3):
        theirs = modules.MLP(in_features=5, out_features=4, num_cells=[16, 16], activation_class=nn.Tanh)
        last = [m for m in theirs.modules() if isinstance(m, nn.Linear)][-1]
        with torch.no_grad():
            last.weight.mul_(0.01)
            last.bias.zero_()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert all(torch.equal(ours.state_dict()[k], theirs.state_dict()[k]) for k in ours.state_dict())


def test_inference_and_stacked_inference_match_the_networks() -> None:
    with seeded(0):
        nets = [mlp(4, [8, 8], 3) for _ in range(3)]
    x = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        alone = torch.stack([net(x[k]) for k, net in enumerate(nets)])
        assert torch.equal(torch.stack([inference(net, x[k]) for k, net in enumerate(nets)]), alone)
        torch.testing.assert_close(stacked_inference([mlp_params(net) for net in nets], x), alone)


def test_gaussian_actor_names_its_mean_network_as_asked() -> None:
    tianshou_style = GaussianActor(4, 2, [8], -0.5)
    torchrl_style = GaussianActor(4, 2, [8], -0.5, activation=nn.Tanh, mean_key="mean")
    assert sorted(tianshou_style.state_dict()) == ["log_std", "net.0.bias", "net.0.weight", "net.2.bias", "net.2.weight"]
    assert sorted(torchrl_style.state_dict()) == ["log_std", "mean.0.bias", "mean.0.weight", "mean.2.bias",
                                                  "mean.2.weight"]
    assert torchrl_style.mean_net is torchrl_style.mean
    (loc, scale), state = torchrl_style(np.zeros((3, 4), np.float32))
    assert loc.shape == scale.shape == (3, 2) and state is None
    torch.testing.assert_close(scale, torch.full((3, 2), float(np.exp(-0.5))))


def test_a_qnet_reads_masked_batches_and_follows_its_device() -> None:
    class Masked:
        obs = np.ones((2, 3), np.float32)
        mask = np.array([[True, False], [False, True]])

    net = QNet(3, 2, [4])
    q, _ = net(Masked())
    assert q.shape == (2, 2) and net.input_device is None
    net.to("cpu")
    assert net.input_device is None


def test_set_torch_threads() -> None:
    before = torch.get_num_threads()
    try:
        set_torch_threads(2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
