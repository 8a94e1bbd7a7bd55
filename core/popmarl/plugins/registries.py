"""The component registries (one per kind of :data:`~popmarl.plugins.registry.KINDS`) a run
resolves names in.

By default they are the module-level ``popmarl.<kind>`` registries, built from entry
points on first use. :class:`Registries` is an explicit set of them, so that a run can
use components registered in this process only (``Registry.with_component``, e.g. in a
notebook): ``popmarl.run(config, out, registries=...)`` validates, builds and ships to
remote workers with the same set.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Union

import attrs

from popmarl.plugins.registry import KINDS, Registry

#: The root package, whose attributes ``popmarl.<kind>`` are the current registries.
_ROOT = __name__.partition(".")[0]


def get(kind: str) -> Registry:
    """The registry of ``kind`` as currently exposed as ``popmarl.<kind>``.

    The root package holds the current registries as attributes a user may replace
    (``popmarl.solvers = popmarl.solvers.with_component(...)``), so they are read from the
    package object, which Python imports before any of its submodules; the root's own
    functions (``popmarl.run``...) sit above every layer and are not imported from here."""
    _check_kind(kind)
    return getattr(sys.modules[_ROOT], kind)  # type: ignore[no-any-return]


def component(kind: str, name: str, params: object = None) -> object:
    """An instance of component ``name`` of ``kind`` configured with ``params``."""
    return Registries.current().component(kind, name, params)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown registry kind {kind!r}; kinds: {', '.join(KINDS)}")


def _freeze(by_kind: Mapping[str, Registry]) -> Mapping[str, Registry]:
    for kind, registry in by_kind.items():
        _check_kind(kind)
        if not isinstance(registry, Registry) or registry.kind != kind:
            raise ValueError(f"registries[{kind!r}]: must be a Registry of kind {kind!r}, got {registry!r}")
    return MappingProxyType({kind: by_kind[kind] for kind in KINDS if kind in by_kind})


@attrs.frozen(kw_only=True)
class Registries:
    """One :class:`Registry` per kind; a kind left out is looked up in ``popmarl.<kind>``
    when the set is made (:meth:`of`)."""

    by_kind: Mapping[str, Registry] = attrs.field(converter=_freeze)

    @classmethod
    def current(cls) -> Registries:
        """The module-level registries ``popmarl.<kind>`` as they are now."""
        return cls(by_kind={kind: get(kind) for kind in KINDS})

    @classmethod
    def of(cls, registries: RegistriesLike | None) -> Registries:
        """``registries`` as a full set: None means :meth:`current`; a mapping
        ``{kind: Registry}`` replaces those kinds of :meth:`current`."""
        if isinstance(registries, Registries):
            return registries
        current = cls.current()
        if registries is None:
            return current
        if not isinstance(registries, Mapping):
            raise TypeError(f"registries: must be a Registries or a mapping of kind to Registry, got {registries!r}")
        return cls(by_kind={**current.by_kind, **_freeze(registries)})

    def get(self, kind: str) -> Registry:
        """The registry of ``kind``."""
        _check_kind(kind)
        return self.by_kind[kind] if kind in self.by_kind else get(kind)

    def with_component(self, kind: str, name: str, obj: Any) -> Registries:
        """A new set with ``obj`` registered as ``name`` of ``kind`` (this one is unchanged)."""
        return attrs.evolve(self, by_kind={**self.by_kind, kind: self.get(kind).with_component(name, obj)})

    def component(self, kind: str, name: str, params: object = None) -> object:
        """An instance of component ``name`` of ``kind`` configured with ``params``."""
        cls = self.get(kind).load(name)
        return cls(**dict(params or {}))  # type: ignore[call-overload]

    def in_process(self, wanted: Mapping[str, str]) -> dict[tuple[str, str], Any]:
        """Of the components ``{kind: name}``, those registered without an entry point
        (``with_component``): ``{(kind, name): object}``. Another process cannot find them
        by name, so a backend ships them by value."""
        found: dict[tuple[str, str], Any] = {}
        for kind, name in wanted.items():
            registry = self.get(kind)
            entry = registry.entries.get(name)
            if entry is not None and entry.entry_point is None:
                found[(kind, name)] = entry.obj
        return found


#: What ``registries=`` accepts: a :class:`Registries`, or ``{kind: Registry}`` for the
#: kinds that differ from ``popmarl.<kind>``.
RegistriesLike = Union[Registries, Mapping[str, Registry]]
