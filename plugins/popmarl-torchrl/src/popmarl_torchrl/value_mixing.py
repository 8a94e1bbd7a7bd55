"""Algorithms ``vdn`` and ``qmix``: value decomposition for discrete cooperative teams.

Every seat acts ε-greedily on its own Q network over its legal actions (the exported
policies: :class:`~popmarl_torch.policies.QPolicy`; a ``shared`` population's seats share
one network and read their one-hot ids). In training the seats' chosen Q-values are
mixed into the team's: summed (``vdn``: TorchRL's :class:`~torchrl.modules.VDNMixer`) or
by QMIX's monotonic hypernetwork conditioned on the global state (``qmix``:
:class:`~torchrl.modules.QMixer`; the env's state, else every seat's observation
concatenated, layer-normalised before the hypernetworks read it: :class:`NormalisedQMixer`),
and regressed on the team's reward (the learner's seats' rewards summed)
plus the discounted target value of the next step, with TorchRL's
:class:`~torchrl.objectives.QMixerLoss` (TD(0), target networks for the Q networks and
the mixer, kept by :class:`~torchrl.objectives.SoftUpdate`). Double Q: the next step's
actions are the online networks' greedy legal ones, valued by the target networks.
Transitions are one per env step of the team (every seat's row), kept in a replay
buffer that is trainer state with the mixer, the target networks, Adam's state, the
ε schedule and the sampling generator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import QMixer, VDNMixer
from torchrl.objectives import QMixerLoss, SoftUpdate, ValueEstimators

from popmarl.api import (TRAINER_FILE, Algorithm, ConfigError, Discrete, Env, JointEpisodes, Policy,
                         PolicySpace, Space, Trainer, TrainerContext, TrainerState, at_least_one, layer_widths, non_negative,
                         npz_bytes, optional, positive, read_trainer_json, trainer_json, unit_interval)
from popmarl_torch.models import (MLP, Model, ModelSpec, as_spec, describe_networks, feedforward, load, model_field,
                                  network, resolve)
from popmarl_torch.policies import QPolicy
from popmarl_torch.seeding import seeded
from popmarl_torch.state import generator_from_json, generator_json, load_modules, modules_bytes
from popmarl_torch.threads import set_torch_threads

from popmarl_torchrl.centralized import EncodedQMixer, NormalisedQMixer, check_state_model, state_space
from popmarl_torchrl.replay import BUFFER, Replay
from popmarl_torchrl.team import Team, TeamNet

LOSSES = ("l2", "smooth_l1", "l1")
#: A large negative Q-value for illegal actions (finite: sums and gathers stay finite).
ILLEGAL = -1e9


@attrs.frozen(kw_only=True)
class VDNConfig:
    """Settings of ``vdn`` (``qmix`` adds ``mixing_embed_dim``).

    Each round adds its games' steps to the replay buffer (``buffer_size`` team steps),
    then, once ``learning_starts`` steps are stored, takes ``updates_per_step`` gradient
    steps per new team step (fractions carry over), each on ``batch_size`` steps drawn
    uniformly. ε falls linearly from ``eps_start`` to ``eps_end`` over ``eps_decay_steps``
    team steps (every seat acts ε-greedily). ``target_tau``: the target networks' soft
    update per gradient step. ``agent_id``: a population of several seats (``shared``)
    gives its Q network the seat's one-hot id. ``model``: the Q network's network model
    (:mod:`popmarl_torch.models`; null: ``cnn`` for image observations, else ``mlp`` of
    ``hidden``).

    ``gamma`` 0.95: in 25-step MPE games that bootstrap at the time limit, 0.99 makes
    Q-values about 100 steps of reward deep, and the team's small per-step differences
    (a speaker's message) drown in them. On mpe2 speaker-listener (``benchmarks/marl.py``)
    both ``vdn`` and ``qmix`` reach a higher team return with 0.95 than with 0.99, and
    above independent ``dqn``'s."""

    lr: float = attrs.field(default=5e-4, validator=positive)
    hidden: list[int] = attrs.field(factory=lambda: [64, 64], validator=layer_widths)
    model: ModelSpec = model_field()
    gamma: float = attrs.field(default=0.95, validator=unit_interval)
    batch_size: int = attrs.field(default=256, validator=at_least_one)
    buffer_size: int = attrs.field(default=50_000, validator=at_least_one)
    learning_starts: int = attrs.field(default=1_000, validator=non_negative)
    updates_per_step: float = attrs.field(default=0.25, validator=positive)
    eps_start: float = attrs.field(default=1.0, validator=unit_interval)
    eps_end: float = attrs.field(default=0.05, validator=unit_interval)
    eps_decay_steps: int = attrs.field(default=10_000, validator=at_least_one)
    target_tau: float = attrs.field(default=0.005, validator=unit_interval)
    double_q: bool = True
    loss: str = attrs.field(default="l2", validator=attrs.validators.in_(LOSSES))
    max_grad_norm: float | None = attrs.field(default=10.0, validator=optional(positive))
    agent_id: bool = True
    torch_threads: int = attrs.field(default=1, validator=at_least_one)


@attrs.frozen(kw_only=True)
class QMIXConfig(VDNConfig):
    """``vdn``'s settings, the width of QMIX's mixing network (``mixing_embed_dim``) and
    ``state_norm``: whether the hypernetworks read the state layer-normalised (each row to
    zero mean and unit variance over its features, no learned scale) or raw.
    ``state_model``: a network model (:mod:`popmarl_torch.models`) over the state space
    (the env's, else the seats' observations concatenated, a flat Box) whose features
    the hypernetworks read in place of the raw state (``state_norm`` then normalises the
    features), trained with the mixer: ``cnn`` for an env whose state is an image;
    ``mlp``'s widths default to ``hidden``. Null: the hypernetworks read the state itself.

    ``state_norm`` is on by default because QMIX's hypernetworks are linear in the state and
    multiply each other, so the mixed value grows about quadratically with the state's
    magnitude, and the TD targets bootstrap from it. On a state of unbounded positions and
    distances (mpe2's spread) the raw-state mixer's value drifts above every return the
    team can get (positive, where every reward is negative) and the greedy policy ends
    worse than its initial one; the same mixer reading the state layer-normalised (or not
    at all) stays near the returns. The seats' Q networks still read their observations
    raw."""

    mixing_embed_dim: int = attrs.field(default=32, validator=at_least_one)
    state_norm: bool = True
    state_model: ModelSpec = model_field()


class ValueMixing(Algorithm):
    """Per-seat Q networks whose chosen values a mixer combines; one learner over the team."""

    learns = True
    joint_view = True
    trains_team = True
    on_policy = False
    kind: ClassVar[str] = ""
    config: VDNConfig

    def q_model(self, space: PolicySpace) -> Model:
        """The agents' Q-network model (:func:`popmarl_torch.models.resolve` of ``model``)."""
        c = self.config
        return feedforward(resolve(c.model, space.observation_space, hidden=c.hidden), self.kind, "model")

    def networks(self, space: PolicySpace) -> dict[str, Model]:
        """Each network's model, by the name the run's log gives it."""
        return {"q-network": self.q_model(space)}

    def describe(self, space: PolicySpace) -> str:
        return describe_networks(self.networks(space), chosen=self.config.model is None)

    def check(self, *, env: Env, space: PolicySpace) -> None:
        name = self.kind
        self.networks(space)
        if not isinstance(space.action_space, Discrete):
            raise ConfigError(f"algorithm: {name} needs discrete actions, and population {space.population} acts in "
                              f"{space.action_space}; use mappo (discrete or Box actions)")
        if env.zero_sum:
            raise ConfigError(f"algorithm: {name} trains a cooperative team on its seats' summed reward, and "
                              f"env {type(env).__name__} is two-player zero-sum; use dqn, ppo or mappo")

    def make_policy(self, *, space: PolicySpace, seed: int) -> QPolicy:
        c = self.config
        set_torch_threads(c.torch_threads)
        assert isinstance(space.action_space, Discrete)
        ids = len(space.agents) if c.agent_id and len(space.agents) > 1 else 0
        model = self.q_model(space)
        with seeded(seed):
            qnet = network(model, space.observation_space, space.action_space.n, extra=ids)
        return QPolicy(space=space, qnet=qnet, eps=c.eps_start, agent_id=ids > 0, uniform_mark=False, grouped=False)

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int,
                     context: TrainerContext) -> ValueMixingTrainer:
        team = Team(context)
        if not team.discrete:
            raise ConfigError(f"algorithm: {self.kind} needs discrete actions for every seat of its team")
        with seeded(seed + 1):
            mixer = self.mixer(team, state_space(context.state_space, team))
        return ValueMixingTrainer(self.config, team, mixer, kind=self.kind, seed=seed)

    def mixer(self, team: Team, state: Space) -> TensorDictModule:
        """The mixing network over ``team``'s chosen Q-values (conditioned on states of
        ``state`` where it reads them)."""
        raise TypeError(f"{type(self).__name__}: a value-mixing algorithm names its mixer")


class VDN(ValueMixing):
    """VDN: the team's Q-value is the sum of its seats' (TorchRL's ``VDNMixer``)."""

    Config = VDNConfig
    kind = "vdn"

    def mixer(self, team: Team, state: Space) -> TensorDictModule:
        return TensorDictModule(VDNMixer(n_agents=team.n, device="cpu"), in_keys=[("agents", "chosen_action_value")],
                                out_keys=["chosen_action_value"])


class QMIX(ValueMixing):
    """QMIX: a monotonic mixing network whose weights a hypernetwork makes from the state
    (TorchRL's ``QMixer``)."""

    Config = QMIXConfig
    kind = "qmix"
    config: QMIXConfig

    def state_model(self) -> Model | None:
        """The mixer's state model (``state_model``; an ``mlp``'s widths default to
        ``hidden``), None where the hypernetworks read the state itself."""
        c = self.config
        spec = as_spec(c.state_model)
        return None if spec is None else feedforward(load(spec, hidden=c.hidden), self.kind, "state_model")

    def networks(self, space: PolicySpace) -> dict[str, Model]:
        # the mixer's hypernetworks reading the raw state: an encoder of no layers
        return {**super().networks(space), "mixer state": self.state_model() or MLP(hidden=[])}

    def describe(self, space: PolicySpace) -> str:
        c = self.config
        return describe_networks(self.networks(space), chosen=c.model is None and c.state_model is None)

    def check(self, *, env: Env, space: PolicySpace) -> None:
        super().check(env=env, space=space)
        model = self.state_model()
        if model is not None:
            check_state_model(model, env, self.kind, "state_model")

    def mixer(self, team: Team, state: Space) -> TensorDictModule:
        c = self.config
        model = self.state_model()
        module: QMixer
        if model is not None:
            module = EncodedQMixer(encoder=model.build(state), state_dim=team.state_dim,
                                   mixing_embed_dim=c.mixing_embed_dim, n_agents=team.n, state_norm=c.state_norm)
        else:
            mixer_type = NormalisedQMixer if c.state_norm else QMixer
            module = mixer_type(state_shape=(team.state_dim,), mixing_embed_dim=c.mixing_embed_dim, n_agents=team.n,
                                device="cpu")
        return TensorDictModule(module, in_keys=[("agents", "chosen_action_value"), "state"],
                                out_keys=["chosen_action_value"])


class _TeamQ(nn.Module):
    """The team's local Q-values for QMixerLoss: every seat's values over its legal
    actions (zero for a seat not acting), the actions valued (``greedy``: the given
    ones, the online networks' choice under double Q; else its own argmax) and their values."""

    def __init__(self, qnet: TeamNet, *, double_q: bool) -> None:
        super().__init__()
        self.qnet = qnet
        self.double_q = double_q

    def forward(self, obs: torch.Tensor, mask: torch.Tensor, acted: torch.Tensor,
                greedy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q = self.qnet(obs)
        values = torch.where(acted.unsqueeze(-1), torch.where(mask, q, ILLEGAL), 0.0)
        action = greedy if self.double_q else values.argmax(dim=-1)
        chosen = values.gather(-1, action.unsqueeze(-1)) * acted.unsqueeze(-1)
        return values, action, chosen


#: The replay buffer's columns: (name, dtype), each row one team step.
def _columns(team: Team) -> dict[str, tuple[tuple[int, ...], Any]]:
    n, d, a, s = team.n, team.max_obs, team.max_actions, team.state_dim
    return {"obs": ((n, d), np.float32), "mask": ((n, a), np.bool_), "acted": ((n,), np.bool_),
            "action": ((n,), np.int64), "state": ((s,), np.float32), "next_obs": ((n, d), np.float32),
            "next_mask": ((n, a), np.bool_), "next_acted": ((n,), np.bool_), "next_state": ((s,), np.float32),
            "reward": ((), np.float32), "terminated": ((), np.bool_), "done": ((), np.bool_)}


def team_steps(team: Team, games: JointEpisodes) -> dict[str, np.ndarray]:
    """One replay row per env step of ``games`` (of the games where the learner played):
    every team seat's observation, legal actions and action, the state, the same at the
    next step (at a game's end: at its cut, nothing where it ended), the team's reward."""
    game = games.game_of_row
    last = np.zeros(games.steps, bool)
    last[games.starts[1:] - 1] = True
    following = np.minimum(np.arange(games.steps) + 1, games.steps - 1)
    obs, masks, acted, state = team.obs(games), team.masks(games), team.valid(games), team.state(games)
    final_obs, final_masks, final_state = team.obs(games, final=True), team.masks(games, final=True), team.state(
        games, final=True)
    columns = team.columns(games)
    in_play = np.array([[games.rows[s].final_obs[g] is not None and bool(games.own[g, k])
                         for s, k in zip(team.seats, columns)] for g in range(len(games))], bool).reshape(len(games),
                                                                                                         team.n)
    pick = last[:, None]
    rows = {
        "obs": obs, "mask": masks, "acted": acted, "action": np.where(acted, team.actions(games), 0).astype(np.int64),
        "state": state,
        "next_obs": np.where(pick[:, :, None], final_obs[game], obs[following]),
        "next_mask": np.where(pick[:, :, None], final_masks[game], masks[following]),
        "next_acted": np.where(pick, in_play[game], acted[following]),
        "next_state": np.where(pick, final_state[game], state[following]),
        "reward": team.team_rewards(games).astype(np.float32),
        "terminated": last & ~games.truncated[game], "done": last,
    }
    keep = games.own[game].any(axis=1)
    return {k: v[keep] for k, v in rows.items()}


class ValueMixingTrainer(Trainer):
    """VDN's or QMIX's update (see the module docstring)."""

    def __init__(self, config: VDNConfig, team: Team, mixer: TensorDictModule, *, kind: str, seed: int) -> None:
        self.config = c = config
        self.team = team
        self.kind = kind
        self.policies = [p for p in team.policies.values() if isinstance(p, QPolicy)]
        self.qnet = TeamNet(team, {p: pol.modules["q"] for p, pol in team.policies.items()}, team.max_actions)
        agents = "agents"
        local = TensorDictModule(_TeamQ(self.qnet, double_q=c.double_q),
                                 in_keys=[(agents, "observation"), (agents, "mask"), (agents, "acted"),
                                          (agents, "greedy")],
                                 out_keys=[(agents, "action_value"), (agents, "action"),
                                           (agents, "chosen_action_value")])
        self.mixer = mixer
        self.loss = QMixerLoss(local, mixer, loss_function=c.loss, delay_value=True, action_space="categorical")
        self.loss.make_value_estimator(ValueEstimators.TD0, gamma=c.gamma)
        self.target = SoftUpdate(self.loss, tau=c.target_tau)
        params = list(dict.fromkeys([*self.qnet.parameters(), *mixer.parameters()]))
        self.optim = torch.optim.Adam(params, lr=c.lr)
        self.params = params
        self.replay = Replay(c.buffer_size, _columns(team))
        self.rng = np.random.default_rng(seed)
        self.timesteps = 0
        self.gradient_steps = 0
        self.owed = 0.0
        self._set_eps()

    def _set_eps(self) -> None:
        c = self.config
        frac = min(1.0, self.timesteps / c.eps_decay_steps)
        eps = c.eps_start + frac * (c.eps_end - c.eps_start)
        for policy in self.policies:
            policy.eps = eps

    def _greedy(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The online networks' greedy legal actions (action 0 where none is legal)."""
        with torch.no_grad():
            return torch.where(mask, self.qnet(obs), ILLEGAL).argmax(dim=-1)

    def _batch(self, rows: Mapping[str, np.ndarray]) -> TensorDict:
        t = {k: torch.as_tensor(v) for k, v in rows.items()}
        size, n = len(t["reward"]), self.team.n
        now = TensorDict({"observation": t["obs"], "mask": t["mask"], "acted": t["acted"], "action": t["action"],
                          "greedy": t["action"]}, batch_size=[size, n])
        after = TensorDict({"observation": t["next_obs"], "mask": t["next_mask"], "acted": t["next_acted"],
                            "greedy": self._greedy(t["next_obs"], t["next_mask"])}, batch_size=[size, n])
        return TensorDict({"agents": now, "state": t["state"],
                           "next": TensorDict({"agents": after, "state": t["next_state"],
                                               "reward": t["reward"].unsqueeze(-1),
                                               "done": t["done"].unsqueeze(-1),
                                               "terminated": t["terminated"].unsqueeze(-1)}, batch_size=[size])},
                          batch_size=[size])

    def update(self, episodes: Any) -> Mapping[str, float]:
        games: JointEpisodes = episodes
        if not isinstance(games, JointEpisodes):
            raise TypeError(f"{self.kind} learns from the joint view (JointEpisodes)")
        c = self.config
        steps = team_steps(self.team, games)
        new = len(steps["reward"])
        self.replay.add(steps)
        self.timesteps += new
        losses = []
        if self.replay.size >= max(c.learning_starts, 1):
            self.owed += new * c.updates_per_step
            count = math.floor(self.owed)
            self.owed -= count
            for _ in range(count):
                out = self.loss(self._batch(self.replay.sample(c.batch_size, self.rng)))
                self.optim.zero_grad()
                out["loss"].backward()
                if c.max_grad_norm is not None:
                    nn.utils.clip_grad_norm_(self.params, c.max_grad_norm)
                self.optim.step()
                self.target.step()
                self.gradient_steps += 1
                losses.append(float(out["loss"].detach()))
        self._set_eps()
        metrics = {"eps": self.policies[0].eps if self.policies else 0.0, "buffer": float(self.replay.size),
                   "gradient_steps": float(self.gradient_steps), "team_steps": float(self.timesteps)}
        if losses:
            metrics["loss"] = float(np.mean(losses))
        return metrics

    # -- state ------------------------------------------------------------------------------
    def state(self) -> TrainerState:
        """``trainer.json`` (counters, the sampling generator, the buffer's fill),
        ``trainer.pt`` (the loss module: the mixer and every target network; Adam's state)
        and ``buffer.npz`` (the replay buffer's rows)."""
        return {TRAINER_FILE: trainer_json(self.kind, timesteps=self.timesteps, gradient_steps=self.gradient_steps,
                                      owed=self.owed, rng=generator_json(self.rng),
                                      buffer=self.replay.fill()),
                "trainer.pt": modules_bytes({"loss": self.loss, "optim": self.optim}),
                BUFFER: npz_bytes(self.replay.arrays())}

    def load_state(self, state: TrainerState) -> None:
        data = read_trainer_json(state, self.kind, ("timesteps", "gradient_steps", "owed", "rng", "buffer"))
        load_modules(state, "trainer.pt", {"loss": self.loss, "optim": self.optim})
        self.replay.restore(data["buffer"], state)
        self.timesteps, self.gradient_steps = int(data["timesteps"]), int(data["gradient_steps"])
        self.owed = float(data["owed"])
        self.rng = generator_from_json(data["rng"], "rng")
        self._set_eps()
