"""popmarl policies around torch modules: batched, masked acting, weights as arrays.

One forward per ``act`` call, under ``torch.no_grad``, numpy in and out; illegal actions
get logit (or Q-value) -inf and are never chosen. Weights are the modules' state dicts
as ``{"<module>.<parameter>": ndarray}`` copies (plus exploration state such as DQN's
epsilon), so frozen policies are plain ``.npz`` files and the actor copy of a learner
picks up the current exploration rate along with the parameters. A policy marked
``uniform`` (PSRO's initial policy, see :func:`uniform_initial`) ignores its network and
plays uniformly at random over the legal actions (or the Box); the mark travels with the
weights as ``initial.uniform``.

Q-policies and categorical policies of one network layout (and observation space, and
device) act together when the rollout engine asks (``Policy.group_key`` and
``act_grouped``): one batched matrix product per layer over their stacked weights
(:func:`~popmarl_tianshou.nets.stacked_inference`) instead of a forward per policy.
Uniform policies act alone (they sample with the generator).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar, cast

import numpy as np
import torch
from torch import nn

from popmarl.interfaces.algorithm import PolicySpace
from popmarl.interfaces.policy import ExplicitPolicy, Policy, epsilon_greedy, masked_uniform, sample_rows
from popmarl.data.records import Observations, Weights
from popmarl.interfaces.spaces import Box, Discrete

from popmarl_tianshou.nets import (CategoricalActor, GaussianActor, MLPParams, Net, QNet, features, mask_logits,
                                  mlp_layout, mlp_params, stacked_inference)

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
        self._params: tuple[nn.Sequential, MLPParams] | None = None

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

    def mlp_group_key(self, net: nn.Sequential) -> Hashable | None:
        """The group key of a policy that acts through the :func:`~popmarl_tianshou.nets.mlp`
        ``net``: its class, observation space, device and network layout (None when
        uniform, or for a network :func:`~popmarl_tianshou.nets.stacked_inference` cannot
        run)."""
        layout = None if self.uniform else mlp_layout(net)
        return None if layout is None else (type(self), self.space.observation_space, self.device, layout)

    def mlp_params(self, net: nn.Sequential) -> MLPParams:
        """:func:`~popmarl_tianshou.nets.mlp_params` of ``net``, looked up once (they are
        the module's own tensors, which :meth:`set_weights` and training update in place)."""
        if self._params is None or self._params[0] is not net:
            self._params = (net, mlp_params(net))
        return self._params[1]

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


def stacked_outputs(policies: Sequence[TorchPolicy], nets: Sequence[nn.Sequential],
                    batches: Sequence[Observations]) -> np.ndarray:
    """The outputs of ``nets[k]`` (policy ``k``'s MLP; one group key) on ``batches[k]``,
    -inf on illegal actions, as one ``[sum of rows, out]`` float32 array in batch order:
    each policy's rows padded to the largest batch, one batched product per layer."""
    counts = [len(b) for b in batches]
    k, width = len(nets), max(counts)
    first = policies[0]
    x = np.ascontiguousarray(features(first.space.observation_space, np.concatenate([b.obs for b in batches])))
    rows = None
    if any(n != width for n in counts):
        # Row r of policy j sits at j * width + r of the padded rows.
        starts = np.cumsum(counts) - counts
        rows = np.arange(len(x)) + np.repeat(np.arange(k) * width - starts, counts)
        padded = np.zeros((k * width, x.shape[1]), dtype=x.dtype)
        padded[rows] = x
        x = padded
    inputs = torch.from_numpy(x).view(k, width, -1)
    if first.device.type != "cpu":
        inputs = inputs.to(first.device)
    params = [policy.mlp_params(net) for policy, net in zip(policies, nets)]
    with torch.no_grad():
        out = stacked_inference(params, inputs).flatten(0, 1).cpu().numpy()
    if rows is not None:
        out = out[rows]
    if any(b.mask is not None for b in batches):
        legal = np.concatenate([np.ones((n, out.shape[1]), bool) if b.mask is None else np.asarray(b.mask, dtype=bool)
                                for b, n in zip(batches, counts)])
        out[~legal] = -np.inf
    return out


def _split(rows: np.ndarray, batches: Sequence[Observations]) -> list[np.ndarray]:
    """``rows`` (one per row of the concatenated batches) cut back into one array per batch."""
    out, start = [], 0
    for batch in batches:
        out.append(rows[start:start + len(batch)])
        start += len(batch)
    return out


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

    def group_key(self) -> Hashable | None:
        return self.mlp_group_key(self.qnet.net)

    @classmethod
    def act_grouped(cls, policies: Sequence[Policy], batches: Sequence[Observations], *,
                    rng: np.random.Generator) -> list[np.ndarray]:
        """Greedy actions of each policy (Q-values of one batched forward; the generator
        is not drawn from)."""
        if len(policies) < 2 or not any(len(b) for b in batches):
            return super().act_grouped(policies, batches, rng=rng)
        members = [cast(QPolicy, p) for p in policies]
        q = stacked_outputs(members, [p.qnet.net for p in members], batches)
        return _split(q.argmax(axis=1), batches)

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

    def group_key(self) -> Hashable | None:
        return self.mlp_group_key(self.actor.net)

    @classmethod
    def act_grouped(cls, policies: Sequence[Policy], batches: Sequence[Observations], *,
                    rng: np.random.Generator) -> list[np.ndarray]:
        """Each policy's samples: the logits of one batched forward, then one
        :func:`~popmarl.interfaces.policy.sample_rows` over every row in batch order (the uniforms
        the policies' own calls would draw, in that order)."""
        if len(policies) < 2 or not any(len(b) for b in batches):
            return super().act_grouped(policies, batches, rng=rng)
        members = [cast(CategoricalPolicy, p) for p in policies]
        logits = torch.from_numpy(stacked_outputs(members, [p.actor.net for p in members], batches))
        probs = torch.softmax(logits.double(), dim=1).numpy()
        return _split(sample_rows(probs / probs.sum(axis=1, keepdims=True), rng), batches)


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
