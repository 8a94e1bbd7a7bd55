"""popmarl policies around torch modules: batched, masked acting, weights as arrays.

One forward per ``act`` call, under ``torch.no_grad``, numpy in and out; illegal actions
get logit (or Q-value) -inf and are never chosen. Weights are the modules' state dicts
as ``{"<module>.<parameter>": ndarray}`` copies (plus exploration state such as DQN's
epsilon), so frozen policies are plain ``.npz`` files and the actor copy of a learner
picks up the current exploration rate along with the parameters. A policy marked
``uniform`` (PSRO's initial policy, see :func:`uniform_initial`) ignores its network and
plays uniformly at random over the legal actions (or the Box); the mark travels with the
weights as ``initial.uniform``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import numpy as np
import torch
from torch import nn

from popmarl.algorithm import PolicySpace
from popmarl.policy import ExplicitPolicy, Policy, epsilon_greedy, masked_uniform, sample_rows
from popmarl.records import Observations, Weights
from popmarl.spaces import Box, Discrete

from popmarl_tianshou.nets import CategoricalActor, GaussianActor, Net, QNet, features, mask_logits

CPU = torch.device("cpu")


def set_torch_threads(threads: int) -> None:
    """Use ``threads`` intra-op threads (small networks are fastest on one; rollout
    workers share the machine's cores)."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


#: The weights entry that marks a policy as uniformly random.
UNIFORM_KEY = "initial.uniform"


class TorchPolicy(Policy):
    """A policy whose parameters are named torch modules."""

    def __init__(self, *, space: PolicySpace, modules: Mapping[str, nn.Module]) -> None:
        self.space = space
        self.modules = dict(modules)
        self.uniform = False
        self._first = next(iter(self.modules.values()))

    @property
    def device(self) -> torch.device:
        """Where the policy acts: its modules' device (``acting_device``), as its network
        tracks it (:class:`~popmarl_tianshou.nets.Net`; this is on the acting path)."""
        first = self._first
        if isinstance(first, Net):
            return first.input_device or CPU
        return next(first.parameters()).device

    def features(self, batch: Observations) -> torch.Tensor:
        """The batch's observations as a ``[B, D]`` float tensor on the policy's device."""
        x = torch.from_numpy(np.ascontiguousarray(features(self.space.observation_space, batch.obs)))
        return x if self.device.type == "cpu" else x.to(self.device)

    def mask(self, batch: Observations) -> torch.Tensor | None:
        """The batch's legal-action mask as a bool tensor on the policy's device."""
        if batch.mask is None:
            return None
        return torch.as_tensor(np.asarray(batch.mask), dtype=torch.bool, device=self.device)

    def extra_weights(self) -> dict[str, np.ndarray]:
        """Non-parameter state that travels with the weights (none by default)."""
        return {}

    def load_extra_weights(self, weights: Weights) -> None:
        """Restore what :meth:`extra_weights` produced."""

    def get_weights(self) -> dict[str, np.ndarray]:
        weights = {
            f"{name}.{key}": value.detach().cpu().numpy().copy()
            for name, module in self.modules.items()
            for key, value in module.state_dict().items()
        }
        weights.update(self.extra_weights())
        weights[UNIFORM_KEY] = np.array(self.uniform)
        return weights

    def set_weights(self, weights: Weights) -> None:
        for name, module in self.modules.items():
            prefix = f"{name}."
            state = {k[len(prefix):]: torch.as_tensor(np.asarray(v)) for k, v in weights.items() if k.startswith(prefix)}
            module.load_state_dict(state)
        self.load_extra_weights(weights)
        self.uniform = bool(weights.get(UNIFORM_KEY, False))


TorchPolicyT = TypeVar("TorchPolicyT", bound=TorchPolicy)


def uniform_initial(policy: TorchPolicyT) -> TorchPolicyT:
    """``policy``, marked to play uniformly at random: PSRO's initial policy."""
    policy.uniform = True
    return policy


class QPolicy(TorchPolicy, ExplicitPolicy):
    """Greedy over the legal actions' Q-values; ε-greedy (uniform over the legal
    actions with probability ``eps``) when exploring."""

    def __init__(self, *, space: PolicySpace, qnet: QNet, eps: float = 0.0) -> None:
        super().__init__(space=space, modules={"q": qnet})
        assert isinstance(space.action_space, Discrete)
        self.n_actions = space.action_space.n
        self.qnet = qnet
        self.eps = eps

    def q_values(self, batch: Observations) -> np.ndarray:
        """``[B, n_actions]`` Q-values, -inf on illegal actions."""
        with torch.no_grad():
            q = self.qnet(self.features(batch))[0]
            return mask_logits(q, self.mask(batch)).cpu().numpy()

    def probabilities(self, batch: Observations) -> np.ndarray:
        if self.uniform:
            return masked_uniform(batch.mask, len(batch), self.n_actions)
        return np.eye(self.n_actions)[self.q_values(batch).argmax(axis=1)]

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if self.uniform:
            return sample_rows(self.probabilities(batch), rng)
        greedy = self.q_values(batch).argmax(axis=1)
        if not explore or self.eps <= 0.0:
            return greedy
        return epsilon_greedy(greedy, batch.mask, self.n_actions, self.eps, rng)

    def extra_weights(self) -> dict[str, np.ndarray]:
        return {"explore.eps": np.array(self.eps, dtype=np.float64)}

    def load_extra_weights(self, weights: Weights) -> None:
        if "explore.eps" in weights:
            self.eps = float(weights["explore.eps"])


class CategoricalPolicy(TorchPolicy, ExplicitPolicy):
    """Samples the actor's softmax over the legal actions (exploring or not: the
    stochastic policy is both what trains and what is evaluated)."""

    def __init__(self, *, space: PolicySpace, actor: CategoricalActor) -> None:
        super().__init__(space=space, modules={"actor": actor})
        assert isinstance(space.action_space, Discrete)
        self.actor = actor
        self.n_actions = space.action_space.n

    def probabilities(self, batch: Observations) -> np.ndarray:
        if self.uniform:
            return masked_uniform(batch.mask, len(batch), self.n_actions)
        with torch.no_grad():
            logits = self.actor(self.features(batch))[0]
            probs = torch.softmax(mask_logits(logits, self.mask(batch)).double(), dim=1).cpu().numpy()
        return probs / probs.sum(axis=1, keepdims=True)


class GaussianPolicy(TorchPolicy):
    """A diagonal Gaussian over a Box; with ``deterministic_eval`` the mean is played
    when not exploring.

    ``act`` returns the Gaussian's own sample, which may lie past the Box's bounds: the
    rollout clips what the env receives, entry by entry, and the learner's episodes
    record (and PPO/A2C train on) the unclipped sample, the action whose
    log-probability the policy gives. Clipping is part of the environment here, as in
    Tianshou's own collectors.
    """

    def __init__(self, *, space: PolicySpace, actor: GaussianActor, deterministic_eval: bool = False) -> None:
        super().__init__(space=space, modules={"actor": actor})
        assert isinstance(space.action_space, Box)
        self.box = space.action_space
        self.actor = actor
        self.deterministic_eval = deterministic_eval

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if self.uniform:
            return self.box.sample(rng, n=len(batch))
        with torch.no_grad():
            loc_t, scale_t = self.actor(self.features(batch))[0]
        loc, scale = loc_t.cpu().numpy(), scale_t.cpu().numpy()
        action = loc if (self.deterministic_eval and not explore) else loc + scale * rng.standard_normal(loc.shape)
        return action.reshape(len(batch), *self.box.shape).astype(self.box.dtype)
