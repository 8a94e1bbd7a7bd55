"""Algorithm ``masac``: multi-agent soft actor-critic with centralized critics, off-policy.

Actors act on each seat's own observation (the exported policies:
:class:`~popmarl_torch.squashed.SquashedGaussianPolicy`, a tanh-squashed Gaussian whose
mean and log standard deviation both depend on the observation; the mean, squashed, when
not exploring). The critics — trainer state, never exported — are twin Q networks over
the state (the env's, else every seat's observation concatenated) and every team seat's
action (:class:`TeamCritic`), with Polyak-averaged target copies. The update is TorchRL's
:class:`~torchrl.objectives.SACLoss` (SAC v2: no state-value network) on multi-agent keys,
as in BenchMARL's MASAC: each seat's actor loss ``α log π(a_i|o_i) − min Q(s, a)`` with
every seat's action freshly drawn, each seat's critic target ``r + γ (min Q'(s', a') −
α log π(a'_i|o'_i))`` by TD(0), and ``α`` tuned towards a target entropy per seat. The
critic values the team's summed reward with one output for every seat (``reward: team``,
a cooperative team) or each seat's own with one output per seat (``own``). Rows where a
seat does not act are masked out of every loss, and the critic reads its action as zeros.

Action bounds are kept by squashing, not clipping (:mod:`popmarl_torch.squashed`): every
action a policy returns lies in its seat's Box, so the rollout engine's clip never
changes one, and the trainer maps recorded actions back onto [-1, 1] (where TorchRL's
:class:`~torchrl.modules.TanhNormal` lives) before they enter the replay buffer. Box
actions with finite bounds only, of one shape for the whole team.

Transitions are one per env step of the team (every seat's row) in a replay buffer
(:class:`~popmarl_torchrl.replay.Replay`) that is trainer state, with the critics,
their targets, ``α``, the three Adam optimisers, the sampling generator and the torch
generator of the actors' reparameterised samples: a trainer restored from its state
continues bit-identically. Feed-forward networks only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import attrs
import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential, TensorDictModule
from torch import nn
from torchrl.modules import MLP, TanhNormal
from torchrl.objectives import SACLoss, SoftUpdate, ValueEstimators

from popmarl.api import (TRAINER_FILE, Algorithm, Box, CheckpointError, ConfigError, Env, JointEpisodes, Policy,
                         PolicySpace, Space, Trainer, TrainerContext, TrainerState, at_least_one, layer_widths, non_negative,
                         npz_bytes, optional, positive, read_trainer_json, trainer_json, unit_interval)
from popmarl_torch.mlp import ACTIVATIONS
from popmarl_torch.models import (Model, ModelConfig, ModelSpec, as_spec, describe_networks, feedforward, load,
                                  model_field, network, resolve)
from popmarl_torch.seeding import SEED_MODULUS, seeded
from popmarl_torch.squashed import SquashedGaussianActor, SquashedGaussianPolicy, bounded_box, from_box, loc_scale
from popmarl_torch.state import (generator_from_json, generator_json, load_modules, modules_bytes, read_torch,
                                 torch_bytes)
from popmarl_torch.threads import set_torch_threads

from popmarl_torchrl.centralized import check_state_model, state_space
from popmarl_torchrl.team import Team, TeamNet, space_error
from popmarl_torchrl.replay import BUFFER, Replay

REWARDS = ("team", "own")
LOSSES = ("l2", "smooth_l1", "l1")
INSTEAD = "mappo (discrete or Box actions) or vdn/qmix (discrete)"


@attrs.frozen(kw_only=True)
class MASACConfig:
    """MASAC's settings.

    Each round adds its games' team steps to the replay buffer (``buffer_size`` team
    steps), then, once ``learning_starts`` are stored, takes ``updates_per_step`` gradient
    steps per new team step (fractions carry over), each on ``batch_size`` steps drawn
    uniformly: the critics (lr ``critic_lr``), the actors (lr ``lr``), ``α`` (lr
    ``alpha_lr``), then the target critics (Polyak weight ``tau``). ``alpha`` null tunes
    the entropy weight from ``alpha_init`` towards ``target_entropy`` per seat (null: minus
    the number of action entries, the SAC authors' choice); a number fixes it.
    ``reward``: the critic values the team's summed reward (``team``) or each seat's own
    (``own``, one output per seat). ``agent_id``: a population of several seats
    (``shared``) also gives its actor the seat's one-hot id. ``model``: the actors'
    network model (:mod:`popmarl_torch.models`; null: ``cnn`` for image observations, else
    ``mlp`` of ``hidden`` and ``activation``); the critics read the state and the actions
    through ``critic_hidden`` layers of ``activation``, or through ``critic_model``'s
    encoder (the state its input, every seat's action its extra columns: ``cnn`` for an
    image state). ``loss``: the critics' regression
    loss; ``max_grad_norm``: the actors' and critics' gradient norm is clipped to it (null:
    not clipped). Updates run on the CPU, on ``torch_threads`` threads.

    Defaults: SAC's (twin critics, τ 0.005, automatic entropy from α 0.2 towards minus
    the action's entries, 256 × 256 ReLU critics, batches of 256) with the step sizes of
    popmarl's other MPE learners: lr 1e-3 for actors, critics and α, and γ 0.95 for
    short games that bootstrap at their time limit (see ``vdn``'s γ). A quarter of a
    gradient step per team step (as ``vdn`` and ``qmix``) rather than SAC's one: each
    step is costly on the CPU, and on mpe2 spread with continuous actions
    (``benchmarks/marl.py``, ``spread_box``) this rate already beats ``mappo``'s return at
    equal env steps. ``learning_starts`` 1,000 team steps: forty 25-step games of the
    fresh actors' wide exploration before the first update."""

    lr: float = attrs.field(default=1e-3, validator=positive)
    critic_lr: float = attrs.field(default=1e-3, validator=positive)
    alpha_lr: float = attrs.field(default=1e-3, validator=positive)
    hidden: list[int] = attrs.field(factory=lambda: [64, 64], validator=layer_widths)
    model: ModelSpec = model_field()
    critic_hidden: list[int] = attrs.field(factory=lambda: [256, 256], validator=layer_widths)
    critic_model: ModelSpec = model_field()
    activation: str = attrs.field(default="relu", validator=attrs.validators.in_(tuple(ACTIVATIONS)))
    gamma: float = attrs.field(default=0.95, validator=unit_interval)
    tau: float = attrs.field(default=0.005, validator=unit_interval)
    batch_size: int = attrs.field(default=256, validator=at_least_one)
    buffer_size: int = attrs.field(default=100_000, validator=at_least_one)
    learning_starts: int = attrs.field(default=1_000, validator=non_negative)
    updates_per_step: float = attrs.field(default=0.25, validator=positive)
    alpha: float | None = attrs.field(default=None, validator=optional(positive))
    alpha_init: float = attrs.field(default=0.2, validator=positive)
    target_entropy: float | None = None
    loss: str = attrs.field(default="l2", validator=attrs.validators.in_(LOSSES))
    max_grad_norm: float | None = attrs.field(default=None, validator=optional(positive))
    reward: str = attrs.field(default="team", validator=attrs.validators.in_(REWARDS))
    agent_id: bool = False
    torch_threads: int = attrs.field(default=1, validator=at_least_one)


class MASAC(Algorithm):
    """MASAC: squashed-Gaussian actors, centralized twin critics, one off-policy learner
    over the team."""

    learns = True
    on_policy = False
    joint_view = True
    trains_team = True
    Config = MASACConfig
    config: MASACConfig

    def actor_model(self, space: PolicySpace) -> Model:
        """The actor's model (:func:`popmarl_torch.models.resolve` of ``model``)."""
        c = self.config
        return feedforward(resolve(c.model, space.observation_space, hidden=c.hidden, activation=c.activation),
                           "masac", "model")

    def critic_model(self) -> Model | None:
        """The critics' model (``critic_model``, an ``mlp``'s widths and activation
        defaulting to ``critic_hidden`` and ``activation``); None: TorchRL's ``MLP``."""
        c = self.config
        spec = as_spec(c.critic_model)
        return None if spec is None else feedforward(load(spec, hidden=c.critic_hidden, activation=c.activation),
                                                     "masac", "critic_model")

    def describe(self, space: PolicySpace) -> str:
        c = self.config
        critic = self.critic_model() or load(ModelConfig(name="mlp"), hidden=c.critic_hidden, activation=c.activation)
        return describe_networks({"actor": self.actor_model(space), "critic": critic},
                                 chosen=c.model is None and c.critic_model is None)

    def check(self, *, env: Env, space: PolicySpace) -> None:
        bounded_box(space, "masac", INSTEAD)
        self.actor_model(space)
        if (critic := self.critic_model()) is not None:
            check_state_model(critic, env, "masac", "critic_model")
        for seat in env.agents:
            bounded_box(PolicySpace(population=seat, agents=(seat,), observation_space=env.observation_space(seat),
                                    action_space=env.action_space(seat)), "masac", INSTEAD)
        why = space_error([env.action_space(a) for a in env.agents])
        if why is not None:
            raise ConfigError(f"algorithm: masac trains the env's seats as one team, and {why}; use sac (independent "
                              "learners) for this env")

    def make_policy(self, *, space: PolicySpace, seed: int) -> SquashedGaussianPolicy:
        c = self.config
        set_torch_threads(c.torch_threads)
        box = bounded_box(space, "masac", INSTEAD)
        ids = len(space.agents) if c.agent_id and len(space.agents) > 1 else 0
        with seeded(seed):
            net = network(self.actor_model(space), space.observation_space, 2 * box.size, extra=ids, out_gain=0.01)
        return SquashedGaussianPolicy(space=space, actor=SquashedGaussianActor(net, box.size), agent_id=ids > 0,
                                      uniform_mark=False, algorithm="masac")

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int,
                     context: TrainerContext) -> MASACTrainer:
        team = Team(context)
        for population, p in team.policies.items():
            if not isinstance(p, SquashedGaussianPolicy):
                raise TypeError(f"masac trains SquashedGaussianPolicy actors (Box actions); population {population} "
                                f"has a {type(p).__name__}: use {INSTEAD}")
        boxes = [cast(SquashedGaussianPolicy, team.policies[team.population_of[s]]).box for s in team.seats]
        return MASACTrainer(self.config, team, boxes, seed=seed, critic_model=self.critic_model(),
                            state=context.state_space)


class TeamActor(nn.Module):
    """Every team seat's squashed Gaussian ``(loc, scale)`` ``[B, n, A]`` from its
    population's actor network (the policies' own modules: training it trains them)."""

    def __init__(self, team: Team, action_dim: int) -> None:
        super().__init__()
        nets = {p: cast(SquashedGaussianActor, policy.modules["actor"]).net for p, policy in team.policies.items()}
        self.net = TeamNet(team, nets, 2 * action_dim)
        self.action_dim = action_dim

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return loc_scale(self.net(obs), self.action_dim)


class TeamCritic(nn.Module):
    """``Q(s, a_1..a_n)`` ``[B, n, 1]``: ``net`` (TorchRL's :class:`~torchrl.modules.MLP`,
    or a network model's encoder and a linear head) over the state and every seat's action
    (zeros where a seat does not act), one output given to every seat (``heads`` 1) or one
    per seat (``heads`` n)."""

    def __init__(self, net: nn.Module, n: int, heads: int) -> None:
        super().__init__()
        self.n, self.heads = n, heads
        self.mlp = net

    def forward(self, state: torch.Tensor, action: torch.Tensor, acted: torch.Tensor) -> torch.Tensor:
        a = (action * acted.unsqueeze(-1)).flatten(-2)
        q = self.mlp(torch.cat([state, a], dim=-1)).unsqueeze(-1)
        return q.expand(*q.shape[:-2], self.n, 1) if self.heads == 1 else q


def box_steps(team: Team, boxes: list[Box], games: JointEpisodes, reward: str) -> dict[str, np.ndarray]:
    """One replay row per env step of ``games`` (of the games where the learner played):
    every team seat's observation, whether it acted and its action mapped onto [-1, 1], the
    state, the same at the next step (at a game's end: at its cut, nothing where it
    ended), each seat's reward (the team's summed, or its own)."""
    game = games.game_of_row
    steps, n = games.steps, team.n
    last = np.zeros(steps, bool)
    last[games.starts[1:] - 1] = True
    following = np.minimum(np.arange(steps) + 1, steps - 1)
    obs, acted, state = team.obs(games), team.valid(games), team.state(games)
    final_obs, final_state = team.obs(games, final=True), team.state(games, final=True)
    columns = team.columns(games)
    in_play = np.array([[games.rows[s].final_obs[g] is not None and bool(games.own[g, k])
                         for s, k in zip(team.seats, columns)] for g in range(len(games))], bool).reshape(-1, n)
    raw = team.actions(games).reshape(steps, n, -1)
    actions = np.stack([from_box(raw[:, j], boxes[j]) for j in range(n)], axis=1).astype(np.float32)
    if reward == "team":
        rewards = np.repeat(team.team_rewards(games)[:, None], n, axis=1)
    else:
        rewards = np.stack([games.rows[s].rewards * games.own[game, k] for s, k in zip(team.seats, columns)], axis=1)
    pick = last[:, None]
    rows = {"obs": obs, "acted": acted, "action": np.where(acted[..., None], actions, 0.0), "state": state,
            "next_obs": np.where(pick[:, :, None], final_obs[game], obs[following]),
            "next_acted": np.where(pick, in_play[game], acted[following]),
            "next_state": np.where(pick, final_state[game], state[following]),
            "reward": rewards.astype(np.float32), "terminated": last & ~games.truncated[game], "done": last}
    keep = games.own[game].any(axis=1)
    return {k: v[keep] for k, v in rows.items()}


def _columns(team: Team, action_dim: int) -> dict[str, tuple[tuple[int, ...], Any]]:
    n, d, s = team.n, team.max_obs, team.state_dim
    return {"obs": ((n, d), np.float32), "acted": ((n,), np.bool_), "action": ((n, action_dim), np.float32),
            "state": ((s,), np.float32), "next_obs": ((n, d), np.float32), "next_acted": ((n,), np.bool_),
            "next_state": ((s,), np.float32), "reward": ((n,), np.float32), "terminated": ((), np.bool_),
            "done": ((), np.bool_)}


RANDOM = "random.pt"


class MASACTrainer(Trainer):
    """MASAC's update over the team's joint view (see the module docstring)."""

    def __init__(self, config: MASACConfig, team: Team, boxes: list[Box], *, seed: int,
                 critic_model: Model | None = None, state: Space | None = None) -> None:
        self.config = c = config
        self.team, self.boxes = team, boxes
        action_dim = boxes[0].size
        agents = "agents"
        self.actor_net = TeamActor(team, action_dim)
        module = TensorDictModule(self.actor_net, in_keys=[(agents, "observation")],
                                  out_keys=[(agents, "loc"), (agents, "scale")])
        dist = ProbabilisticTensorDictModule(in_keys={"loc": (agents, "loc"), "scale": (agents, "scale")},
                                             out_keys=[(agents, "action")], distribution_class=TanhNormal,
                                             distribution_kwargs={"low": -1.0, "high": 1.0, "tanh_loc": False})
        actor = ProbabilisticTensorDictSequential(module, dist)
        target_entropy = -float(action_dim) if c.target_entropy is None else c.target_entropy
        # Seeded as a whole: SACLoss draws the second critic's initial weights when it
        # expands the one given into num_qvalue_nets.
        with seeded(seed + 1):
            heads, actions = 1 if c.reward == "team" else team.n, team.n * action_dim
            net = (MLP(in_features=team.state_dim + actions, out_features=heads, num_cells=list(c.critic_hidden),
                       activation_class=ACTIVATIONS[c.activation]) if critic_model is None
                   else network(critic_model, state_space(state, team), heads, extra=actions))
            critic = TeamCritic(net, team.n, heads)
            qvalue = TensorDictModule(critic, in_keys=["state", (agents, "action"), (agents, "acted")],
                                      out_keys=[(agents, "state_action_value")])
            self.loss = SACLoss(actor, qvalue, num_qvalue_nets=2, loss_function=c.loss,
                                alpha_init=c.alpha if c.alpha is not None else c.alpha_init,
                                fixed_alpha=c.alpha is not None, target_entropy=target_entropy, delay_qvalue=True,
                                deactivate_vmap=True)
        self.loss.set_keys(action=(agents, "action"), state_action_value=(agents, "state_action_value"),
                           reward=(agents, "reward"), done=(agents, "done"), terminated=(agents, "terminated"),
                           priority=(agents, "td_error"))
        self.loss.loss_mask_key = (agents, "acted")
        self.loss.make_value_estimator(ValueEstimators.TD0, gamma=c.gamma)
        self.target = SoftUpdate(self.loss, tau=c.tau)
        self.actor_params = list(dict.fromkeys(p for pol in team.policies.values()
                                               for p in pol.modules["actor"].parameters()))
        self.critic_params = list(self.loss.qvalue_network_params.values(True, True))
        self.optims = {"actor": torch.optim.Adam(self.actor_params, lr=c.lr),
                       "critic": torch.optim.Adam(self.critic_params, lr=c.critic_lr)}
        if c.alpha is None:
            self.optims["alpha"] = torch.optim.Adam([self.loss.log_alpha], lr=c.alpha_lr)
        self.replay = Replay(c.buffer_size, _columns(team, action_dim))
        self.rng = np.random.default_rng(seed)
        self.torch_rng = torch.Generator().manual_seed((seed + 2) % SEED_MODULUS).get_state()
        self.timesteps = 0
        self.gradient_steps = 0
        self.owed = 0.0

    def _batch(self, rows: Mapping[str, np.ndarray]) -> TensorDict:
        t = {k: torch.as_tensor(v) for k, v in rows.items()}
        size, n = len(t["done"]), self.team.n
        ends = {k: t[k].view(size, 1, 1).expand(size, n, 1) for k in ("done", "terminated")}
        now = TensorDict({"observation": t["obs"], "acted": t["acted"], "action": t["action"]}, batch_size=[size, n])
        after = TensorDict({"observation": t["next_obs"], "acted": t["next_acted"],
                            "reward": t["reward"].unsqueeze(-1), **ends}, batch_size=[size, n])
        return TensorDict({"agents": now, "state": t["state"],
                           "next": TensorDict({"agents": after, "state": t["next_state"]}, batch_size=[size])},
                          batch_size=[size])

    def _step(self, batch: TensorDict) -> dict[str, float]:
        c = self.config
        out = self.loss(batch)
        losses = {"critic": out["loss_qvalue"], "actor": out["loss_actor"], "alpha": out["loss_alpha"]}
        for optim in self.optims.values():
            optim.zero_grad()
        total = sum(losses[k] for k in self.optims)
        total.backward()  # each loss reaches only its own parameters (SACLoss detaches the rest)
        if c.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(self.actor_params, c.max_grad_norm)
            nn.utils.clip_grad_norm_(self.critic_params, c.max_grad_norm)
        for optim in self.optims.values():
            optim.step()
        self.target.step()
        return {"loss_critic": float(out["loss_qvalue"].detach()), "loss_actor": float(out["loss_actor"].detach()),
                "entropy": float(out["entropy"])}

    def update(self, episodes: Any) -> Mapping[str, float]:
        games: JointEpisodes = episodes
        if not isinstance(games, JointEpisodes):
            raise TypeError("masac learns from the joint view (JointEpisodes)")
        c = self.config
        steps = box_steps(self.team, self.boxes, games, c.reward)
        new = len(steps["done"])
        self.replay.add(steps)
        self.timesteps += new
        stats: list[dict[str, float]] = []
        if self.replay.size >= max(c.learning_starts, 1):
            self.owed += new * c.updates_per_step
            count = math.floor(self.owed)
            self.owed -= count
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(self.torch_rng)
                for _ in range(count):
                    stats.append(self._step(self._batch(self.replay.sample(c.batch_size, self.rng))))
                self.torch_rng = torch.get_rng_state()
            self.gradient_steps += count
        metrics = {"buffer": float(self.replay.size), "gradient_steps": float(self.gradient_steps),
                   "team_steps": float(self.timesteps), "alpha": float(self.loss.log_alpha.detach().exp())}
        if stats:
            metrics.update({k: float(np.mean([s[k] for s in stats])) for k in stats[0]})
        return metrics

    # -- state ------------------------------------------------------------------------------
    def _modules(self) -> dict[str, Any]:
        return {"loss": self.loss, **{f"optim_{k}": v for k, v in self.optims.items()}}

    def state(self) -> TrainerState:
        """``trainer.json`` (counters, the sampling generator, the buffer's fill),
        ``trainer.pt`` (the loss module: both critics, their targets and ``α``; the Adam
        optimisers), ``random.pt`` (the torch generator of the actors' samples) and
        ``buffer.npz`` (the replay buffer's rows)."""
        return {TRAINER_FILE: trainer_json("masac", timesteps=self.timesteps, gradient_steps=self.gradient_steps,
                                      owed=self.owed, rng=generator_json(self.rng),
                                      buffer=self.replay.fill()),
                "trainer.pt": modules_bytes(self._modules()),
                RANDOM: torch_bytes({"torch": self.torch_rng.clone()}),
                BUFFER: npz_bytes(self.replay.arrays())}

    def load_state(self, state: TrainerState) -> None:
        data = read_trainer_json(state, "masac", ("timesteps", "gradient_steps", "owed", "rng", "buffer"))
        load_modules(state, "trainer.pt", self._modules())
        random = read_torch(state, RANDOM)
        generator = random.get("torch") if isinstance(random, dict) else None
        if not isinstance(generator, torch.Tensor) or generator.dtype != torch.uint8:
            raise CheckpointError(f"trainer state {RANDOM}: not a torch generator state")
        self.replay.restore(data["buffer"], state)
        self.timesteps, self.gradient_steps = int(data["timesteps"]), int(data["gradient_steps"])
        self.owed = float(data["owed"])
        self.rng = generator_from_json(data["rng"], "rng")
        self.torch_rng = generator.clone()
