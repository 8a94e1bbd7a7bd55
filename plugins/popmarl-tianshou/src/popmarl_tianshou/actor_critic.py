"""What ``ppo`` and ``a2c`` share: the policies they make and the on-policy trainer.

Discrete actions get a masked categorical actor (a :class:`CategoricalPolicy`, explicit
so exact evaluation works), Box actions a diagonal Gaussian. The value critic belongs to
the trainer: frozen policies only act. Each update trains on exactly the episodes the
newest weights collected, as Tianshou's ``update(buffer, batch_size, repeat)`` would
(GAE, then ``repeat`` epochs of minibatches; see :func:`on_policy_update`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from tianshou.algorithm import A2C as TianshouA2C
from tianshou.algorithm.modelfree.a2c import A2CTrainingStats
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy, ProbabilisticActorPolicy
from tianshou.algorithm.optim import OptimizerFactory
from tianshou.data import Batch
from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode

from popmarl.api import (TRAINER_FILE, Algorithm, CheckpointError, Discrete, Env, Episode, Policy, PolicySpace, Trainer,
                         TrainerContext, TrainerState, read_trainer_json, trainer_json)
from popmarl_torch.auto import ACTING_ROWS
from popmarl_torch.features import action_dim, feature_dim
from popmarl_torch.models import Model, describe_networks, feedforward, network, resolve
from popmarl_torch.nets import CategoricalActor, GaussianActor, ValueCritic
from popmarl_torch.placement import DeviceCopies, OnDevice, Placement, TrainerDevices, move_policy
from popmarl_torch.policies import CategoricalPolicy, GaussianPolicy, uniform_initial
from popmarl_torch.seeding import seeded
from popmarl_torch.state import load_module, module_bytes, random_state_from_json, random_state_json
from popmarl_torch.threads import set_torch_threads
from popmarl_torch.timing import acting_workload, shapes, update_workload

from popmarl_tianshou.batching import gym_space, numpy_random, numpy_random_state, to_buffer, transitions
from popmarl_tianshou.optim import FusedAdamFactory
from popmarl_tianshou.state import load_optimizer, optimizer_bytes


ActorPolicy = CategoricalPolicy | GaussianPolicy


def gaussian(loc_scale: tuple[torch.Tensor, torch.Tensor]) -> torch.distributions.Distribution:
    """A diagonal Gaussian over the action vector (arguments unchecked: the actor's
    outputs are finite by construction, and checks cost more than the distribution)."""
    loc, scale = loc_scale
    return torch.distributions.Independent(torch.distributions.Normal(loc, scale, validate_args=False), 1,
                                           validate_args=False)


def categorical(logits: torch.Tensor) -> torch.distributions.Categorical:
    """Tianshou's default distribution of a discrete actor (a categorical over
    ``logits``, -inf on illegal actions), with its argument checks off: the same
    numbers, without a constraint check per call and per ``log_prob``."""
    return torch.distributions.Categorical(logits=logits, validate_args=False)


#: Fields of a preprocessed on-policy batch that no A2C or PPO loss reads: left out of
#: the batch the update splits into minibatches, which then index fewer arrays.
UNREAD = ("rew", "terminated", "truncated", "done", "obs_next")


def on_policy_update(algorithm: TianshouA2C, batch: Batch, *, batch_size: int | None,
                     repeat: int) -> A2CTrainingStats:
    """``algorithm.update(to_buffer(batch), batch_size, repeat)`` (Tianshou's
    ``Algorithm._update`` with the whole buffer as its sample), without its copy of the
    buffer into a new batch: ``batch`` is that copy (the buffer holds it in order, so
    ``buffer.sample(0)`` is all of it, indices 0..n-1), preprocessed as Tianshou does
    (returns, advantages, PPO's old log-probabilities), then trained on by Tianshou's
    ``_update_with_batch`` without the fields no loss reads (:data:`UNREAD`).
    Tested equal to ``update`` by ``tests/plugins/tianshou/test_on_policy_update.py``."""
    buffer = to_buffer(batch)
    indices = np.arange(len(buffer))
    # What buffer[indices] gives (``info`` too), in a batch of its own: the preprocessing
    # adds fields and converts ``act``, which the buffer's batch must not see.
    sample = Batch(info=Batch())
    for key in batch.get_keys():
        sample[key] = batch[key]
    preprocessed = algorithm._preprocess_batch(sample, buffer, indices)
    for key in UNREAD:
        preprocessed.pop(key, None)
    with torch_train_mode(algorithm):
        stats = algorithm._update_with_batch(preprocessed, batch_size=batch_size, repeat=repeat)
    algorithm._postprocess_batch(preprocessed, buffer, indices)
    for scheduler in algorithm.lr_schedulers:
        scheduler.step()
    return stats


CRITIC, OPTIM = "critic.pt", "optim.pt"


#: Rows an on-policy update is timed on where its batch is not known yet (``batch_size``
#: None, before the first update).
DEFAULT_ROWS = 256


class OnPolicyTrainer(Trainer):
    """Trains an actor (and its own critic) on each batch of fresh episodes.

    ``build`` makes, for a placement, the Tianshou algorithm and the
    :class:`DeviceCopies` that say whether it trains the policy's actor itself or its
    device copy; it is called when ``devices`` are decided, on the trainer's first need
    (its first update, ``state()`` or ``algorithm``), or by a loaded state's record.
    ``kind`` tags the state (``ppo``, ``a2c``)."""

    def __init__(self, *, policy: ActorPolicy, build: Callable[[Placement], tuple[TianshouA2C, DeviceCopies]],
                 devices: TrainerDevices, kind: str, batch_size: int | None, epochs: int, seed: int) -> None:
        self.policy = policy
        self._build = build
        self.devices = devices
        self.kind = kind
        self.batch_size = batch_size
        self.epochs = epochs
        self._rng = numpy_random_state(seed)
        self.gradient_steps = 0
        self._built: tuple[TianshouA2C, DeviceCopies] | None = None
        self._placement: Placement | None = None

    def _placed(self) -> tuple[TianshouA2C, DeviceCopies]:
        placement = self.devices.placement()
        if self._built is None or placement != self._placement:
            self._built = self._build(placement)
            self._placement = placement
        return self._built

    @property
    def algorithm(self) -> TianshouA2C:
        """The Tianshou algorithm, built where the devices are (deciding them if not yet)."""
        return self._placed()[0]

    @property
    def copies(self) -> DeviceCopies:
        return self._placed()[1]

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        batch = transitions(episodes, self.policy.space)
        rows = len(batch)  # walks every field of the batch: once
        if not rows:
            return {}
        self.devices.decide(rows=min(self.batch_size or rows, rows), acting_rows=len(episodes))
        algorithm, copies = self._placed()
        with copies.training(), policy_within_training_step(algorithm.policy), numpy_random(self._rng):
            stats = on_policy_update(algorithm, batch, batch_size=self.batch_size, repeat=self.epochs)
        self.gradient_steps += stats.gradient_steps
        return {"loss": stats.loss.mean, "actor_loss": stats.actor_loss.mean, "vf_loss": stats.vf_loss.mean,
                "entropy": stats.ent_loss.mean, "gradient_steps": float(self.gradient_steps),
                **self.devices.metrics()}

    def state(self) -> TrainerState:
        """``trainer.json`` (the step counter, the numpy generator that shuffles
        minibatches, Tianshou's running return statistics, the device choices),
        ``critic.pt`` (the value critic) and ``optim.pt`` (Adam over actor and critic)."""
        algorithm = self.algorithm
        rms = algorithm.ret_rms
        return {
            TRAINER_FILE: trainer_json(self.kind, gradient_steps=self.gradient_steps, random=random_state_json(self._rng["np"]),
                                  ret_rms={"mean": float(rms.mean), "var": float(rms.var), "count": int(rms.count)},
                                  devices=self.devices.record()),
            CRITIC: module_bytes(algorithm.critic),
            OPTIM: optimizer_bytes(algorithm),
        }

    def load_state(self, state: TrainerState) -> None:
        data = read_trainer_json(state, self.kind, ("gradient_steps", "random", "ret_rms"))
        random = random_state_from_json(data["random"], "random")
        try:
            rms = {key: float(data["ret_rms"][key]) for key in ("mean", "var", "count")}
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"trainer state {TRAINER_FILE}: ret_rms needs numbers mean, var, count") from None
        self.devices.load(data.get("devices"))  # before the algorithm is built: no timing where recorded
        algorithm = self.algorithm
        load_module(state, CRITIC, algorithm.critic)
        load_optimizer(state, OPTIM, algorithm)
        self.gradient_steps = int(data["gradient_steps"])
        self._rng["np"] = random
        ret_rms = algorithm.ret_rms
        ret_rms.mean, ret_rms.var, ret_rms.count = rms["mean"], rms["var"], int(rms["count"])


def actor_critic_models(config: Any, space: PolicySpace, algorithm: str) -> dict[str, Model]:
    """The actor's and the critic's models of an algorithm whose config has ``model``,
    ``critic_model`` (null: the same as ``model``) and ``hidden``
    (:func:`popmarl_torch.models.resolve`; recurrent ones refused, naming the field)."""
    critic = config.critic_model if config.critic_model is not None else config.model
    obs = space.observation_space
    return {"actor": feedforward(resolve(config.model, obs, hidden=config.hidden), algorithm, "model"),
            "critic": feedforward(resolve(critic, obs, hidden=config.hidden), algorithm, "critic_model")}

class ActorCriticAlgorithm(OnDevice, Algorithm):
    """An actor-critic oracle; subclasses say which Tianshou update they use.

    Their configs have at least the settings of
    :class:`~popmarl_tianshou.a2c.A2CConfig`.

    On-policy (:attr:`~popmarl.api.Algorithm.on_policy`): Tianshou computes the
    behaviour log-probabilities (PPO's "old" ones) and the advantages with the weights
    being updated, which is right only for episodes those weights played; so every
    backend feeds the trainer episodes of the learner's current version only (on
    ``ray``, older ones are dropped whatever ``max_staleness`` says).
    """

    learns = True
    on_policy = True
    #: The Tianshou algorithm's name, tagging the trainer state (a PPO state is no A2C state).
    trainer_kind: ClassVar[str]
    #: The Tianshou algorithm that updates the learner (A2C or a subclass).
    tianshou_class: ClassVar[type[TianshouA2C]]

    def models(self, space: PolicySpace) -> dict[str, Model]:
        return actor_critic_models(self.config, space, self.trainer_kind)

    def describe(self, space: PolicySpace) -> str:
        c = self.config
        return describe_networks(self.models(space), chosen=c.model is None and c.critic_model is None)

    def check(self, *, env: Env, space: PolicySpace) -> None:
        self.models(space)

    def critic(self, space: PolicySpace) -> ValueCritic:
        """A fresh value critic of ``space`` (its weights from torch's generator)."""
        obs = space.observation_space
        return ValueCritic(feature_dim(obs), net=network(self.models(space)["critic"], obs, 1))

    def make_policy(self, *, space: PolicySpace, seed: int) -> ActorPolicy:
        c = self.config
        set_torch_threads(c.torch_threads)
        obs = space.observation_space
        obs_dim, out = feature_dim(obs), action_dim(space.action_space)
        model = self.models(space)["actor"]
        with seeded(seed):
            net = network(model, obs, out, out_gain=0.01)
            if isinstance(space.action_space, Discrete):
                return CategoricalPolicy(space=space, actor=CategoricalActor(obs_dim, out, net=net).to(self.acting()))
            actor = GaussianActor(obs_dim, out, c.hidden, c.log_std_init, net=net)
        return GaussianPolicy(space=space, actor=actor.to(self.acting()), deterministic_eval=c.deterministic_eval)

    def initial_policy(self, *, space: PolicySpace, seed: int) -> ActorPolicy:
        return uniform_initial(self.make_policy(space=space, seed=seed))

    def warm_start(self, policy: Policy, *, seed: int) -> None:
        """Give the actor a fresh policy's output layer (and log standard deviation):
        near-uniform action probabilities over the learned features. A best response
        that started from its population's newest, near-deterministic policy explored
        too little to learn anything new (PPO's entropy ~1e-4 on Leduc)."""
        if not isinstance(policy, CategoricalPolicy | GaussianPolicy):
            return
        fresh = self.make_policy(space=policy.space, seed=seed)
        with torch.no_grad():
            for target, source in zip(policy.net[-1].parameters(), fresh.net[-1].parameters(), strict=True):
                target.copy_(source)
            if isinstance(policy, GaussianPolicy) and isinstance(fresh, GaussianPolicy):
                policy.actor.log_std.copy_(fresh.actor.log_std)

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int,
                     context: TrainerContext) -> OnPolicyTrainer:
        if not isinstance(policy, CategoricalPolicy | GaussianPolicy):
            raise TypeError(f"{type(self).__name__} trains an actor policy, got {type(policy).__name__}")
        c = self.config
        actor_policy = policy

        def build(placement: Placement) -> tuple[TianshouA2C, DeviceCopies]:
            move_policy([actor_policy.actor], placement)
            copies = DeviceCopies(placement)
            actor = copies.of(actor_policy.actor)
            learner: ProbabilisticActorPolicy
            # Our actors are plain modules with Tianshou's actor call signature (duck-typed).
            if isinstance(actor_policy, CategoricalPolicy):
                learner = DiscreteActorPolicy(actor=actor,  # type: ignore[arg-type]
                                              dist_fn=categorical, action_space=gym_space(space.action_space))
            else:
                learner = ProbabilisticActorPolicy(actor=actor, dist_fn=gaussian,  # type: ignore[arg-type]
                                                   action_space=gym_space(space.action_space),
                                                   action_scaling=False, action_bound_method=None)
            with seeded(seed + 1):
                critic = self.critic(space).to(copies.device)
            return self.tianshou_algorithm(policy=learner, critic=critic, optim=FusedAdamFactory(lr=c.lr)), copies

        # The timed stand-in trains the actor and a critic of the same shape (the critic
        # lives in the trainer, built on its device later: only the shapes and the work
        # matter here). Its own seeded
        # generator: no random state of the run moves.
        with seeded(seed + 1):
            critic_like = self.critic(space)
        devices = TrainerDevices(
            config=c, name=f"{self.trainer_kind} learner of population {space.population} (seed {seed})",
            log=logging.getLogger("popmarl_tianshou"),
            signature=(self.trainer_kind, shapes(actor_policy.actor, critic_like)), forced=self.placement(),
            rows=c.batch_size or DEFAULT_ROWS, acting_rows=ACTING_ROWS,
            update=lambda rows: update_workload([actor_policy.actor, critic_like], rows, lr=c.lr),
            acting=lambda rows: acting_workload(actor_policy.actor, rows))
        return OnPolicyTrainer(policy=policy, build=build, devices=devices, kind=self.trainer_kind,
                               batch_size=c.batch_size, epochs=c.epochs, seed=seed)

    def tianshou_algorithm(self, *, policy: ProbabilisticActorPolicy, critic: ValueCritic,
                           optim: OptimizerFactory) -> TianshouA2C:
        """The configured Tianshou algorithm (:attr:`tianshou_class`) that updates ``policy``:
        A2C's settings, and those :meth:`tianshou_params` adds."""
        c = self.config
        return self.tianshou_class(policy=policy, critic=critic, optim=optim, vf_coef=c.vf_coef, ent_coef=c.ent_coef,
                                   max_grad_norm=c.max_grad_norm, gae_lambda=c.gae_lambda, gamma=c.gamma,
                                   max_batchsize=4096, **self.tianshou_params())

    def tianshou_params(self) -> dict[str, Any]:
        """The Tianshou algorithm's settings besides A2C's (none for A2C itself)."""
        return {}
