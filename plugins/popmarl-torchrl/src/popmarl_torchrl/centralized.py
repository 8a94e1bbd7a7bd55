"""Networks that read a team's centralized state (``mappo``'s critic of a model, the
state input of ``qmix``'s mixer) and ``mappo``'s critic loss on normalised values.

The state is the env's global state (:attr:`popmarl.api.Env.state_space`) or, where the
env has none, every seat's observation concatenated (:meth:`Team.state`), as a flat
Box (:func:`state_space`); it arrives flattened, ``[..., state_dim]``, so a network
model (:mod:`popmarl_torch.models`) reads it as it reads an observation of that space:
``cnn`` over an image state (a Box of three dimensions), ``mlp`` or a user's
``module`` over any.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torchrl.modules import PopArtValueNorm, QMixer, RunningValueNorm, ValueNorm
from torchrl.objectives.multiagent import MAPPOLoss

from popmarl.api import Box, ConfigError, Env, Space
from popmarl_torch.features import feature_dim
from popmarl_torch.models import Model, features_of, network

from popmarl_torchrl.team import Team


def state_space(space: Space | None, team: Team) -> Space:
    """What a team's centralized networks read: the env's state space, else the seats'
    observations concatenated, a flat Box (:meth:`Team.state`)."""
    return space if space is not None else Box(shape=(team.state_dim,))


def check_state_model(model: Model, env: Env, algorithm: str, key: str) -> None:
    """Builds ``model`` over ``env``'s state (the env's state space, else its seats'
    observations concatenated) once, so a model that cannot read it (``cnn`` over a flat
    state) is a ConfigError naming ``key`` when the run is checked."""
    space = env.state_space or Box(shape=(sum(feature_dim(env.observation_space(a)) for a in env.agents),))
    try:
        model.build(space)
    except ConfigError as exc:
        raise ConfigError(f"algorithm {algorithm}: {key}: {exc} (it reads the state, {space})") from None


class ModelCritic(nn.Module):
    """A centralized critic of a network model: ``[..., n, state_dim + n]`` (the state
    and each seat's one-hot id) to ``[..., n, 1]`` values, by one network (the model's
    encoder, the seat's id its extra columns, and a linear head) for every seat
    (``shared``) or one per seat."""

    def __init__(self, model: Model, space: Space, n: int, *, shared: bool) -> None:
        super().__init__()
        self.shared = shared
        self.nets = nn.ModuleList([network(model, space, 1, extra=n) for _ in range(1 if shared else n)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.shared:
            return self.nets[0](x)  # type: ignore[no-any-return]
        return torch.stack([net(x[..., j, :]) for j, net in enumerate(self.nets)], dim=-2)


class NormalisedQMixer(QMixer):
    """TorchRL's :class:`~torchrl.modules.QMixer` reading each state row layer-normalised
    (no parameters of its own, so its weights and checkpoints are QMixer's); see
    :class:`~popmarl_torchrl.value_mixing.QMIXConfig` (``state_norm``) for why."""

    def mix(self, chosen_action_value: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        flat = state.reshape(-1, self.state_dim)
        return super().mix(chosen_action_value, nn.functional.layer_norm(flat, (self.state_dim,)))


class EncodedQMixer(QMixer):
    """TorchRL's :class:`~torchrl.modules.QMixer` whose hypernetworks read a network
    model's features of the state (``encoder``, trained with the mixer) in place of the
    raw state, layer-normalised where ``state_norm`` is on: ``[B, state_dim]`` states in,
    hypernetworks of ``encoder.features_dim`` inputs."""

    def __init__(self, *, encoder: nn.Module, state_dim: int, mixing_embed_dim: int, n_agents: int,
                 state_norm: bool) -> None:
        super().__init__(state_shape=(features_of(encoder),), mixing_embed_dim=mixing_embed_dim, n_agents=n_agents,
                         device="cpu")
        self.encoder = encoder
        self.state_width = state_dim
        self.state_shape = (state_dim,)  # what Mixer.forward checks the state against
        self.state_norm = state_norm

    def mix(self, chosen_action_value: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        features = self.encoder(state.reshape(-1, self.state_width))
        if self.state_norm:
            features = nn.functional.layer_norm(features, (self.state_dim,))
        return super().mix(chosen_action_value, features)


# -- mappo's critic loss ----------------------------------------------------------------------
class MaskedMAPPOLoss(MAPPOLoss):
    """MAPPOLoss whose critic outputs *normalised* values (as in the MAPPO code: the
    trainer denormalises them for GAE), so its loss compares them with the normalised
    target directly; the value normaliser is updated by the trainer, once per round and
    on the valid rows only (MAPPOLoss updates it at every minibatch, on every entry: the
    masked-out rows' zero targets would skew it). MAPPOLoss's own hook normalises a
    real-scale prediction instead, which divides the critic's gradient by the returns'
    standard deviation: the critic then lags far behind the returns."""

    def _critic_loss_inputs(self, target_return: torch.Tensor, state_value: torch.Tensor,
                            old_state_value: torch.Tensor | None) -> Any:
        norm = self.value_norm
        if norm is None:
            return target_return, state_value, old_state_value
        return norm.normalize(target_return.detach()), state_value, old_state_value


def value_norm(kind: str) -> ValueNorm | None:
    """The value normaliser ``value_norm`` names (None: ``none``)."""
    if kind == "popart":
        return PopArtValueNorm(shape=1)
    if kind == "running":
        return RunningValueNorm(shape=1)
    return None


__all__ = ["EncodedQMixer", "MaskedMAPPOLoss", "ModelCritic", "NormalisedQMixer", "check_state_model", "state_space",
           "value_norm"]
