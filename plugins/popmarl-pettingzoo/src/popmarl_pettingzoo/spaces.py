"""Gymnasium spaces to popmarl spaces, and the per-agent codecs that batch observations
(float32 arrays, bool masks) and turn policy actions back into env actions.

Observations: a Dict with an ``observation`` entry gives that entry; other Dict/Tuple
(and Discrete, MultiBinary...) observations are flattened with
``gymnasium.spaces.flatten``; Box observations are kept, flattened to 1-D when
``flatten`` is set. Masks come from the observation's ``action_mask`` entry or from
``info["action_mask"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import gymnasium.spaces as gs
import numpy as np
from popmarl.api import Box, ConfigError, Discrete, Observations, Space

MaskSource = Literal["obs", "info"] | None
MASK_KEY = "action_mask"


def box_of(space: gs.Box, shape: tuple[int, ...] | None = None, dtype: str = "float32") -> Box:
    """A popmarl Box with ``space``'s per-entry bounds, reshaped to ``shape`` (same
    size) when given."""
    shape = space.shape if shape is None else shape
    return Box(shape=shape, low=space.low.reshape(shape), high=space.high.reshape(shape),  # type: ignore[arg-type]  # attrs converter=tuple
               dtype=dtype)


class ObservationCodec:
    """Reads one agent's raw observations (and infos) into an :class:`Observations` batch."""

    def __init__(self, agent: str, space: gs.Space[Any], *, mask_source: MaskSource, n_actions: int | None,
                 flatten: bool) -> None:
        self.agent = agent
        self.mask_source: MaskSource = mask_source if n_actions is not None else None
        self.n_actions = n_actions or 0
        self._entry: str | None = None  # read obs[entry] before decoding
        self._reader: Callable[[Any], Any] | None = None  # non-Box: flatten
        inner = space
        if isinstance(space, gs.Dict) and "observation" in space.spaces:
            self._entry, inner = "observation", space["observation"]
        elif isinstance(space, gs.Dict) and MASK_KEY in space.spaces:
            rest = gs.Dict({k: s for k, s in space.spaces.items() if k != MASK_KEY})
            inner, keys = rest, tuple(rest.spaces)
            self._reader = lambda o: gs.flatten(rest, {k: o[k] for k in keys})
        if isinstance(inner, gs.Box):
            self._raw_shape: tuple[int, ...] = inner.shape
            shape = (int(np.prod(inner.shape, dtype=int)),) if flatten else inner.shape
            self.space = box_of(inner, shape)
        else:
            flat = gs.flatten_space(inner)
            if not isinstance(flat, gs.Box):
                raise ConfigError(f"env.params.module: agent {agent!r}'s observation space {inner} cannot be flattened")
            if self._reader is None:
                self._reader = lambda o, s=inner: gs.flatten(s, o)
            self._raw_shape = flat.shape
            self.space = box_of(flat)
        self.shape: tuple[int, ...] = self.space.shape

    def batch(self, raws: Sequence[Any], infos: Sequence[Mapping[str, Any]] | None) -> Observations:
        """One row per raw observation; ``infos`` (aligned) are read for info masks."""
        k = len(raws)
        out = np.empty((k, *self._raw_shape), np.float32)
        entry, reader = self._entry, self._reader
        for row, raw in enumerate(raws):
            value = raw if entry is None else raw[entry]
            out[row] = value if reader is None else reader(value)
        mask = None
        if self.mask_source == "obs":
            mask = np.empty((k, self.n_actions), bool)
            for row, raw in enumerate(raws):
                mask[row] = raw[MASK_KEY]
        elif self.mask_source == "info":
            mask = np.ones((k, self.n_actions), bool)
            for row, info in enumerate(infos or ()):
                found = info.get(MASK_KEY) if info else None
                if found is not None:
                    mask[row] = found
        return Observations(obs=out.reshape(k, *self.shape), mask=mask, agent=self.agent)

    def one(self, observation: Any, action_mask: np.ndarray | None = None) -> Observations:
        """A one-row batch of one native observation: as the env gives it (a dict with
        its ``observation`` and ``action_mask`` entries), or its ``observation`` entry
        alone. The mask is ``action_mask`` where given, else the observation's own; with
        neither, every action is legal."""
        value = observation
        if self._entry is not None and isinstance(observation, Mapping):
            value = observation[self._entry]
        try:
            row = np.asarray(value if self._reader is None else self._reader(value), dtype=np.float32)
            row = row.reshape(1, *self.shape)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"agent {self.agent!r}: the observation does not fit its space (shape "
                             f"{self._raw_shape}): {exc}") from None
        if action_mask is None and isinstance(observation, Mapping) and MASK_KEY in observation:
            action_mask = observation[MASK_KEY]
        if not self.n_actions:
            return Observations(obs=row, agent=self.agent)
        mask = np.ones((1, self.n_actions), bool) if action_mask is None else np.asarray(action_mask, dtype=bool)
        if mask.size != self.n_actions:
            raise ValueError(f"agent {self.agent!r}: an action mask of {mask.size} entries for its "
                             f"{self.n_actions} actions")
        return Observations(obs=row, mask=mask.reshape(1, self.n_actions), agent=self.agent)


class ActionCodec:
    """Maps one agent's batch of policy actions to env actions (Python ints for
    Discrete, arrays of the space's dtype clipped to its bounds for Box)."""

    def __init__(self, agent: str, space: gs.Space[Any]) -> None:
        self.agent = agent
        if isinstance(space, gs.Discrete):
            self.space: Space = Discrete(n=int(space.n))
            self._start = int(space.start)
            self._box: gs.Box | None = None
        elif isinstance(space, gs.Box):
            self.space = box_of(space, dtype=str(space.dtype))
            self._box = space
        else:
            raise ConfigError(
                f"env.params.module: agent {agent!r} has action space {space}; "
                "popmarl supports Discrete and Box action spaces"
            )

    def decode(self, actions: np.ndarray) -> list[Any]:
        """Env actions, one per row of ``actions``."""
        box = self._box
        if box is None:
            ints = np.asarray(actions, dtype=np.int64).reshape(-1)
            return list((ints + self._start if self._start else ints).tolist())
        arr = np.asarray(actions, dtype=box.dtype).reshape(-1, *box.shape)
        return list(np.clip(arr, box.low, box.high).astype(box.dtype, copy=False))


def mask_source(space: gs.Space[Any], *, in_info: bool) -> MaskSource:
    """Where an agent's legal-action mask lives: its observation dict, its info (when the
    env puts ``action_mask`` in infos), or nowhere."""
    if isinstance(space, gs.Dict) and MASK_KEY in space.spaces:
        return "obs"
    return "info" if in_info else None
