"""Algorithm ``dqn``: double DQN with a target network, n-step returns, ε-greedy.

The update is Tianshou 2.0's :class:`tianshou.algorithm.DQN` driven from a replay buffer
this trainer fills with the learner's episodes; the target's argmax (and, without
double Q-learning, its max) runs over the next state's legal actions only. The policy
is greedy over legal actions, so as a PSRO oracle it adds a deterministic best
response, and it is an :class:`~popmarl.api.ExplicitPolicy` (exact evaluation,
NashConv, tabular export work).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

import attrs
import numpy as np
import torch
from tianshou.algorithm import DQN as TianshouDQN
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.data import Batch, ReplayBuffer
from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode

from popmarl.api import (TRAINER_FILE, Algorithm, ConfigError, Discrete, Env, EnvTraits, Episode, Policy, PolicySpace,
                         Trainer, TrainerContext, TrainerState, at_least_one, layer_widths, non_negative, npz_bytes,
                         optional, positive, read_npz, read_trainer_json, trainer_json, unit_interval)
from popmarl_torch.auto import ACTING_ROWS
from popmarl_torch.devices import device_validator
from popmarl_torch.features import feature_dim
from popmarl_torch.mlp import inference
from popmarl_torch.models import Model, ModelSpec, describe_networks, feedforward, model_field, network, resolve
from popmarl_torch.nets import QNet
from popmarl_torch.placement import DeviceCopies, OnDevice, Placement, TrainerDevices, move_policy
from popmarl_torch.policies import QPolicy, uniform_initial
from popmarl_torch.seeding import seeded
from popmarl_torch.state import load_module, module_bytes, random_state_from_json, random_state_json
from popmarl_torch.threads import set_torch_threads
from popmarl_torch.timing import acting_workload, shapes, update_workload

from popmarl_tianshou.batching import append, gym_space, numpy_random, numpy_random_state, replay_buffer, transitions
from popmarl_tianshou.optim import FusedAdamFactory
from popmarl_tianshou.replay import ReplayRound
from popmarl_tianshou.state import buffer_arrays, buffer_json, load_buffer, load_optimizer, optimizer_bytes


@attrs.frozen(kw_only=True)
class DQNConfig:
    """Double DQN. Steps are the learner's decisions (transitions), not env steps.

    ``updates_per_step`` gradient steps of ``batch_size`` transitions are taken per new
    transition once the buffer holds ``learning_starts`` (the replay ratio; it follows the
    env, below); the target network is synced
    every ``target_update_freq`` gradient steps (0: no target network); ε decays
    linearly from ``eps_start`` to ``eps_end`` over ``eps_decay_steps``. ``huber_delta``
    switches the TD loss from squared error to Huber. ``device`` is where the gradient
    steps run (``auto``, ``cpu``, ``cuda``, ``cuda:N``), ``acting_device`` where the
    policies act (``cpu`` unless configured). ``auto`` is the CPU where torch sees no
    GPU; where it sees one, the faster of the CPU and the GPU for this learner's
    Q-network, timed once by its trainer on a few gradient steps at ``batch_size`` (for
    ``acting_device``: forward passes at the rollout's batch size), then logged, reported
    in the metrics and kept in the trainer's state (see :mod:`popmarl_torch.placement`).
    The defaults are tuned as PSRO oracles for Kuhn and Leduc poker (returns of a few
    chips, episodes of a few steps). ``lr``, ``gamma``, ``n_step`` and
    ``updates_per_step`` follow the env when left null (:meth:`DQN.env_defaults`): 3e-4,
    0.95, 3 and 1/16 in a long turn-based game without chance (connect four), else 1e-3,
    1.0, 1 and 1/32. ``model`` is the Q-network's network model
    (:mod:`popmarl_torch.models`: a name or ``{name, params}``); null: ``cnn`` for image
    observations, else ``mlp`` of ``hidden`` widths.
    """

    lr: float | None = attrs.field(default=None, validator=optional(positive))
    hidden: list[int] = attrs.field(factory=lambda: [128, 128], validator=layer_widths)
    model: ModelSpec = model_field()
    gamma: float | None = attrs.field(default=None, validator=optional(unit_interval))
    n_step: int | None = attrs.field(default=None, validator=optional(at_least_one))
    batch_size: int = attrs.field(default=256, validator=at_least_one)
    buffer_size: int = attrs.field(default=50_000, validator=at_least_one)
    learning_starts: int = attrs.field(default=1_000, validator=non_negative)
    updates_per_step: float | None = attrs.field(default=None, validator=optional(positive))
    target_update_freq: int = attrs.field(default=200, validator=non_negative)
    double: bool = True
    eps_start: float = attrs.field(default=1.0, validator=unit_interval)
    eps_end: float = attrs.field(default=0.05, validator=unit_interval)
    eps_decay_steps: int = attrs.field(default=10_000, validator=at_least_one)
    huber_delta: float | None = attrs.field(default=None, validator=optional(positive))
    torch_threads: int = attrs.field(default=1, validator=at_least_one)
    device: str = attrs.field(default="auto", validator=device_validator)
    acting_device: str = attrs.field(default="cpu", validator=device_validator)


class MaskedDQN(TianshouDQN):
    """Tianshou's DQN with the bootstrap target restricted to the next state's legal
    actions in every mode (Tianshou masks only the online argmax of double DQN)."""

    def _target_q(self, buffer: ReplayBuffer, indices: np.ndarray) -> torch.Tensor:
        obs_next = cast(Batch, buffer.get(indices, "obs_next"))
        return self.target_values(obs_next.obs, getattr(obs_next, "mask", None))

    def target_values(self, obs_next: np.ndarray | torch.Tensor,
                      mask: np.ndarray | torch.Tensor | None) -> torch.Tensor:
        """The bootstrap values ``[rows]`` of next observations' features ``obs_next``
        with legal actions ``mask`` (bool or 0/1; None: all), from the networks as they
        are now; to call under ``torch.no_grad()``."""
        # The networks' MLPs are called directly (no policy batches, no module calls:
        # this runs every gradient step); ``inference`` gives the same numbers.
        online = cast(QNet, self.policy.model)
        lagged = None if self.model_old is None else cast(QNet, self.model_old.module)
        x = torch.as_tensor(obs_next, dtype=torch.float32, device=next(online.parameters()).device)
        target = inference((online if lagged is None else lagged).net, x)
        if self.is_double:
            q = target if lagged is None else inference(online.net, x)
            best = self.policy.compute_q_value(q, mask).argmax(dim=1, keepdim=True)  # type: ignore[arg-type]
            return target.gather(1, best).squeeze(1)  # over the legal actions
        return self.policy.compute_q_value(target, mask).max(dim=1)[0]  # type: ignore[arg-type]


OPTIM, TARGET, BUFFER = "optim.pt", "target.pt", "buffer.npz"


class DQNTrainer(Trainer):
    """Feeds episodes into a replay buffer and takes gradient steps on the learner's
    Q-network (or its copy on the update device, see :class:`DeviceCopies`);
    publishes the current ε through the policy's weights.

    Its devices (``devices``: ``placement`` if given, else the config's, ``auto`` timed)
    are decided on its first need: its first update, ``state()`` or ``algorithm``; a
    loaded state's record decides them instead. Tianshou's algorithm is built then, its
    target network the Q-network as it was when this trainer was made."""

    def __init__(self, *, policy: QPolicy, config: DQNConfig, seed: int, placement: Placement | None = None) -> None:
        self.policy = policy
        # A config no DQN filled (see Algorithm.env_params) takes the defaults of no env.
        unset = {k: v for k, v in DQN.env_defaults(None).items() if getattr(config, k) is None}
        self.config = config = attrs.evolve(config, **unset)
        self.lr: float = cast(float, config.lr)
        self.gamma: float = cast(float, config.gamma)
        self.n_step: int = cast(int, config.n_step)
        self.updates_per_step: float = cast(float, config.updates_per_step)
        qnet = policy.qnet
        passes = 2 if config.double and config.target_update_freq else 1  # target and online next-state Q
        self.devices = TrainerDevices(
            config=config, name=f"dqn learner of population {policy.space.population} (seed {seed})",
            log=logging.getLogger("popmarl_tianshou"),
            signature=("dqn", shapes(qnet), passes), forced=placement, rows=config.batch_size,
            acting_rows=ACTING_ROWS,
            update=lambda rows: update_workload([qnet], rows, lr=self.lr, no_grad_passes=passes),
            acting=lambda rows: acting_workload(qnet, rows))
        self._target = ({key: value.detach().clone() for key, value in qnet.state_dict().items()}
                        if config.target_update_freq else None)
        self._algorithm: MaskedDQN | None = None
        self._placement: Placement | None = None
        self.copies: DeviceCopies | None = None
        self.buffer = replay_buffer(config.buffer_size, seed=seed)
        self._rng = numpy_random_state(seed)
        self.decisions = 0
        self.gradient_steps = 0
        self._owed = 0.0
        policy.eps = self.epsilon()

    @property
    def algorithm(self) -> MaskedDQN:
        """Tianshou's DQN, built where the devices are (deciding them if not yet)."""
        placement = self.devices.placement()
        if self._algorithm is None or placement != self._placement:
            self._algorithm = self._build(placement)
            self._placement = placement
        return self._algorithm

    def _build(self, placement: Placement) -> MaskedDQN:
        c = self.config
        move_policy([self.policy.qnet], placement)
        self.copies = DeviceCopies(placement)
        learner = DiscreteQLearningPolicy(model=self.copies.of(self.policy.qnet),
                                          action_space=gym_space(self.policy.space.action_space))
        algorithm = MaskedDQN(
            policy=learner, optim=FusedAdamFactory(lr=self.lr), gamma=self.gamma,
            n_step_return_horizon=self.n_step, target_update_freq=c.target_update_freq,
            is_double=c.double, huber_loss_delta=c.huber_delta,
        )
        if algorithm.model_old is not None and self._target is not None:
            algorithm.model_old.module.load_state_dict(self._target)
        return algorithm

    def epsilon(self) -> float:
        """ε after ``decisions`` learner transitions (linear decay, then constant)."""
        c = self.config
        frac = min(self.decisions / c.eps_decay_steps, 1.0)
        return c.eps_start + frac * (c.eps_end - c.eps_start)

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        c = self.config
        self.devices.decide(rows=c.batch_size, acting_rows=len(episodes))
        algorithm = self.algorithm
        assert self.copies is not None
        batch = transitions(episodes, self.policy.space)
        append(self.buffer, batch)
        rows = len(batch)  # walks every field of the batch: once
        self.decisions += rows
        self.policy.eps = self.epsilon()
        losses: list[float] = []
        if len(self.buffer) >= max(c.learning_starts, c.batch_size):
            self._owed += rows * self.updates_per_step
            steps, self._owed = int(self._owed), self._owed - int(self._owed)
            # Tianshou's update(buffer, sample_size) per step, with the train-mode and
            # training-step switches set once for all steps (they walk every module), and
            # the samples drawn and preprocessed once for the round (see ReplayRound).
            with self.copies.training(), policy_within_training_step(algorithm.policy), \
                    torch_train_mode(algorithm), numpy_random(self._rng):
                replay = ReplayRound(self.buffer, steps=steps, batch_size=c.batch_size, gamma=self.gamma,
                                     n_step=self.n_step)
                for step in range(steps):
                    losses.append(algorithm._update_with_batch(replay.batch(step, algorithm.target_values)).loss)
            self.gradient_steps += steps
        metrics = {"epsilon": self.policy.eps, "buffer_size": float(len(self.buffer)),
                   "gradient_steps": float(self.gradient_steps), **self.devices.metrics()}
        if losses:
            metrics["loss"] = float(np.mean(losses))
        return metrics

    def state(self) -> TrainerState:
        """``trainer.json`` (counters, ε schedule position, Tianshou's target-sync counter,
        the numpy generators, the buffer's fill and insertion point, the device choices),
        ``optim.pt`` (Adam),
        ``target.pt`` (the target network, when there is one) and ``buffer.npz`` (the
        replay buffer's filled rows, when it has any)."""
        algorithm = self.algorithm
        files = {
            TRAINER_FILE: trainer_json(
                "dqn", decisions=self.decisions, gradient_steps=self.gradient_steps, owed=self._owed,
                # Tianshou counts gradient steps itself to time the target sync.
                target_iter=int(algorithm._iter), random=random_state_json(self._rng["np"]),
                buffer=buffer_json(self.buffer), devices=self.devices.record()),
            OPTIM: optimizer_bytes(algorithm),
        }
        if algorithm.model_old is not None:
            files[TARGET] = module_bytes(algorithm.model_old)
        if len(self.buffer):
            files[BUFFER] = npz_bytes(buffer_arrays(self.buffer))
        return files

    def load_state(self, state: TrainerState) -> None:
        data = read_trainer_json(state, "dqn", ("decisions", "gradient_steps", "owed", "target_iter", "random",
                                                "buffer"))
        random = random_state_from_json(data["random"], "random")
        self.devices.load(data.get("devices"))  # before the algorithm is built: no timing where recorded
        algorithm = self.algorithm
        buffer = data["buffer"] if isinstance(data["buffer"], dict) else {}
        size = buffer.get("size")
        arrays = read_npz(state, BUFFER) if size else {}
        load_buffer(self.buffer, buffer, arrays, BUFFER, self._buffer_widths())
        if algorithm.model_old is not None:
            load_module(state, TARGET, algorithm.model_old)
        load_optimizer(state, OPTIM, algorithm)
        self.decisions, self.gradient_steps = int(data["decisions"]), int(data["gradient_steps"])
        self._owed = float(data["owed"])
        algorithm._iter = int(data["target_iter"])
        self._rng["np"] = random
        self.policy.eps = self.epsilon()

    def _buffer_widths(self) -> dict[str, tuple[int, ...]]:
        """The row shape of every array the replay buffer stores (see ``transitions``)."""
        obs = (feature_dim(self.policy.space.observation_space),)
        n = (discrete_actions(self.policy.space, "dqn"),)
        return {"obs.obs": obs, "obs.mask": n, "obs_next.obs": obs, "obs_next.mask": n, "act": (), "rew": (),
                "terminated": (), "truncated": (), "done": ()}


def discrete_actions(space: PolicySpace, algorithm: str) -> int:
    """The number of actions of a discrete population; a ConfigError otherwise."""
    if not isinstance(space.action_space, Discrete):
        raise ConfigError(f"algorithm {algorithm}: population {space.population} needs discrete actions, "
                          f"got {space.action_space}")
    return space.action_space.n


class DQN(OnDevice, Algorithm):
    """Double DQN oracle over discrete, masked actions. Off-policy (it learns from a
    replay buffer), so on the ray backend it also learns from episodes played with
    weights up to ``max_staleness`` versions old."""

    learns = True
    on_policy = False
    #: As a PSRO best response, opponents move at random 30% of the time unless
    #: training.opponent_epsilon says otherwise: Q-learning only learns the positions it
    #: meets, and deterministic opponents show it few (without, its tic-tac-toe second
    #: seat loses many more games against random). None in games with chance
    #: (the core's ``opponent_exploration``).
    opponent_epsilon = 0.3
    Config = DQNConfig
    config: DQNConfig
    env_params = ("lr", "gamma", "n_step", "updates_per_step")

    @classmethod
    def env_defaults(cls, traits: EnvTraits | None) -> dict[str, Any]:
        """In a long turn-based game without chance
        (:attr:`~popmarl.api.EnvTraits.long_deterministic`), whose reward comes only
        after many moves: ``lr`` 3e-4, ``gamma`` 0.95, ``n_step`` 3 and ``updates_per_step``
        1/16 (16 gradient samples per decision at the default batch), the recipe of
        ``examples/psro_connect_four_dqn.yaml``, with which PSRO on connect four loses far
        fewer games against random than with lr 1e-3, gamma 1.0 and 1-step returns, a
        reward that many moves away being too faint for those. Else 1e-3, 1.0, 1 and 1/32
        (8 samples per decision), chosen by ``benchmarks/defaults.py``: with 1/32 PSRO on
        Leduc reaches NashConv 0.5 sooner than with 1/16 (an iteration's best responses
        take less time, for a few more iterations), and tic-tac-toe converges in fewer
        iterations, losing none of its games against random either way."""
        if traits is not None and traits.long_deterministic:
            return {"lr": 3e-4, "gamma": 0.95, "n_step": 3, "updates_per_step": 0.0625}
        return {"lr": 1e-3, "gamma": 1.0, "n_step": 1, "updates_per_step": 0.03125}

    def q_model(self, space: PolicySpace) -> Model:
        """The Q-network's model (:func:`popmarl_torch.models.resolve` of ``model``)."""
        c = self.config
        return feedforward(resolve(c.model, space.observation_space, hidden=c.hidden), "dqn", "model")

    def describe(self, space: PolicySpace) -> str:
        return describe_networks({"q-network": self.q_model(space)}, chosen=self.config.model is None)

    def check(self, *, env: Env, space: PolicySpace) -> None:
        self.q_model(space)

    def make_policy(self, *, space: PolicySpace, seed: int) -> QPolicy:
        n_actions = discrete_actions(space, "dqn")
        set_torch_threads(self.config.torch_threads)
        model = self.q_model(space)
        with seeded(seed):
            qnet = QNet(feature_dim(space.observation_space), n_actions,
                        net=network(model, space.observation_space, n_actions))
        return QPolicy(space=space, qnet=qnet.to(self.acting()))

    def initial_policy(self, *, space: PolicySpace, seed: int) -> QPolicy:
        return uniform_initial(self.make_policy(space=space, seed=seed))

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int, context: TrainerContext) -> DQNTrainer:
        if not isinstance(policy, QPolicy):
            raise TypeError(f"dqn trains a QPolicy, got {type(policy).__name__}")
        return DQNTrainer(policy=policy, config=self.config, seed=seed, placement=self.placement())
