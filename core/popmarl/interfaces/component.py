"""The base of every pluggable component: a class with an attrs ``Config``."""

from __future__ import annotations

from typing import Any, ClassVar

from abc import ABC

import attrs


@attrs.frozen(kw_only=True)
class EmptyConfig:
    """Config of a component that takes no parameters."""


class Component(ABC):
    """A registered component. Subclasses declare ``Config`` (an attrs class whose fields
    all have defaults), so ``cls()`` works; ``cls(config=...)`` or ``cls(**params)``
    configure it."""

    Config: ClassVar[type] = EmptyConfig

    def __init__(self, *, config: Any = None, **params: Any) -> None:
        if config is not None and params:
            raise TypeError("pass either config= or keyword parameters, not both")
        self.config = config if config is not None else type(self).Config(**params)
