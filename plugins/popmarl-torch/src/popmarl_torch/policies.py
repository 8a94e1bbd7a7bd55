"""popmarl policies around torch modules: batched, masked acting, weights as arrays.

One forward per ``act`` call, under ``torch.no_grad``, numpy in and out; illegal actions
get logit (or Q-value) -inf and are never chosen. A policy reads each observation as
flat features (:func:`~popmarl_torch.features.features`), plus, where it plays several
seats and was made with ``agent_id``, the seat's one-hot id. Weights are the modules'
state dicts as ``{"<module>.<parameter>": ndarray}`` copies (plus exploration state such
as ε), so frozen policies are plain ``.npz`` files and the actor copy of a learner picks
up the current exploration rate along with the parameters.

A policy marked ``uniform`` (PSRO's initial policy, see :func:`uniform_initial`) ignores
its network and plays uniformly at random over the legal actions (or the Box); where the
policy was made with ``uniform_mark``, the mark travels with the weights as
``initial.uniform``. Q-policies and categorical policies made with ``grouped`` act
together with others of one network layout (and observation space, and device) when the
rollout engine asks (``Policy.group_key`` and ``act_grouped``; see
:mod:`popmarl_torch.grouped`). Uniform policies act alone (they sample with the generator).

popmarl-tianshou makes its policies with the defaults; popmarl-torchrl with ``agent_id``
as configured and neither ``uniform_mark`` nor ``grouped``: the weights its runs store
hold no mark, and its policies act one at a time.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar, cast

import numpy as np
import torch
from torch import nn

from popmarl.api import (Box, Discrete, ExplicitPolicy, Observations, Policy, PolicySpace, Weights, epsilon_greedy,
                         masked_uniform, sample_rows)
from popmarl_torch.devices import CPU
from popmarl_torch.features import features, with_ids
from popmarl_torch.grouped import split_rows, stacked_outputs
from popmarl_torch.mlp import MLPParams, mlp_layout, mlp_params
from popmarl_torch.nets import CategoricalActor, GaussianActor, Net, QNet, mask_logits

#: The weights entry that marks a policy as uniformly random.
UNIFORM_KEY = "initial.uniform"


class TorchPolicy(Policy):
    """A policy whose parameters are named torch modules (``modules``) and whose output
    comes from the MLP ``net``: its logits, Q-values or Gaussian mean.

    ``agent_id``: the network also reads the seat's one-hot id (a population of several
    seats). ``uniform_mark``: the weights carry the ``uniform`` mark
    (:data:`UNIFORM_KEY`). ``grouped``: the policy acts together with others of its
    network layout where its class supports it."""

    def __init__(self, *, space: PolicySpace, modules: Mapping[str, nn.Module], net: nn.Sequential,
                 agent_id: bool = False, uniform_mark: bool = True, grouped: bool = True) -> None:
        self.space = space
        self.modules = dict(modules)
        self.net = net
        self.seats = space.agents
        self.n_ids = len(space.agents) if agent_id else 1
        self.uniform_mark = uniform_mark
        self.grouped = grouped
        self.uniform = False
        self._first = next(iter(self.modules.values()))
        self._params: tuple[nn.Sequential, MLPParams] | None = None

    @property
    def device(self) -> torch.device:
        """Where the policy acts: its modules' device (``acting_device``), as its network
        tracks it (:class:`~popmarl_torch.nets.Net`; this is on the acting path)."""
        first = self._first
        if isinstance(first, Net):
            return first.input_device or CPU
        return next(first.parameters()).device

    def inputs(self, batch: Observations) -> torch.Tensor:
        """The batch as the network's ``[B, D]`` float input on the policy's device (with
        the seat's id where the network reads one)."""
        x = torch.from_numpy(np.ascontiguousarray(features(self.space.observation_space, batch.obs)))
        if self.n_ids > 1:
            if batch.agent not in self.seats:
                raise ValueError(f"policy of population {self.space.population}: reads its seat's id, and the "
                                 f"batch's agent {batch.agent!r} is none of {', '.join(self.seats)}")
            x = with_ids(x, self.seats.index(batch.agent), self.n_ids)
        return x if self.device.type == "cpu" else x.to(self.device)

    def mask(self, batch: Observations) -> torch.Tensor | None:
        """The batch's legal-action mask as a bool tensor on the policy's device."""
        if batch.mask is None:
            return None
        return torch.as_tensor(np.asarray(batch.mask), dtype=torch.bool, device=self.device)

    def mlp_group_key(self) -> Hashable | None:
        """The group key of a policy that acts through its :attr:`net`: its class,
        observation space, device and network layout (None when not ``grouped``, when
        uniform, or for a network :func:`~popmarl_torch.mlp.stacked_inference` cannot run)."""
        layout = None if self.uniform or not self.grouped else mlp_layout(self.net)
        return None if layout is None else (type(self), self.space.observation_space, self.device, layout)

    def mlp_params(self, net: nn.Sequential) -> MLPParams:
        """:func:`~popmarl_torch.mlp.mlp_params` of ``net``, looked up once (they are the
        module's own tensors, which :meth:`set_weights` and training update in place)."""
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
        if self.uniform_mark:
            weights[UNIFORM_KEY] = np.array(self.uniform)
        return weights

    def set_weights(self, weights: Weights) -> None:
        for name, module in self.modules.items():
            prefix = f"{name}."
            state = {k[len(prefix):]: torch.as_tensor(np.asarray(v)) for k, v in weights.items() if k.startswith(prefix)}
            module.load_state_dict(state)
        self.load_extra_weights(weights)
        if self.uniform_mark:
            self.uniform = bool(weights.get(UNIFORM_KEY, False))


TorchPolicyT = TypeVar("TorchPolicyT", bound=TorchPolicy)


def uniform_initial(policy: TorchPolicyT) -> TorchPolicyT:
    """``policy``, marked to play uniformly at random: PSRO's initial policy."""
    policy.uniform = True
    return policy


def _mlp_of(module: QNet | CategoricalActor | nn.Sequential) -> nn.Sequential:
    """The MLP a network computes its output with (a bare :func:`~popmarl_torch.mlp.mlp`: itself)."""
    return module if isinstance(module, nn.Sequential) else module.net


class QPolicy(TorchPolicy, ExplicitPolicy):
    """Greedy over the legal actions' Q-values; ε-greedy (uniform over the legal
    actions with probability ``eps``, which travels with the weights) when exploring.
    ``qnet``: a :class:`~popmarl_torch.nets.QNet` or a bare MLP (weights ``q.0.weight``...)."""

    def __init__(self, *, space: PolicySpace, qnet: QNet | nn.Sequential, eps: float = 0.0, agent_id: bool = False,
                 uniform_mark: bool = True, grouped: bool = True) -> None:
        super().__init__(space=space, modules={"q": qnet}, net=_mlp_of(qnet), agent_id=agent_id,
                         uniform_mark=uniform_mark, grouped=grouped)
        assert isinstance(space.action_space, Discrete)
        self.n_actions = space.action_space.n
        self.qnet = qnet
        self.eps = eps

    def q_values(self, batch: Observations) -> np.ndarray:
        """``[B, n_actions]`` Q-values, -inf on illegal actions."""
        with torch.no_grad():
            q = self.net(self.inputs(batch))
            return mask_logits(q, self.mask(batch)).cpu().numpy()

    def probabilities(self, batch: Observations) -> np.ndarray:
        if self.uniform:
            return masked_uniform(batch.mask, len(batch), self.n_actions)
        return np.eye(self.n_actions)[self.q_values(batch).argmax(axis=1)]

    def group_key(self) -> Hashable | None:
        return self.mlp_group_key()

    @classmethod
    def act_grouped(cls, policies: Sequence[Policy], batches: Sequence[Observations], *,
                    rng: np.random.Generator) -> list[np.ndarray]:
        """Greedy actions of each policy (Q-values of one batched forward; the generator
        is not drawn from)."""
        if len(policies) < 2 or not any(len(b) for b in batches):
            return super().act_grouped(policies, batches, rng=rng)
        members = [cast(QPolicy, p) for p in policies]
        q = stacked_outputs(members, [p.net for p in members], batches)
        return split_rows(q.argmax(axis=1), batches)

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
    stochastic policy is both what trains and what is evaluated). ``actor``: a
    :class:`~popmarl_torch.nets.CategoricalActor` or a bare MLP of logits."""

    def __init__(self, *, space: PolicySpace, actor: CategoricalActor | nn.Sequential, agent_id: bool = False,
                 uniform_mark: bool = True, grouped: bool = True) -> None:
        super().__init__(space=space, modules={"actor": actor}, net=_mlp_of(actor), agent_id=agent_id,
                         uniform_mark=uniform_mark, grouped=grouped)
        assert isinstance(space.action_space, Discrete)
        self.actor = actor
        self.n_actions = space.action_space.n

    def probabilities(self, batch: Observations) -> np.ndarray:
        if self.uniform:
            return masked_uniform(batch.mask, len(batch), self.n_actions)
        with torch.no_grad():
            logits = self.net(self.inputs(batch))
            probs = torch.softmax(mask_logits(logits, self.mask(batch)).double(), dim=1).cpu().numpy()
        return probs / probs.sum(axis=1, keepdims=True)

    def group_key(self) -> Hashable | None:
        return self.mlp_group_key()

    @classmethod
    def act_grouped(cls, policies: Sequence[Policy], batches: Sequence[Observations], *,
                    rng: np.random.Generator) -> list[np.ndarray]:
        """Each policy's samples: the logits of one batched forward, then one
        :func:`~popmarl.api.sample_rows` over every row in batch order (the uniforms the
        policies' own calls would draw, in that order)."""
        if len(policies) < 2 or not any(len(b) for b in batches):
            return super().act_grouped(policies, batches, rng=rng)
        members = [cast(CategoricalPolicy, p) for p in policies]
        logits = torch.from_numpy(stacked_outputs(members, [p.net for p in members], batches))
        probs = torch.softmax(logits.double(), dim=1).numpy()
        return split_rows(sample_rows(probs / probs.sum(axis=1, keepdims=True), rng), batches)


class GaussianPolicy(TorchPolicy):
    """A diagonal Gaussian over a Box; with ``deterministic_eval`` the mean is played
    when not exploring.

    ``act`` returns the Gaussian's own sample, which may lie past the Box's bounds: the
    rollout clips what the env receives, entry by entry, and the learner's episodes
    record (and the learners train on) the unclipped sample, the action whose
    log-probability the policy gives. Clipping is part of the environment here, as in
    Tianshou's own collectors.
    """

    def __init__(self, *, space: PolicySpace, actor: GaussianActor, deterministic_eval: bool = False,
                 agent_id: bool = False, uniform_mark: bool = True) -> None:
        super().__init__(space=space, modules={"actor": actor}, net=actor.mean_net, agent_id=agent_id,
                         uniform_mark=uniform_mark, grouped=False)
        assert isinstance(space.action_space, Box)
        self.box = space.action_space
        self.actor = actor
        self.deterministic_eval = deterministic_eval

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if self.uniform:
            return self.box.sample(rng, n=len(batch))
        with torch.no_grad():
            loc_t, scale_t = self.actor(self.inputs(batch))[0]
        loc, scale = loc_t.cpu().numpy(), scale_t.cpu().numpy()
        action = loc if (self.deterministic_eval and not explore) else loc + scale * rng.standard_normal(loc.shape)
        return action.reshape(len(batch), *self.box.shape).astype(self.box.dtype)


__all__ = ["UNIFORM_KEY", "CategoricalPolicy", "GaussianPolicy", "QPolicy", "TorchPolicy", "uniform_initial"]
