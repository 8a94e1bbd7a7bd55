"""Algorithm ``mappo``: multi-agent PPO with a centralized critic (Yu et al. 2022).

Actors act on each seat's own observation (the exported policies: a masked softmax or a
diagonal Gaussian). The critic — trainer state, never exported — reads, for each of the
team's seats, the global state (the env's, else every seat's observation concatenated)
and its seat's one-hot id: one network for every seat (``critic: shared``) or one per
seat (``per_agent``). By default it is TorchRL's :class:`~torchrl.modules.MultiAgentMLP`;
with ``critic_model`` it is that model's encoder over the state (the seat's id as its
extra columns) with a linear value head (:class:`ModelCritic`).
The update is TorchRL's :class:`~torchrl.objectives.multiagent.MAPPOLoss` (clipped PPO,
entropy bonus, the critic's loss on values normalised by a
:class:`~torchrl.modules.PopArtValueNorm`: the critic outputs normalised values, which
GAE reads denormalised, as in the MAPPO code), on advantages from TorchRL's
:func:`~torchrl.objectives.value.functional.generalized_advantage_estimate`.

Each seat's advantages run over its own decisions, on the team's summed reward (the
MAPPO code's shared reward; ``reward: own``: the seat's own): rewards between two of its
decisions go to the first, its return ends at its last decision of a game (rows after
a seat leaves are masked out of both losses: death masking), and a game cut off (a time
limit) bootstraps from the critic's value of the state at the cut. One learner trains
the whole team: a ``shared`` population's seats, or every population of a ``per_player``
mapping (:attr:`~popmarl.api.Algorithm.trains_team`). Feed-forward networks only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential, TensorDictModule
from torch import nn
from torchrl.modules import MultiAgentMLP
from torchrl.modules.distributions import IndependentNormal, MaskedCategorical
from torchrl.objectives.value.functional import generalized_advantage_estimate

from popmarl.api import (TRAINER_FILE, Algorithm, ConfigError, Discrete, Env, JointEpisodes, Policy, PolicySpace,
                         Space, Trainer, TrainerContext, TrainerState, at_least_one, layer_widths, non_negative, optional,
                         positive, read_trainer_json, trainer_json, unit_interval)
from popmarl_torch.features import action_dim, feature_dim
from popmarl_torch.mlp import ACTIVATIONS
from popmarl_torch.models import (Model, ModelConfig, ModelSpec, as_spec, describe_networks, feedforward, load,
                                  model_field, network, resolve)
from popmarl_torch.nets import GaussianActor
from popmarl_torch.policies import CategoricalPolicy, GaussianPolicy
from popmarl_torch.seeding import SEED_MODULUS, seeded
from popmarl_torch.state import load_modules, modules_bytes
from popmarl_torch.threads import set_torch_threads

from popmarl_torchrl.centralized import MaskedMAPPOLoss, ModelCritic, check_state_model, state_space, value_norm
from popmarl_torchrl.team import Team, TeamNet, space_error

CRITIC_SHARING = ("shared", "per_agent")
VALUE_NORMS = ("popart", "running", "none")
CRITIC_LOSSES = ("l2", "smooth_l1", "l1")
REWARDS = ("own", "team")


@attrs.frozen(kw_only=True)
class MAPPOConfig:
    """MAPPO's settings. Defaults: the MAPPO paper's for MPE (clip 0.2,
    entropy 0.01, λ 0.95, value normalisation, gradient norm 10, 64×64 tanh networks, the
    actor's output layer initialised near zero, every seat trained on the team's summed
    reward) with the step sizes of ``examples/marl_simple_spread_ppo.yaml`` (lr 3e-3 for
    actor and critic, γ 0.95, 6 epochs of 4 minibatches) instead of the paper's (lr 7e-4,
    γ 0.99, 10 epochs of one minibatch: its 3,200-step rounds make many more updates than
    16 games of 25 steps do). On mpe2 spread (``benchmarks/marl.py``) these step sizes
    reach a much higher team return in a short budget than the paper's, and the team's
    summed reward does at least as well as each seat's own; ``ent_coef: 0`` and
    ``agent_id: true`` do no better.

    ``critic``: one critic network for every seat (``shared``) or one per seat
    (``per_agent``); either way it reads the seat's one-hot id. ``value_norm``: TorchRL's
    ``PopArtValueNorm`` (``popart``), ``RunningValueNorm`` (``running``) or none; the critic
    outputs normalised values, denormalised for GAE. ``minibatches``: per epoch, the round's
    rows split in this many. ``reward``: each seat's return is the team's summed reward
    (``team``, the MAPPO code's shared reward) or its own (``own``). ``activation``:
    ``tanh`` or ``relu`` (actor and critic). ``agent_id``: a population of several seats
    (``shared``) also gives its actor the seat's one-hot id. ``log_std_init`` and
    ``deterministic_eval`` (play the mean when not exploring) apply to Box actions.
    ``model``: the actors' network model (:mod:`popmarl_torch.models`; null: ``cnn`` for
    image observations, else ``mlp`` of ``hidden`` and ``activation``). ``critic_model``:
    the critic's, over the state space (the env's, else the seats' observations
    concatenated, a flat Box) with the seat's one-hot id as extra columns (``mlp``'s
    widths default to ``critic_hidden``; ``cnn`` for an env whose state is an image);
    null: TorchRL's ``MultiAgentMLP`` of ``critic_hidden`` layers."""

    lr: float = attrs.field(default=3e-3, validator=positive)
    critic_lr: float = attrs.field(default=3e-3, validator=positive)
    hidden: list[int] = attrs.field(factory=lambda: [64, 64], validator=layer_widths)
    model: ModelSpec = model_field()
    critic_hidden: list[int] = attrs.field(factory=lambda: [64, 64], validator=layer_widths)
    critic_model: ModelSpec = model_field()
    critic: str = attrs.field(default="shared", validator=attrs.validators.in_(CRITIC_SHARING))
    gamma: float = attrs.field(default=0.95, validator=unit_interval)
    gae_lambda: float = attrs.field(default=0.95, validator=unit_interval)
    clip: float = attrs.field(default=0.2, validator=positive)
    ent_coef: float = attrs.field(default=0.01, validator=non_negative)
    vf_coef: float = attrs.field(default=1.0, validator=non_negative)
    critic_loss: str = attrs.field(default="smooth_l1", validator=attrs.validators.in_(CRITIC_LOSSES))
    value_norm: str = attrs.field(default="popart", validator=attrs.validators.in_(VALUE_NORMS))
    advantage_normalization: bool = True
    epochs: int = attrs.field(default=6, validator=at_least_one)
    minibatches: int = attrs.field(default=4, validator=at_least_one)
    max_grad_norm: float | None = attrs.field(default=10.0, validator=optional(positive))
    activation: str = attrs.field(default="tanh", validator=attrs.validators.in_(tuple(ACTIVATIONS)))
    agent_id: bool = False
    reward: str = attrs.field(default="team", validator=attrs.validators.in_(REWARDS))
    log_std_init: float = -0.5
    deterministic_eval: bool = False
    torch_threads: int = attrs.field(default=1, validator=at_least_one)


class MAPPO(Algorithm):
    """MAPPO: PPO actors, a centralized critic, one learner over the team."""

    learns = True
    joint_view = True
    trains_team = True
    Config = MAPPOConfig
    config: MAPPOConfig

    def check(self, *, env: Env, space: PolicySpace) -> None:
        self.actor_model(space)
        if self.config.critic_model is not None:
            check_state_model(self.critic_model(), env, "mappo", "critic_model")
        why = space_error([env.action_space(a) for a in env.agents])
        if why is not None:
            raise ConfigError(f"algorithm: mappo trains the env's seats as one team, and {why}; "
                              "use ppo (independent learners) for this env")

    def actor_model(self, space: PolicySpace) -> Model:
        """The actor's model (:func:`popmarl_torch.models.resolve` of ``model``)."""
        c = self.config
        return feedforward(resolve(c.model, space.observation_space, hidden=c.hidden, activation=c.activation),
                           "mappo", "model")

    def critic_model(self) -> Model:
        """The critic's model: ``critic_model`` (an ``mlp``'s widths and activation default
        to ``critic_hidden`` and ``activation``), or with none the ``mlp`` that TorchRL's
        ``MultiAgentMLP`` is."""
        c = self.config
        spec = as_spec(c.critic_model) or ModelConfig(name="mlp")
        return feedforward(load(spec, hidden=c.critic_hidden, activation=c.activation), "mappo", "critic_model")

    def describe(self, space: PolicySpace) -> str:
        c = self.config
        return describe_networks({"actor": self.actor_model(space), "critic": self.critic_model()},
                                 chosen=c.model is None and c.critic_model is None)

    def make_policy(self, *, space: PolicySpace, seed: int) -> CategoricalPolicy | GaussianPolicy:
        c = self.config
        set_torch_threads(c.torch_threads)
        ids = len(space.agents) if c.agent_id and len(space.agents) > 1 else 0
        inputs, outputs = feature_dim(space.observation_space) + ids, action_dim(space.action_space)
        model = self.actor_model(space)
        with seeded(seed):
            activation = ACTIVATIONS[c.activation]
            net = network(model, space.observation_space, outputs, extra=ids, out_gain=0.01)
            if isinstance(space.action_space, Discrete):
                return CategoricalPolicy(space=space, actor=net, agent_id=ids > 0, uniform_mark=False, grouped=False)
            gaussian = GaussianActor(inputs, outputs, c.hidden, c.log_std_init, activation=activation, mean_key="mean",
                                     net=net)
        return GaussianPolicy(space=space, actor=gaussian, agent_id=ids > 0, deterministic_eval=c.deterministic_eval,
                              uniform_mark=False)

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int,
                     context: TrainerContext) -> MAPPOTrainer:
        team = Team(context)
        model = None if self.config.critic_model is None else self.critic_model()
        return MAPPOTrainer(self.config, team, seed=seed, critic_model=model, state=context.state_space)


class _GaussianTeam(nn.Module):
    """Every seat's Gaussian (loc, scale) from its population's actor."""

    def __init__(self, team: Team) -> None:
        super().__init__()
        actors = {p: policy.modules["actor"] for p, policy in team.policies.items()}
        gaussians = {p: a for p, a in actors.items() if isinstance(a, GaussianActor)}
        assert len(gaussians) == len(actors)
        self.means = TeamNet(team, {p: a.mean_net for p, a in gaussians.items()}, team.max_actions)
        self.log_stds = nn.ParameterDict({p: a.log_std for p, a in gaussians.items()})
        self.order = [team.population_of[s] for s in team.seats]

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.means(obs)
        scale = torch.stack([self.log_stds[p].exp() for p in self.order])
        return loc, scale.expand_as(loc)


class MAPPOTrainer(Trainer):
    """MAPPO's update over the team's joint view (see the module docstring)."""

    def __init__(self, config: MAPPOConfig, team: Team, *, seed: int, critic_model: Model | None = None,
                 state: Space | None = None) -> None:
        self.config = c = config
        self.team = team
        n = team.n
        with seeded(seed + 1):
            self.critic: nn.Module
            if critic_model is None:
                self.critic = MultiAgentMLP(n_agent_inputs=team.state_dim + n, n_agent_outputs=1, n_agents=n,
                                            centralized=False, share_params=c.critic == "shared",
                                            depth=len(c.critic_hidden), num_cells=list(c.critic_hidden),
                                            activation_class=ACTIVATIONS[c.activation])
            else:
                self.critic = ModelCritic(critic_model, state_space(state, team), n, shared=c.critic == "shared")
        self.norm = value_norm(c.value_norm)
        agents = "agents"
        if team.discrete:
            self.actor_net: nn.Module = TeamNet(team, {p: pol.modules["actor"] for p, pol in team.policies.items()},
                                                team.max_actions)
            module = TensorDictModule(self.actor_net, in_keys=[(agents, "observation")], out_keys=[(agents, "logits")])
            dist = ProbabilisticTensorDictModule(in_keys={"logits": (agents, "logits"), "mask": (agents, "mask")},
                                                 out_keys=[(agents, "action")], distribution_class=MaskedCategorical)
        else:
            self.actor_net = _GaussianTeam(team)
            module = TensorDictModule(self.actor_net, in_keys=[(agents, "observation")],
                                      out_keys=[(agents, "loc"), (agents, "scale")])
            dist = ProbabilisticTensorDictModule(in_keys={"loc": (agents, "loc"), "scale": (agents, "scale")},
                                                 out_keys=[(agents, "action")], distribution_class=IndependentNormal,
                                                 distribution_kwargs={"tanh_loc": False})
        self.actor = ProbabilisticTensorDictSequential(module, dist)
        critic = TensorDictModule(self.critic, in_keys=[(agents, "critic_input")], out_keys=[(agents, "state_value")])
        self.loss = MaskedMAPPOLoss(self.actor, critic, value_norm=self.norm, clip_epsilon=c.clip,
                                    entropy_coeff=c.ent_coef, critic_coeff=c.vf_coef, loss_critic_type=c.critic_loss,
                                    normalize_advantage=False)
        self.loss.set_keys(action=(agents, "action"), sample_log_prob=(agents, "log_prob"),
                           value=(agents, "state_value"), advantage=(agents, "advantage"),
                           value_target=(agents, "value_target"))
        self.loss.loss_mask_key = (agents, "valid")
        actor_params = list(dict.fromkeys(p for pol in team.policies.values() for p in pol.modules["actor"].parameters()))
        self.optim = torch.optim.Adam([{"params": actor_params, "lr": c.lr},
                                       {"params": list(self.critic.parameters()), "lr": c.critic_lr}])
        self.generator = torch.Generator().manual_seed(seed % SEED_MODULUS)
        self.updates = 0
        self.gradient_steps = 0

    # -- the round's tensors ----------------------------------------------------------------
    def _critic_input(self, state: np.ndarray) -> torch.Tensor:
        """``[R, n, state_dim + n]``: the state with each seat's one-hot id."""
        n = self.team.n
        x = torch.as_tensor(state).unsqueeze(-2).expand(len(state), n, state.shape[-1])
        return torch.cat([x, torch.eye(n).expand(len(state), n, n)], dim=-1)

    def _values(self, critic_input: torch.Tensor) -> torch.Tensor:
        """The critic's values on the real scale (it outputs normalised ones where a value
        normaliser is on)."""
        values = self.critic(critic_input)
        return values if self.norm is None else self.norm.denormalize(values)

    def _advantages(self, games: JointEpisodes, valid: np.ndarray, values: torch.Tensor,
                    final_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[T, n, 1]`` GAE advantages and value targets over each seat's decisions
        (zero where the row is not valid)."""
        c, team = self.config, self.team
        starts, game = games.starts, games.game_of_row
        shared = team.team_rewards(games) if c.reward == "team" else None
        order, rewards, next_v, done, terminated = [], [], [], [], []
        for j, (seat, k) in enumerate(zip(team.seats, team.columns(games))):
            rows = np.flatnonzero(valid[:, j])
            if not len(rows):
                continue
            seat_rows = games.rows[seat]
            own = seat_rows.rewards if shared is None else shared
            total = np.concatenate([[0.0], np.cumsum(own, dtype=np.float64)])
            g = game[rows]
            last = np.r_[g[1:] != g[:-1], True]
            ends = np.where(last, starts[g + 1], np.r_[rows[1:], 0])
            cut = np.array([games.truncated[x] and seat_rows.final_obs[x] is not None for x in g])
            following = np.r_[rows[1:], 0]
            nv = torch.where(torch.as_tensor(last), final_values[torch.as_tensor(g), j, 0],
                             values[torch.as_tensor(following), j, 0])
            order.append((rows, j))
            rewards.append(total[ends] - total[rows])
            next_v.append(nv)
            done.append(last)
            terminated.append(last & ~cut)
        advantage = torch.zeros(len(valid), team.n, 1)
        target = torch.zeros(len(valid), team.n, 1)
        if not order:
            return advantage, target
        value = torch.cat([values[torch.as_tensor(rows), j, 0] for rows, j in order]).unsqueeze(-1)
        adv, tgt = generalized_advantage_estimate(
            c.gamma, c.gae_lambda, value, torch.cat(next_v).unsqueeze(-1),
            torch.as_tensor(np.concatenate(rewards), dtype=torch.float32).unsqueeze(-1),
            torch.as_tensor(np.concatenate(done)).unsqueeze(-1), torch.as_tensor(np.concatenate(terminated)).unsqueeze(-1),
            time_dim=-2)
        at = 0
        for rows, j in order:
            advantage[torch.as_tensor(rows), j] = adv[at:at + len(rows)]
            target[torch.as_tensor(rows), j] = tgt[at:at + len(rows)]
            at += len(rows)
        return advantage, target

    def _batch(self, games: JointEpisodes) -> tuple[TensorDict, torch.Tensor]:
        team = self.team
        valid = team.valid(games)
        masks = torch.as_tensor(team.masks(games))
        masks[~torch.as_tensor(valid)] = True  # any action is "legal" where the row does not count
        if team.discrete:
            actions = torch.as_tensor(team.actions(games), dtype=torch.int64)
        else:
            actions = torch.as_tensor(team.actions(games), dtype=torch.float32).reshape(games.steps, team.n, -1)
        critic_input = self._critic_input(team.state(games))
        with torch.no_grad():
            values = self._values(critic_input)
            final_values = self._values(self._critic_input(team.state(games, final=True)))
        advantage, target = self._advantages(games, valid, values, final_values)
        valid_t = torch.as_tensor(valid)
        if self.config.advantage_normalization and valid.any():
            picked = advantage[valid_t]
            std = picked.std() if len(picked) > 1 else torch.tensor(1.0)
            advantage = torch.where(valid_t.unsqueeze(-1), (advantage - picked.mean()) / (std + 1e-8), 0.0)
        agents = TensorDict({"observation": torch.as_tensor(team.obs(games)), "action": actions, "mask": masks,
                             "critic_input": critic_input, "advantage": advantage, "value_target": target,
                             "valid": valid_t}, batch_size=[games.steps, team.n])
        td = TensorDict({"agents": agents}, batch_size=[games.steps])
        with torch.no_grad():
            dist = self.actor.get_dist(td)
            td.set(("agents", "log_prob"), dist.log_prob(actions))
        if self.norm is not None and valid.any():
            self.norm.update(target[valid_t])
        return td, valid_t

    # -- the update -----------------------------------------------------------------------
    def update(self, episodes: Any) -> Mapping[str, float]:
        games: JointEpisodes = episodes
        if not isinstance(games, JointEpisodes):
            raise TypeError("mappo learns from the joint view (JointEpisodes)")
        td, valid = self._batch(games)
        if not bool(valid.any()):
            return {}
        c = self.config
        rows = games.steps
        size = max(1, -(-rows // c.minibatches))
        sums = {"loss_objective": 0.0, "loss_critic": 0.0, "loss_entropy": 0.0, "entropy": 0.0, "clip_fraction": 0.0}
        steps = 0
        params = [p for group in self.optim.param_groups for p in group["params"]]
        for _ in range(c.epochs):
            perm = torch.randperm(rows, generator=self.generator)
            for at in range(0, rows, size):
                part = td[perm[at:at + size]]
                if not bool(part["agents", "valid"].any()):
                    continue
                out = self.loss(part)
                loss = out["loss_objective"] + out["loss_critic"] + out.get("loss_entropy", torch.zeros(()))
                self.optim.zero_grad()
                loss.backward()
                if c.max_grad_norm is not None:
                    nn.utils.clip_grad_norm_(params, c.max_grad_norm)
                self.optim.step()
                steps += 1
                for key in sums:
                    if key in out.keys():
                        sums[key] += float(out[key].detach())
        self.updates += 1
        self.gradient_steps += steps
        metrics = {key: value / max(steps, 1) for key, value in sums.items()}
        metrics.update({"gradient_steps": float(self.gradient_steps), "valid_rows": float(valid.sum())})
        return metrics

    # -- state ------------------------------------------------------------------------------
    def _modules(self) -> dict[str, Any]:
        modules: dict[str, Any] = {"critic": self.critic, "optim": self.optim}
        if self.norm is not None:
            modules["value_norm"] = self.norm
        return modules

    def state(self) -> TrainerState:
        """``trainer.json`` (counters, the minibatch generator's state), ``trainer.pt``
        (the critic, the value normaliser and Adam's state)."""
        return {TRAINER_FILE: trainer_json("mappo", updates=self.updates, gradient_steps=self.gradient_steps,
                                      generator=self.generator.get_state().tolist()),
                "trainer.pt": modules_bytes(self._modules())}

    def load_state(self, state: TrainerState) -> None:
        data = read_trainer_json(state, "mappo", ("updates", "gradient_steps", "generator"))
        load_modules(state, "trainer.pt", self._modules())
        self.updates, self.gradient_steps = int(data["updates"]), int(data["gradient_steps"])
        self.generator.set_state(torch.tensor(data["generator"], dtype=torch.uint8))
