"""Algorithm ``sac``: soft actor-critic over Box actions, off-policy from a replay buffer.

The update is Tianshou 2.0's :class:`tianshou.algorithm.SAC`: twin (observation, action)
critics with Polyak-averaged target copies, the smaller target value bootstrapped, an
entropy bonus whose weight ``alpha`` is tuned towards a target entropy (or fixed), and a
tanh-squashed Gaussian actor whose mean and log standard deviation both depend on the
observation.

Action bounds are kept by squashing, not clipping: the actor's sample ``u`` is squashed
to ``tanh(u)`` in (-1, 1) and mapped linearly onto the Box's ``[low, high]``, so every
action the policy returns already lies in the Box and the rollout engine's clip (which
clips Box actions before the env sees them) leaves it unchanged: the env receives, and
the learner's episodes record, the same action. The trainer maps recorded actions back
onto [-1, 1] (the inverse of the linear map) before they enter the replay buffer, so the
critics and Tianshou's tanh log-probability correction see the squashed action they were
built for. The Box's bounds must therefore be finite. Evaluation (acting without
exploring) plays ``tanh(mean)`` mapped the same way: a deterministic policy.

Every SAC network (actor and critics) is made by :func:`build_network`, the one place a
network model is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

import attrs
import numpy as np
import torch
from tianshou.algorithm import SAC as TianshouSAC
from tianshou.algorithm.modelfree.sac import AutoAlpha, SACPolicy, SACTrainingStats
from tianshou.data import Batch
from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode
from torch import nn

from popmarl.api import (TRAINER_FILE, Algorithm, Box, CheckpointError, ConfigError, Env, Episode, Observations,
                         Policy, PolicySpace, Space, Trainer, TrainerContext, TrainerState, at_least_one,
                         layer_widths,
                         non_negative, npz_bytes, optional, positive, read_npz, read_trainer_json, trainer_json,
                         unit_interval)
from popmarl_torch.features import feature_dim
from popmarl_torch.models import Model, ModelSpec, describe_networks, feedforward, model_field, network, resolve
from popmarl_torch.nets import Net, split_obs
from popmarl_torch.policies import TorchPolicy, uniform_initial
from popmarl_torch.seeding import SEED_MODULUS, seeded
from popmarl_torch.state import load_modules, modules_bytes, random_state_from_json, random_state_json, read_torch
from popmarl_torch.state import torch_bytes
from popmarl_torch.threads import set_torch_threads

from popmarl_tianshou.batching import append, gym_space, numpy_random, numpy_random_state, replay_buffer, transitions
from popmarl_tianshou.optim import FusedAdamFactory
from popmarl_tianshou.replay import ReplayRound
from popmarl_tianshou.state import buffer_arrays, buffer_json, load_buffer, load_optimizer, optimizer_bytes

#: The log standard deviation the actor may output, as in Tianshou's and the SAC
#: authors' actors: wider would let the entropy bonus blow a standard deviation up (or
#: collapse it to a point mass the tanh correction divides by).
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


@attrs.frozen(kw_only=True)
class SACConfig:
    """Soft actor-critic. Steps are the learner's decisions (transitions), not env steps.

    ``updates_per_step`` gradient steps of ``batch_size`` transitions are taken per new
    transition once the buffer holds ``learning_starts``; each step updates both critics
    (lr ``critic_lr``), the actor (lr ``lr``), then ``alpha`` and the target critics
    (Polyak weight ``tau``). ``alpha`` null tunes the entropy weight automatically (from
    ``alpha_init``, lr ``alpha_lr``) towards ``target_entropy`` (null: minus the number of
    action entries, the SAC authors' choice); a number fixes it. ``gamma`` and
    ``n_step`` make the bootstrapped target. Updates run on the CPU, on
    ``torch_threads`` threads. ``model`` is the actor's network model
    (:mod:`popmarl_torch.models`: a name or ``{name, params}``; null: ``cnn`` for image
    observations, else ``mlp`` of ``hidden`` widths), ``critic_model`` the critics' (null:
    the same as ``model``; a critic's encoder also reads the action, as extra columns).
    """

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
    alpha: float | None = attrs.field(default=None, validator=optional(non_negative))
    alpha_init: float = attrs.field(default=0.2, validator=positive)
    alpha_lr: float = attrs.field(default=3e-4, validator=positive)
    target_entropy: float | None = None
    torch_threads: int = attrs.field(default=1, validator=at_least_one)
    model: ModelSpec = model_field()
    critic_model: ModelSpec = model_field()


# -- networks ---------------------------------------------------------------------------------
class SquashedGaussianActor(Net):
    """Mean and standard deviation ``([B, A], [B, A])`` of the Gaussian whose samples are
    tanh-squashed: one :func:`~popmarl_torch.mlp.mlp` outputs both, the log standard
    deviation clamped to [:data:`LOG_STD_MIN`, :data:`LOG_STD_MAX`]. Its output layer
    starts near zero: mean 0 and standard deviation 1, whose squashed samples spread
    over the whole Box."""

    def __init__(self, net: nn.Sequential, action_dim: int) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.net = net

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[tuple[torch.Tensor, torch.Tensor], Any]:
        x, _ = split_obs(obs, self.input_device)
        loc, log_std = self.net(x).split(self.action_dim, dim=1)
        return (loc, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()), state


class ActionCritic(Net):
    """``Q(observation, action)`` ``[B, 1]`` of an action in [-1, 1] (the squashed one)."""

    def __init__(self, net: nn.Sequential) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: Any, act: Any) -> torch.Tensor:
        x, _ = split_obs(obs, self.input_device)
        a = torch.as_tensor(act, dtype=torch.float32, device=x.device).reshape(len(x), -1)
        return self.net(torch.cat([x, a], dim=1))


def build_network(role: Literal["actor", "critic"], *, observation_space: Space, action_dim: int,
                  model: Model) -> SquashedGaussianActor | ActionCritic:
    """The SAC network of ``role``: the squashed Gaussian actor or an (observation,
    action) critic, ``model``'s encoder with a linear head (:func:`popmarl_torch.models.network`;
    the critic's encoder reads the action as extra columns; weights drawn from torch's
    generator: call it seeded)."""
    if role == "actor":
        return SquashedGaussianActor(network(model, observation_space, 2 * action_dim, out_gain=0.01), action_dim)
    return ActionCritic(network(model, observation_space, 1, extra=action_dim))


# -- bounds -----------------------------------------------------------------------------------
def bounded_box(space: PolicySpace) -> Box:
    """The population's Box of actions; a ConfigError for discrete actions or an
    unbounded Box (squashing needs both bounds)."""
    box = space.action_space
    if not isinstance(box, Box):
        raise ConfigError(f"algorithm sac: population {space.population} needs Box actions, got {box}")
    if not (np.isfinite(box.low).all() and np.isfinite(box.high).all()):
        raise ConfigError(f"algorithm sac: population {space.population}'s actions {box} need finite bounds "
                          "(sac squashes its actions into them)")
    return box


def to_box(squashed: np.ndarray, box: Box) -> np.ndarray:
    """Actions in [-1, 1] mapped linearly onto the Box (clipped against rounding)."""
    low, high = box.low, box.high
    return np.clip(low + (squashed + 1.0) * 0.5 * (high - low), low, high)


def from_box(actions: np.ndarray, box: Box) -> np.ndarray:
    """The inverse of :func:`to_box`: Box actions as the squashed actions in [-1, 1]
    (an entry whose bounds are equal maps to 0)."""
    width = box.high - box.low
    safe = np.where(width > 0, width, 1.0)
    return np.clip(np.where(width > 0, 2.0 * (actions - box.low) / safe - 1.0, 0.0), -1.0, 1.0)


# -- the policy --------------------------------------------------------------------------------
class SquashedGaussianPolicy(TorchPolicy):
    """Plays ``tanh`` of a Gaussian sample mapped onto the Box when exploring, ``tanh`` of
    the mean mapped the same way when not: always inside the Box (see the module's
    docstring)."""

    def __init__(self, *, space: PolicySpace, actor: SquashedGaussianActor) -> None:
        super().__init__(space=space, modules={"actor": actor}, net=actor.net, grouped=False)
        self.box = bounded_box(space)
        self.actor = actor

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if self.uniform:
            return self.box.sample(rng, n=len(batch))
        with torch.no_grad():
            loc_t, scale_t = self.actor(self.inputs(batch))[0]
        loc = loc_t.cpu().numpy().astype(np.float64)
        u = loc + scale_t.cpu().numpy() * rng.standard_normal(loc.shape) if explore else loc
        actions = to_box(np.tanh(u).reshape(len(batch), *self.box.shape), self.box)
        return actions.astype(self.box.dtype)


# -- the trainer -------------------------------------------------------------------------------
CRITICS, OPTIM, RANDOM, BUFFER = "critics.pt", "optim.pt", "random.pt", "buffer.npz"


class SACTrainer(Trainer):
    """Feeds episodes into a replay buffer and takes Tianshou SAC gradient steps on the
    learner's actor and on critics of its own. Its draws (the buffer's samples, the
    actor's reparameterised samples) come from generators of its own, kept in its state,
    so a trainer restored from :meth:`state` continues bit-identically."""

    def __init__(self, *, policy: SquashedGaussianPolicy, config: SACConfig, seed: int, critic_model: Model) -> None:
        self.policy = policy
        self.config = c = config
        self.box = policy.box
        obs, action_dim = policy.space.observation_space, self.box.size
        with seeded(seed + 1):
            critic1 = build_network("critic", observation_space=obs, action_dim=action_dim, model=critic_model)
            critic2 = build_network("critic", observation_space=obs, action_dim=action_dim, model=critic_model)
        target_entropy = -float(action_dim) if c.target_entropy is None else c.target_entropy
        alpha: float | AutoAlpha = (float(c.alpha) if c.alpha is not None else
                                    AutoAlpha(target_entropy, float(np.log(c.alpha_init)), FusedAdamFactory(lr=c.alpha_lr)))
        learner = SACPolicy(actor=policy.actor, action_space=gym_space(self.box), action_scaling=False)
        self.algorithm: TianshouSAC[SACTrainingStats] = TianshouSAC(policy=learner, policy_optim=FusedAdamFactory(lr=c.lr), critic=critic1,
                                     critic_optim=FusedAdamFactory(lr=c.critic_lr), critic2=critic2, tau=c.tau,
                                     gamma=c.gamma, alpha=alpha, n_step_return_horizon=c.n_step)
        self.buffer = replay_buffer(c.buffer_size, seed=seed)
        self._rng = numpy_random_state(seed)
        self._torch_rng = torch.Generator().manual_seed((seed + 2) % SEED_MODULUS).get_state()
        self.decisions = 0
        self.gradient_steps = 0
        self._owed = 0.0

    def target_values(self, x_next: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """SAC's soft bootstrap values ``[rows]`` of next observations' features: the
        smaller target critic's value of a fresh squashed action, less ``alpha`` times its
        log-probability (Tianshou's ``_target_q``); to call under ``torch.no_grad()``."""
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
        stats = []
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
                   "alpha": float(self.algorithm.alpha.value)}
        if stats:
            metrics["actor_loss"] = float(np.mean([s.actor_loss for s in stats]))
            metrics["critic_loss"] = float(np.mean([(s.critic1_loss + s.critic2_loss) / 2 for s in stats]))
            metrics["loss"] = metrics["actor_loss"] + metrics["critic_loss"]
        return metrics

    def _modules(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        """The trainer's own networks (critics, their targets) and, when tuned, ``alpha``
        with its optimiser: what :data:`CRITICS` holds."""
        a = self.algorithm
        modules: dict[str, nn.Module | torch.optim.Optimizer] = {
            "critic1": a.critic, "critic2": a.critic2, "critic1_target": a.critic_old, "critic2_target": a.critic2_old}
        if isinstance(a.alpha, AutoAlpha):
            modules["alpha"] = a.alpha
            modules["alpha_optim"] = cast(torch.optim.Optimizer, a.alpha._optim)
        return modules

    def state(self) -> TrainerState:
        """``trainer.json`` (counters, the numpy generator, the buffer's fill, insertion
        point and generator), ``critics.pt`` (both critics, their targets, ``alpha`` and
        its Adam), ``optim.pt`` (Adam of the actor and critics), ``random.pt`` (the torch
        generator of the actor's samples) and ``buffer.npz`` (the buffer's filled rows,
        when it has any)."""
        files = {
            TRAINER_FILE: trainer_json("sac", decisions=self.decisions, gradient_steps=self.gradient_steps,
                                       owed=self._owed, random=random_state_json(self._rng["np"]),
                                       buffer=buffer_json(self.buffer)),
            CRITICS: modules_bytes(self._modules()),
            OPTIM: optimizer_bytes(self.algorithm),
            RANDOM: torch_bytes({"torch": self._torch_rng.clone()}),
        }
        if len(self.buffer):
            files[BUFFER] = npz_bytes(buffer_arrays(self.buffer))
        return files

    def load_state(self, state: TrainerState) -> None:
        data = read_trainer_json(state, "sac", ("decisions", "gradient_steps", "owed", "random", "buffer"))
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
        self.decisions, self.gradient_steps = int(data["decisions"]), int(data["gradient_steps"])
        self._owed = float(data["owed"])
        self._rng["np"] = random
        self._torch_rng = generator.clone()

    def _buffer_widths(self) -> dict[str, tuple[int, ...]]:
        """The row shape of every array the replay buffer stores (see ``transitions``)."""
        obs = (feature_dim(self.policy.space.observation_space),)
        return {"obs.obs": obs, "obs_next.obs": obs, "act": (self.box.size,), "rew": (), "terminated": (),
                "truncated": (), "done": ()}


class SAC(Algorithm):
    """Soft actor-critic oracle over bounded Box actions (see the module's docstring).
    Off-policy (it learns from a replay buffer), so on the ray backend it also learns
    from episodes played with weights up to ``max_staleness`` versions old."""

    learns = True
    on_policy = False
    Config = SACConfig
    config: SACConfig

    def models(self, space: PolicySpace) -> dict[str, Model]:
        """The actor's and the critics' models (:func:`popmarl_torch.models.resolve` of
        ``model`` and ``critic_model``, which defaults to ``model``)."""
        c = self.config
        critic = c.critic_model if c.critic_model is not None else c.model
        obs = space.observation_space
        return {"actor": feedforward(resolve(c.model, obs, hidden=c.hidden), "sac", "model"),
                "critic": feedforward(resolve(critic, obs, hidden=c.hidden), "sac", "critic_model")}

    def describe(self, space: PolicySpace) -> str:
        c = self.config
        return describe_networks(self.models(space), chosen=c.model is None and c.critic_model is None)

    def check(self, *, env: Env, space: PolicySpace) -> None:
        bounded_box(space)
        self.models(space)

    def make_policy(self, *, space: PolicySpace, seed: int) -> SquashedGaussianPolicy:
        box = bounded_box(space)
        set_torch_threads(self.config.torch_threads)
        with seeded(seed):
            actor = build_network("actor", observation_space=space.observation_space, action_dim=box.size,
                                  model=self.models(space)["actor"])
        return SquashedGaussianPolicy(space=space, actor=cast(SquashedGaussianActor, actor))

    def initial_policy(self, *, space: PolicySpace, seed: int) -> SquashedGaussianPolicy:
        return uniform_initial(self.make_policy(space=space, seed=seed))

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int, context: TrainerContext) -> SACTrainer:
        if not isinstance(policy, SquashedGaussianPolicy):
            raise TypeError(f"sac trains a SquashedGaussianPolicy, got {type(policy).__name__}")
        return SACTrainer(policy=policy, config=self.config, seed=seed, critic_model=self.models(space)["critic"])


__all__ = ["SAC", "ActionCritic", "SACConfig", "SACTrainer", "SquashedGaussianActor", "SquashedGaussianPolicy",
           "bounded_box", "build_network", "from_box", "to_box"]
