"""The policies the algorithms make: the actors alone (what populations hold and export).

Each is a TorchRL :class:`~torchrl.modules.MLP` (and, for Box actions, a learned log
standard deviation) acting on one seat's own observation: a masked softmax
(:class:`CategoricalPolicy`, ``mappo`` on discrete actions), a diagonal Gaussian
(:class:`GaussianPolicy`, ``mappo`` on Box actions) or ε-greedy over masked Q-values
(:class:`QPolicy`, ``vdn`` and ``qmix``). A population that plays several seats
(``agents.mapping: shared``) may append the seat's one-hot id to the observation
(``agent_id``), read from the batch's ``agent``. Weights are the modules' state dicts as
numpy arrays (plus ``explore.eps`` for Q policies), so frozen policies are ``.npz`` files;
critics, mixers and target networks are trainer state, never part of a policy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torchrl.modules import MLP

from popmarl.interfaces.algorithm import PolicySpace
from popmarl.interfaces.policy import ExplicitPolicy, Policy, epsilon_greedy
from popmarl.data.records import Observations, Weights
from popmarl.interfaces.spaces import Box, Discrete, Space

#: A large negative logit / Q-value for illegal actions (finite: sums and gathers stay finite).
ILLEGAL = -1e9


def set_torch_threads(threads: int) -> None:
    """Use ``threads`` intra-op threads (small networks are fastest, and deterministic, on one)."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Torch's global generator seeded with ``seed`` inside, restored after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed % (1 << 63))
        yield


def mlp(inputs: int, outputs: int, hidden: Sequence[int], activation: type[nn.Module] = nn.Tanh,
        out_gain: float | None = None) -> MLP:
    """TorchRL's MLP: ``hidden`` layers of ``activation`` between ``inputs`` and ``outputs``;
    ``out_gain`` scales the output layer's initial weights (and zeroes its bias): 0.01 makes
    an actor's first policy near-uniform, as the MAPPO code's output layer does."""
    net = MLP(in_features=inputs, out_features=outputs, num_cells=list(hidden), activation_class=activation)
    if out_gain is not None:
        last = [m for m in net.modules() if isinstance(m, nn.Linear)][-1]
        with torch.no_grad():
            last.weight.mul_(out_gain)
            last.bias.zero_()
    return net


ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def obs_dim(space: Space) -> int:
    """The width of a flattened observation."""
    return int(np.prod(space.shape, dtype=int)) if isinstance(space, Box) else int(space.n)


def action_width(space: Space) -> int:
    """Actions of a Discrete space, or entries of a Box action."""
    return int(space.n) if isinstance(space, Discrete) else int(np.prod(space.shape, dtype=int))


def with_ids(obs: torch.Tensor, seat: torch.Tensor | int, n_seats: int) -> torch.Tensor:
    """``obs`` ``[..., D]`` with the one-hot of ``seat`` (of ``n_seats``) appended; unchanged
    when ``n_seats`` is 1 (a population of one seat needs no id)."""
    if n_seats <= 1:
        return obs
    ids = torch.nn.functional.one_hot(torch.as_tensor(seat), n_seats).to(obs.dtype)
    return torch.cat([obs, ids.expand(*obs.shape[:-1], n_seats)], dim=-1)


class TorchPolicy(Policy):
    """A policy over one population's seats whose parameters are named torch modules;
    ``agent_id``: the network also reads the seat's one-hot id (populations of several seats)."""

    def __init__(self, *, space: PolicySpace, modules: dict[str, nn.Module], agent_id: bool) -> None:
        self.space = space
        self.modules = modules
        self.seats = space.agents
        self.n_ids = len(space.agents) if agent_id else 1

    def inputs(self, batch: Observations) -> torch.Tensor:
        """The batch as the network's ``[B, D]`` input (with the seat id where it reads one)."""
        x = torch.as_tensor(np.asarray(batch.obs, dtype=np.float32).reshape(len(batch), -1))
        if self.n_ids <= 1:
            return x
        if batch.agent not in self.seats:
            raise ValueError(f"policy of population {self.space.population}: reads its seat's id, and the batch's "
                             f"agent {batch.agent!r} is none of {', '.join(self.seats)}")
        return with_ids(x, self.seats.index(batch.agent), self.n_ids)

    def extra_weights(self) -> dict[str, np.ndarray]:
        return {}

    def load_extra_weights(self, weights: Weights) -> None:
        """Restore what :meth:`extra_weights` produced."""

    def get_weights(self) -> dict[str, np.ndarray]:
        weights = {f"{name}.{key}": value.detach().cpu().numpy().copy()
                   for name, module in self.modules.items() for key, value in module.state_dict().items()}
        weights.update(self.extra_weights())
        return weights

    def set_weights(self, weights: Weights) -> None:
        for name, module in self.modules.items():
            prefix = f"{name}."
            module.load_state_dict({k[len(prefix):]: torch.as_tensor(np.asarray(v)) for k, v in weights.items()
                                    if k.startswith(prefix)})
        self.load_extra_weights(weights)


class CategoricalPolicy(TorchPolicy, ExplicitPolicy):
    """Samples the actor's softmax over the legal actions (exploring or not)."""

    def __init__(self, *, space: PolicySpace, actor: nn.Module, agent_id: bool) -> None:
        super().__init__(space=space, modules={"actor": actor}, agent_id=agent_id)
        assert isinstance(space.action_space, Discrete)
        self.actor = actor
        self.n_actions = space.action_space.n

    def probabilities(self, batch: Observations) -> np.ndarray:
        with torch.no_grad():
            logits = self.actor(self.inputs(batch)).double()
        if batch.mask is not None:
            logits = logits.masked_fill(~torch.as_tensor(np.asarray(batch.mask, dtype=bool)), -np.inf)
        probs = torch.softmax(logits, dim=1).numpy()
        return probs / probs.sum(axis=1, keepdims=True)


class GaussianActor(nn.Module):
    """The mean of a diagonal Gaussian (an MLP) and its state-independent log standard deviation."""

    def __init__(self, inputs: int, outputs: int, hidden: Sequence[int], log_std_init: float,
                 activation: type[nn.Module] = nn.Tanh) -> None:
        super().__init__()
        self.mean = mlp(inputs, outputs, hidden, activation, out_gain=0.01)
        self.log_std = nn.Parameter(torch.full((outputs,), float(log_std_init)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.mean(x)
        return loc, self.log_std.exp().expand_as(loc)


class GaussianPolicy(TorchPolicy):
    """A diagonal Gaussian over a Box: its sample as drawn (the rollout clips what the env
    receives; the learner trains on the sample's log-probability), or its mean when not
    exploring with ``deterministic_eval``."""

    def __init__(self, *, space: PolicySpace, actor: GaussianActor, agent_id: bool, deterministic_eval: bool) -> None:
        super().__init__(space=space, modules={"actor": actor}, agent_id=agent_id)
        assert isinstance(space.action_space, Box)
        self.box = space.action_space
        self.actor = actor
        self.deterministic_eval = deterministic_eval

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        with torch.no_grad():
            loc_t, scale_t = self.actor(self.inputs(batch))
        loc, scale = loc_t.numpy().astype(np.float64), scale_t.numpy().astype(np.float64)
        action = loc if (self.deterministic_eval and not explore) else loc + scale * rng.standard_normal(loc.shape)
        return action.reshape(len(batch), *self.box.shape).astype(self.box.dtype)


class QPolicy(TorchPolicy, ExplicitPolicy):
    """Greedy over the legal actions' Q-values; ε-greedy (uniform over the legal actions
    with probability ``eps``, which travels with the weights) when exploring."""

    def __init__(self, *, space: PolicySpace, qnet: nn.Module, agent_id: bool, eps: float = 1.0) -> None:
        super().__init__(space=space, modules={"q": qnet}, agent_id=agent_id)
        assert isinstance(space.action_space, Discrete)
        self.qnet = qnet
        self.n_actions = space.action_space.n
        self.eps = eps

    def q_values(self, batch: Observations) -> np.ndarray:
        """``[B, n_actions]`` Q-values, -inf on illegal actions."""
        with torch.no_grad():
            q = self.qnet(self.inputs(batch)).numpy()
        return q if batch.mask is None else np.where(np.asarray(batch.mask, dtype=bool), q, -np.inf)

    def probabilities(self, batch: Observations) -> np.ndarray:
        return np.eye(self.n_actions)[self.q_values(batch).argmax(axis=1)]

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        greedy = self.q_values(batch).argmax(axis=1)
        if not explore or self.eps <= 0.0:
            return greedy
        return epsilon_greedy(greedy, batch.mask, self.n_actions, self.eps, rng)

    def extra_weights(self) -> dict[str, np.ndarray]:
        return {"explore.eps": np.array(self.eps, dtype=np.float64)}

    def load_extra_weights(self, weights: Weights) -> None:
        if "explore.eps" in weights:
            self.eps = float(weights["explore.eps"])
