"""Network models: what turns a batch of observations into features, by name.

Every network of a torch algorithm (a Q-network, an actor, a critic) is an **encoder**
built by a :class:`Model`, followed by one ``Linear`` output layer (the head) the
algorithm adds: ``nn.Sequential(encoder, head)``. Models are components of kind
``models``: registered under the ``popmarl.models`` entry-point group (``popmarl
plugins`` lists them) and named in an algorithm's config::

    model: cnn                                  # a name: the model's defaults
    model: {name: cnn, params: {channels: [16, 32]}}
    model: {name: module, params: {path: "mypkg.nets:MyNet", kwargs: {width: 64}}}

The contract of a model (:meth:`Model.build`):

- it receives the observation space (a :class:`~popmarl.api.Space`) and ``extra``, a
  number of columns appended after the observation's own (a seat's one-hot id, where a
  network reads one);
- the module it returns receives a float32 batch ``[..., feature_dim(space) + extra]``
  (leading dimensions: the batch, and for a team's networks its seats): each
  observation flattened in C order (a Discrete one one-hot), as
  :func:`~popmarl_torch.features.features` makes it, its ``extra`` columns last; it
  returns features ``[..., F]``, and declares ``F`` as its ``features_dim`` attribute
  (and its input width as ``input_width``). A model that needs the observation's shape
  back (an image) reshapes the first ``feature_dim(space)`` columns to ``space.shape``;
  a uint8 observation arrives as its integer values (0..255) in float32;
- it is not recurrent: :attr:`Model.recurrent` is False and :meth:`Model.initial_state`
  None. A recurrent model (a later ``gru`` or ``lstm``) sets ``recurrent`` True, returns
  its state before an episode's first step from ``initial_state(batch)``, and its module
  is called as ``module(x, state) -> (features, state)``; algorithms that train no
  recurrent network refuse such a model when the config is checked
  (:func:`feedforward`), so adding one changes nothing here.

Three models come with popmarl-torch: ``mlp`` (:class:`MLP`: ``Linear`` layers, the
algorithm's ``hidden`` widths by default), ``cnn`` (:class:`CNN`: convolutions over an
image, then ``Linear`` layers) and ``module`` (:class:`Module`: a user's own
``torch.nn.Module`` by import path). With no ``model`` configured (:func:`resolve`), an
image observation (a Box of 3 dimensions) gets ``cnn`` and any other ``mlp`` with the
algorithm's ``hidden``: the networks of every run made before models existed, weight
for weight and name for name (the ``mlp`` encoder's layers are the network's own,
``0.weight``, ``0.bias``, ``2.weight``..., the head the last of them).
"""

from __future__ import annotations

from abc import abstractmethod

import importlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import torch
from torch import nn

from popmarl.api import Box, Component, ConfigError, Registries, Space, did_you_mean, layer_widths, optional, positive
from popmarl_torch.features import feature_dim
from popmarl_torch.mlp import ACTIVATIONS


@attrs.frozen(kw_only=True)
class ModelConfig:
    """A model as an algorithm's config names it: its registered ``name`` and ``params``."""

    name: str
    params: dict[str, Any] = attrs.field(factory=dict)


#: What an algorithm config's model field holds: a :class:`ModelConfig`, a bare name,
#: or None (the default for the observation: :func:`resolve`).
ModelSpec = ModelConfig | str | None


class Model(Component):
    """Builds the encoder of a network (see the module's contract). Subclasses declare an
    attrs ``Config`` and implement :meth:`build`; register them under ``popmarl.models``."""

    #: Whether the encoder keeps a state between steps (a GRU, an LSTM).
    recurrent: ClassVar[bool] = False

    @abstractmethod
    def build(self, space: Space, *, extra: int = 0) -> nn.Module:
        """An encoder of observations of ``space`` (with ``extra`` appended columns):
        ``[B, feature_dim(space) + extra]`` float32 in, ``[B, features_dim]`` out."""

    def initial_state(self, batch: int) -> Any:
        """A recurrent encoder's state before an episode's first step, for ``batch``
        episodes; None for a feedforward one."""
        return None

    def describe(self) -> str:
        """The model as the run's log names it: its name and settings."""
        return type(self).__name__.lower()


def is_image(space: Space) -> bool:
    """Whether observations of ``space`` are images: a Box of three dimensions (channels
    first or last)."""
    return isinstance(space, Box) and len(space.shape) == 3


def as_spec(value: ModelSpec) -> ModelConfig | None:
    """``value`` as a :class:`ModelConfig` (a bare name: the model's defaults)."""
    return ModelConfig(name=value) if isinstance(value, str) else value


def to_spec(value: Any) -> ModelSpec:
    """A model field's value as given in Python: a mapping ``{name, params}`` becomes a
    :class:`ModelConfig`; anything else is kept (and validated by :func:`model_spec`)."""
    if isinstance(value, Mapping) and set(value) <= {"name", "params"} and isinstance(value.get("name"), str):
        return ModelConfig(name=value["name"], params=dict(value.get("params") or {}))
    return value  # type: ignore[no-any-return]


def model_field() -> Any:
    """An algorithm config's model field: null by default (the observation's default
    model), a name or ``{name, params}`` otherwise, validated when the config is made."""
    return attrs.field(default=None, converter=to_spec, validator=model_spec)


def model_spec(_instance: Any, attribute: attrs.Attribute[Any], value: ModelSpec) -> None:
    """An attrs validator for a model field: a known model and params it accepts (so a
    config with a wrong one fails when it is validated, naming the key)."""
    spec = as_spec(value)
    if spec is None:
        return
    if not isinstance(spec, ModelConfig):
        raise ValueError(f"{attribute.name}: must be a model's name or {{name, params}}, got {value!r}")
    try:
        load(spec)
    except (ConfigError, TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None


def load(spec: ModelConfig, *, hidden: Sequence[int] | None = None, activation: str | None = None) -> Model:
    """The model ``spec`` names, configured with its params; ``hidden`` and ``activation``
    are an :class:`MLP`'s where its params leave them unset (the algorithm's)."""
    registry = Registries.current().get("models")
    if spec.name not in registry:
        raise ConfigError(registry.unknown_message(spec.name))
    cls = registry.load(spec.name)
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise ConfigError(f"model {spec.name!r}: {cls!r} is no popmarl_torch.models.Model")
    params = dict(spec.params)
    config = getattr(cls, "Config", None)
    if isinstance(config, type) and attrs.has(config):
        allowed = [f.name for f in attrs.fields(config) if f.init]
        for key in params:
            if key not in allowed:
                raise ConfigError(f"model {spec.name}: params.{key}: unknown key{did_you_mean(str(key), allowed)}; "
                                  f"allowed: {', '.join(allowed) or 'none'}")
    try:
        model = cls(**params)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"model {spec.name}: {exc}") from None
    if isinstance(model, MLP):
        c = model.config
        model = MLP(hidden=c.hidden if c.hidden is not None else hidden,
                    activation=c.activation if c.activation is not None else activation)
    return model


def resolve(value: ModelSpec, space: Space, *, hidden: Sequence[int], activation: str = "relu") -> Model:
    """The model of a network whose config field holds ``value``: the one named, or with
    none, ``cnn`` for an image observation (:func:`is_image`) and else ``mlp`` of the
    algorithm's ``hidden`` widths and ``activation``."""
    spec = as_spec(value)
    if spec is None:
        spec = ModelConfig(name="cnn" if is_image(space) else "mlp")
    return load(spec, hidden=hidden, activation=activation)


def feedforward(model: Model, algorithm: str, key: str) -> Model:
    """``model``, refused (a ConfigError naming ``key``) when it is recurrent: the
    algorithm's networks keep no state between steps."""
    if model.recurrent:
        raise ConfigError(f"algorithm {algorithm}: {key}: model {model.describe()} is recurrent, and "
                          f"{algorithm} trains feedforward networks only; choose another model")
    return model


def network(model: Model, space: Space, outputs: int, *, extra: int = 0, out_gain: float | None = None) -> nn.Sequential:
    """A network of ``model``'s encoder and a ``Linear`` head of ``outputs``; ``out_gain``
    rescales the head's initial weights and zeroes its bias (0.01 starts a policy near
    uniform). An :class:`MLP`'s layers are the network's own (the layout and parameter
    names of :func:`~popmarl_torch.mlp.mlp`; the weights too, under one seed), any other
    encoder is its first module."""
    encoder = model.build(space, extra=extra)
    head = nn.Linear(features_of(encoder), outputs)
    if out_gain is not None:
        with torch.no_grad():
            head.weight.mul_(out_gain)
            head.bias.zero_()
    layers = list(encoder) if isinstance(model, MLP) and isinstance(encoder, nn.Sequential) else [encoder]
    net = nn.Sequential(*layers, head)
    setattr(net, "input_width", getattr(encoder, "input_width", feature_dim(space) + extra))  # noqa: B010
    return net


def features_of(encoder: nn.Module) -> int:
    """The width of an encoder's output (its ``features_dim``)."""
    width = getattr(encoder, "features_dim", None)
    if not isinstance(width, int) or width < 1:
        raise ConfigError(f"model encoder {type(encoder).__name__}: needs a features_dim attribute, the width of "
                          f"its output (a positive integer), got {width!r}")
    return width


@attrs.frozen(kw_only=True)
class MLPConfig:
    """``hidden``: the widths of the ``Linear`` layers (null: the algorithm's ``hidden``);
    ``activation``: ``relu`` or ``tanh`` between them (null: the algorithm's)."""

    hidden: list[int] | None = attrs.field(default=None, validator=optional(layer_widths))
    activation: str | None = attrs.field(default=None, validator=optional(attrs.validators.in_(tuple(ACTIVATIONS))))


class MLP(Model):
    """``mlp``: ``Linear`` layers with an activation after each; features are the last
    layer's (the observation itself with no layers)."""

    Config = MLPConfig
    config: MLPConfig

    def build(self, space: Space, *, extra: int = 0) -> nn.Sequential:
        c = self.config
        layers: list[nn.Module] = []
        width = inputs = feature_dim(space) + extra
        for size in c.hidden if c.hidden is not None else [128, 128]:
            layers += [nn.Linear(width, size), ACTIVATIONS[c.activation or "relu"]()]
            width = size
        encoder = nn.Sequential(*layers)
        setattr(encoder, "features_dim", width)  # noqa: B010
        setattr(encoder, "input_width", inputs)  # noqa: B010
        return encoder

    def describe(self) -> str:
        c = self.config
        return f"mlp {list(c.hidden or [])}" + ("" if (c.activation or "relu") == "relu" else f" {c.activation}")


@attrs.frozen(kw_only=True)
class CNNConfig:
    """The convolutions: ``channels`` (out channels of each), ``kernels`` and ``strides``
    (one each, or one for all), ``padding`` (of every convolution); then ``hidden``
    ``Linear`` layers. ``channels_last``: whether an image's channels are its last axis
    (height, width, channels) rather than its first; null guesses from the shape (last
    when the last axis has 1, 3 or 4 entries and the first not). ``scale`` multiplies
    every pixel (null: 1/255 for a uint8 Box, so pixels lie in [0, 1], else 1)."""

    channels: list[int] = attrs.field(factory=lambda: [16, 32], validator=layer_widths)
    kernels: list[int] = attrs.field(factory=lambda: [3], validator=layer_widths)
    strides: list[int] = attrs.field(factory=lambda: [1], validator=layer_widths)
    padding: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    hidden: list[int] = attrs.field(factory=lambda: [128], validator=layer_widths)
    channels_last: bool | None = None
    scale: float | None = attrs.field(default=None, validator=optional(positive))

    def __attrs_post_init__(self) -> None:
        for name in ("kernels", "strides"):
            if len(getattr(self, name)) not in (1, len(self.channels)):
                raise ValueError(f"{name}: give one, or one per convolution ({len(self.channels)})")


def channels_last(shape: tuple[int, ...]) -> bool:
    """Whether an image of ``shape`` most likely has its channels last: its last axis has
    1, 3 or 4 entries and its first not."""
    return shape[-1] in (1, 3, 4) and shape[0] not in (1, 3, 4)


class ConvEncoder(nn.Module):
    """Features of flat image observations: the first ``pixels`` columns reshaped to the
    image (``image_shape``, the observation's, permuted to channels first where ``last``,
    channels last), scaled, through
    ``convs``; their output flattened, joined by the remaining (extra) columns, through
    the ``head`` layers."""

    def __init__(self, *, image_shape: tuple[int, int, int], last: bool, scale: float, convs: nn.Sequential,
                 head: nn.Sequential, features_dim: int, input_width: int) -> None:
        super().__init__()
        self.image_shape, self.last, self.scale = image_shape, last, scale
        self.pixels = math.prod(image_shape)
        self.convs, self.head = convs, head
        self.features_dim, self.input_width = features_dim, input_width

    def image(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, C, H, W]`` images of the batch's first ``pixels`` columns."""
        image = x[:, :self.pixels].reshape(len(x), *self.image_shape)
        image = image.permute(0, 3, 1, 2) if self.last else image  # [B, H, W, C] -> [B, C, H, W]
        return image * self.scale if self.scale != 1.0 else image

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]  # the batch (and a team's seats)
        x = x.reshape(-1, x.shape[-1])
        flat = self.convs(self.image(x)).flatten(1)
        out = self.head(torch.cat([flat, x[:, self.pixels:]], dim=1) if x.shape[1] > self.pixels else flat)
        return out.reshape(*lead, out.shape[-1])


class CNN(Model):
    """``cnn``: convolutions (ReLU after each) over an image observation, a Box of three
    dimensions, channels first or last, uint8 or float; then ``Linear`` layers (ReLU
    after each) over the flattened result and any extra columns."""

    Config = CNNConfig
    config: CNNConfig

    def build(self, space: Space, *, extra: int = 0) -> ConvEncoder:
        c = self.config
        if not is_image(space):
            raise ConfigError(f"model cnn: needs image observations (a Box of 3 dimensions), got {space}")
        assert isinstance(space, Box)
        shape = space.shape
        last = channels_last(shape) if c.channels_last is None else c.channels_last
        image_shape = (shape[2], shape[0], shape[1]) if last else (shape[0], shape[1], shape[2])  # C, H, W
        n = len(c.channels)
        kernels, strides = (c.kernels * n)[:n] if len(c.kernels) == 1 else c.kernels, \
            (c.strides * n)[:n] if len(c.strides) == 1 else c.strides
        layers: list[nn.Module] = []
        width = image_shape[0]
        for out, kernel, stride in zip(c.channels, kernels, strides, strict=True):
            layers += [nn.Conv2d(width, out, kernel, stride=stride, padding=c.padding), nn.ReLU()]
            width = out
        convs = nn.Sequential(*layers)
        try:
            with torch.no_grad():
                flat = int(np.prod(convs(torch.zeros(1, *image_shape)).shape[1:]))
        except RuntimeError as exc:
            raise ConfigError(f"model cnn: the convolutions do not fit an image of {image_shape} (channels, height, "
                              f"width): {exc}") from None
        head: list[nn.Module] = []
        width = flat + extra
        for size in c.hidden:
            head += [nn.Linear(width, size), nn.ReLU()]
            width = size
        scale = c.scale if c.scale is not None else (1 / 255 if space.dtype == "uint8" else 1.0)
        return ConvEncoder(image_shape=(shape[0], shape[1], shape[2]), last=last, scale=scale, convs=convs, head=nn.Sequential(*head),
                           features_dim=width, input_width=feature_dim(space) + extra)

    def describe(self) -> str:
        c = self.config
        return f"cnn channels {list(c.channels)} kernels {list(c.kernels)} strides {list(c.strides)} " \
               f"hidden {list(c.hidden)}"


def _check_path(path: str) -> None:
    if not re.fullmatch(r"[\w.]+:[\w.]+", path):
        raise ValueError(f"model module: path must be 'package.module:Name', got {path!r}")


@attrs.frozen(kw_only=True)
class ModuleConfig:
    """``path``: ``package.module:Name`` of a ``torch.nn.Module`` class (or a function
    returning a module, or a :class:`Model` subclass); ``kwargs``: its keyword arguments."""

    path: str = attrs.field(default="", validator=lambda _i, _a, v: _check_path(v))
    kwargs: dict[str, Any] = attrs.field(factory=dict)


def import_path(path: str) -> Any:
    """The object ``package.module:Name`` names (a ConfigError saying why not)."""
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"model module: path {path!r}: {type(exc).__name__}: {exc}") from None
    return obj


class Module(Model):
    """``module``: a user's own network. A class (or function) at ``path`` is called as
    ``cls(observation_space=space, inputs=width, **kwargs)`` and returns a
    ``torch.nn.Module`` mapping ``[B, inputs]`` float32 features to ``[B,
    features_dim]``, with a ``features_dim`` attribute; a :class:`Model` subclass at
    ``path`` is built as a registered model would be, ``kwargs`` its params."""

    Config = ModuleConfig
    config: ModuleConfig

    def target(self) -> Any:
        """What ``path`` names."""
        return import_path(self.config.path)

    def build(self, space: Space, *, extra: int = 0) -> nn.Module:
        c = self.config
        target = self.target()
        if isinstance(target, type) and issubclass(target, Model):
            return target(**c.kwargs).build(space, extra=extra)
        inputs = feature_dim(space) + extra
        encoder = target(observation_space=space, inputs=inputs, **c.kwargs)
        if not isinstance(encoder, nn.Module):
            raise ConfigError(f"model module: {c.path} returned {type(encoder).__name__}, not a torch.nn.Module")
        features_of(encoder)
        if not isinstance(getattr(encoder, "input_width", None), int):
            setattr(encoder, "input_width", inputs)  # noqa: B010
        return encoder

    def describe(self) -> str:
        return f"module {self.config.path}"


def describe_networks(models: Mapping[str, Model], *, chosen: bool) -> str:
    """The run's log text for networks and their models (``q-network mlp [128, 128]``);
    ``chosen``: no model was configured, and the observation picked these."""
    text = ", ".join(f"{network} {model.describe()}" for network, model in models.items())
    return f"{text}" + (" (the default for these observations)" if chosen else "")


__all__ = ["CNN", "MLP", "CNNConfig", "ConvEncoder", "MLPConfig", "Model", "ModelConfig", "ModelSpec", "Module",
           "ModuleConfig", "as_spec", "channels_last", "describe_networks", "feedforward", "features_of",
           "import_path", "is_image", "load", "model_field", "model_spec", "network", "resolve", "to_spec"]
