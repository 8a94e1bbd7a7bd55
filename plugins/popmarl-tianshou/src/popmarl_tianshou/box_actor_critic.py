"""What the off-policy Box-action actor-critics ``sac`` and ``td3`` share.

Both keep their actions in a Box with finite bounds by squashing: the actor's output is
a ``tanh`` in [-1, 1] mapped linearly onto ``[low, high]``
(:func:`~popmarl_torch.squashed.to_box`), so every
action the policy returns already lies in the Box, and the trainer maps recorded actions
back onto [-1, 1] (:func:`~popmarl_torch.squashed.from_box`) before they enter the replay buffer: the critics
(:class:`ActionCritic`, ``Q(observation, action)``) read the squashed action. Both train
from a Tianshou replay buffer with twin critics and Polyak-averaged targets; the
trainer (:class:`BoxActorCriticTrainer`) feeds the learner's episodes into the buffer,
takes the round's gradient steps on batches drawn at once
(:class:`~popmarl_tianshou.replay.ReplayRound`), and keeps everything that makes a
resumed trainer continue bit-identically in its state: counters, the buffer, the numpy
and torch generators, the critics and target networks, and every optimiser.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch
from tianshou.algorithm.modelfree.ddpg import ActorCriticOffPolicyAlgorithm
from tianshou.data import Batch
from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode
from torch import nn

from popmarl.api import (TRAINER_FILE, Algorithm, Box, CheckpointError, Env, Episode, PolicySpace,
                         Space, Trainer, TrainerState, at_least_one, layer_widths, non_negative, npz_bytes, positive,
                         read_npz, read_trainer_json, trainer_json, unit_interval)
from popmarl_torch.features import feature_dim
from popmarl_torch.models import Model, ModelSpec, describe_networks, model_field, network
from popmarl_torch.nets import Net, split_obs
from popmarl_torch.policies import TorchPolicy
from popmarl_torch.seeding import SEED_MODULUS
from popmarl_torch.squashed import bounded_box, from_box, to_box
from popmarl_torch.state import load_modules, modules_bytes, random_state_from_json, random_state_json, read_torch
from popmarl_torch.state import torch_bytes

from popmarl_tianshou.actor_critic import actor_critic_models
from popmarl_tianshou.batching import append, numpy_random, numpy_random_state, replay_buffer, transitions
from popmarl_tianshou.replay import ReplayRound
from popmarl_tianshou.state import buffer_arrays, buffer_json, load_buffer, load_optimizer, optimizer_bytes


@attrs.frozen(kw_only=True)
class BoxActorCriticConfig:
    """The settings ``sac`` and ``td3`` share. Steps are the learner's decisions
    (transitions), not env steps.

    ``updates_per_step`` gradient steps of ``batch_size`` transitions are taken per new
    transition once the buffer (``buffer_size`` transitions) holds ``learning_starts``;
    ``lr`` is the actor's step size, ``critic_lr`` the critics', ``tau`` the target
    networks' Polyak weight; ``gamma`` and ``n_step`` make the bootstrapped target.
    Updates run on the CPU, on ``torch_threads`` threads. ``model`` is the actor's
    network model (:mod:`popmarl_torch.models`: a name or ``{name, params}``; null:
    ``cnn`` for image observations, else ``mlp`` of ``hidden`` widths), ``critic_model``
    the critics' (null: the same as ``model``; a critic's encoder also reads the action,
    as extra columns)."""

    lr: float = attrs.field(default=1e-3, validator=positive)
    critic_lr: float = attrs.field(default=1e-3, validator=positive)
    hidden: list[int] = attrs.field(factory=lambda: [64, 64], validator=layer_widths)
    gamma: float = attrs.field(default=0.99, validator=unit_interval)
    n_step: int = attrs.field(default=1, validator=at_least_one)
    tau: float = attrs.field(default=0.005, validator=unit_interval)
    batch_size: int = attrs.field(default=256, validator=at_least_one)
    buffer_size: int = attrs.field(default=100_000, validator=at_least_one)
    learning_starts: int = attrs.field(default=256, validator=non_negative)
    updates_per_step: float = attrs.field(default=1.0, validator=positive)
    torch_threads: int = attrs.field(default=1, validator=at_least_one)
    model: ModelSpec = model_field()
    critic_model: ModelSpec = model_field()


# -- critics ----------------------------------------------------------------------------------
class ActionCritic(Net):
    """``Q(observation, action)`` ``[B, 1]`` of an action in [-1, 1] (the squashed one)."""

    def __init__(self, net: nn.Sequential) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: Any, act: Any) -> torch.Tensor:
        x, _ = split_obs(obs, self.input_device)
        a = torch.as_tensor(act, dtype=torch.float32, device=x.device).reshape(len(x), -1)
        return self.net(torch.cat([x, a], dim=1))


def action_critic(observation_space: Space, action_dim: int, model: Model) -> ActionCritic:
    """An (observation, action) critic: ``model``'s encoder, reading the action as extra
    columns, with a linear head (weights drawn from torch's generator: call it seeded)."""
    return ActionCritic(network(model, observation_space, 1, extra=action_dim))


# -- the algorithm ----------------------------------------------------------------------------
class BoxActorCritic(Algorithm):
    """An off-policy actor-critic over bounded Box actions: its networks' models, its
    checks, its uniform initial policy. Subclasses name themselves (``kind``) and make
    the policy and trainer."""

    learns = True
    on_policy = False
    kind = ""
    config: BoxActorCriticConfig

    def models(self, space: PolicySpace) -> dict[str, Model]:
        """The actor's and the critics' models (``critic_model`` defaults to ``model``)."""
        return actor_critic_models(self.config, space, self.kind)

    def describe(self, space: PolicySpace) -> str:
        c = self.config
        return describe_networks(self.models(space), chosen=c.model is None and c.critic_model is None)

    def check(self, *, env: Env, space: PolicySpace) -> None:
        bounded_box(space, self.kind)
        self.models(space)


# -- the trainer ------------------------------------------------------------------------------
CRITICS, OPTIM, RANDOM, BUFFER = "critics.pt", "optim.pt", "random.pt", "buffer.npz"


class BoxActorCriticTrainer(Trainer):
    """Feeds episodes into a replay buffer and takes the Tianshou ``algorithm``'s
    gradient steps on the learner's actor and on critics of its own. Its draws (the
    buffer's samples, the networks' noise) come from generators of its own, kept in its
    state, so a trainer restored from :meth:`state` continues bit-identically.
    Subclasses name the trainer (``kind``), list their networks (:meth:`_modules`) and
    may add counters (:meth:`_counters`) and metrics (:meth:`_metrics`)."""

    kind = ""

    def __init__(self, *, policy: TorchPolicy, box: Box, config: BoxActorCriticConfig, seed: int,
                 algorithm: ActorCriticOffPolicyAlgorithm[Any, Any]) -> None:
        self.policy = policy
        self.config = config
        self.box = box
        self.algorithm = algorithm
        self.buffer = replay_buffer(config.buffer_size, seed=seed)
        self._rng = numpy_random_state(seed)
        self._torch_rng = torch.Generator().manual_seed((seed + 2) % SEED_MODULUS).get_state()
        self.decisions = 0
        self.gradient_steps = 0
        self._owed = 0.0

    def target_values(self, x_next: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The bootstrap values ``[rows]`` of next observations' features: the target
        critics' value of the action the algorithm bootstraps with (Tianshou's
        ``_target_q``); to call under ``torch.no_grad()``."""
        algorithm = self.algorithm
        obs = Batch(obs=Batch(obs=x_next), info=Batch())
        return algorithm._target_q_compute_value(obs, algorithm._target_q_compute_action(obs)).flatten()

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        c = self.config
        batch = transitions(episodes, self.policy.space)
        if len(batch):
            batch.act = from_box(batch.act.reshape(len(batch), -1), self.box).astype(np.float32)
        append(self.buffer, batch)
        rows = len(batch)
        self.decisions += rows
        stats: list[Any] = []  # the algorithm's TrainingStats: actor_loss, critic1_loss, critic2_loss
        if len(self.buffer) >= max(c.learning_starts, c.batch_size):
            self._owed += rows * c.updates_per_step
            steps, self._owed = int(self._owed), self._owed - int(self._owed)
            algorithm = self.algorithm
            with policy_within_training_step(algorithm.policy), torch_train_mode(algorithm), \
                    numpy_random(self._rng), torch.random.fork_rng(devices=[]):
                torch.set_rng_state(self._torch_rng)
                replay = ReplayRound(self.buffer, steps=steps, batch_size=c.batch_size, gamma=c.gamma, n_step=c.n_step)
                for step in range(steps):
                    stats.append(algorithm._update_with_batch(replay.batch(step, self.target_values)))
                self._torch_rng = torch.get_rng_state()
            self.gradient_steps += steps
        metrics = {"buffer_size": float(len(self.buffer)), "gradient_steps": float(self.gradient_steps),
                   **self._metrics()}
        if stats:
            metrics["actor_loss"] = float(np.mean([s.actor_loss for s in stats]))
            metrics["critic_loss"] = float(np.mean([(s.critic1_loss + s.critic2_loss) / 2 for s in stats]))
            metrics["loss"] = metrics["actor_loss"] + metrics["critic_loss"]
        return metrics

    @abstractmethod
    def _modules(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        """The trainer's own networks (critics, target networks) and any optimiser
        outside Tianshou's list: what :data:`CRITICS` holds."""

    def _metrics(self) -> dict[str, float]:
        """Metrics of the algorithm's own, reported with every update."""
        return {}

    def _counters(self) -> dict[str, Any]:
        """The algorithm's own counters in ``trainer.json``."""
        return {}

    def _load_counters(self, data: Mapping[str, Any]) -> None:
        """Restores :meth:`_counters` from ``trainer.json``."""

    def state(self) -> TrainerState:
        """``trainer.json`` (counters, the numpy generator, the buffer's fill, insertion
        point and generator), ``critics.pt`` (:meth:`_modules`), ``optim.pt`` (Tianshou's
        optimisers), ``random.pt`` (the torch generator of the networks' noise) and
        ``buffer.npz`` (the buffer's filled rows, when it has any)."""
        files = {
            TRAINER_FILE: trainer_json(self.kind, decisions=self.decisions, gradient_steps=self.gradient_steps,
                                       owed=self._owed, random=random_state_json(self._rng["np"]),
                                       buffer=buffer_json(self.buffer), **self._counters()),
            CRITICS: modules_bytes(self._modules()),
            OPTIM: optimizer_bytes(self.algorithm),
            RANDOM: torch_bytes({"torch": self._torch_rng.clone()}),
        }
        if len(self.buffer):
            files[BUFFER] = npz_bytes(buffer_arrays(self.buffer))
        return files

    def load_state(self, state: TrainerState) -> None:
        keys = ("decisions", "gradient_steps", "owed", "random", "buffer", *self._counters())
        data = read_trainer_json(state, self.kind, keys)
        random = random_state_from_json(data["random"], "random")
        torch_random = read_torch(state, RANDOM)
        generator = torch_random.get("torch") if isinstance(torch_random, dict) else None
        if not isinstance(generator, torch.Tensor) or generator.dtype != torch.uint8:
            raise CheckpointError(f"trainer state {RANDOM}: not a torch generator state")
        buffer = data["buffer"] if isinstance(data["buffer"], dict) else {}
        arrays = read_npz(state, BUFFER) if buffer.get("size") else {}
        load_buffer(self.buffer, buffer, arrays, BUFFER, self._buffer_widths())
        load_modules(state, CRITICS, self._modules())
        load_optimizer(state, OPTIM, self.algorithm)
        self._load_counters(data)
        self.decisions, self.gradient_steps = int(data["decisions"]), int(data["gradient_steps"])
        self._owed = float(data["owed"])
        self._rng["np"] = random
        self._torch_rng = generator.clone()

    def _buffer_widths(self) -> dict[str, tuple[int, ...]]:
        """The row shape of every array the replay buffer stores (see ``transitions``)."""
        obs = (feature_dim(self.policy.space.observation_space),)
        return {"obs.obs": obs, "obs_next.obs": obs, "act": (self.box.size,), "rew": (), "terminated": (),
                "truncated": (), "done": ()}


__all__ = ["BUFFER", "CRITICS", "OPTIM", "RANDOM", "ActionCritic", "BoxActorCritic", "BoxActorCriticConfig",
           "BoxActorCriticTrainer", "action_critic", "bounded_box", "from_box", "to_box"]
