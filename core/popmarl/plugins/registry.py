"""Registries: which components exist, built from entry points and loaded lazily.

A :class:`Registry` (one kind of component) is immutable; :meth:`Registry.with_component`
returns a new one. An entry is imported only when its name is asked for. A run resolves
names in a :class:`Registries`: one registry per kind of :data:`KINDS`, by default the
module-level ``popmarl.<kind>`` ones, or an explicit set, so that a run can use components
registered in this process only (``popmarl.run(config, out, registries=...)`` validates,
builds and ships to remote workers with the same set).
"""

from __future__ import annotations

import difflib
import functools
import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, Union

import attrs

from popmarl.errors import PluginError, UnknownComponentError

KINDS = ("scenarios", "algorithms", "envs", "solvers", "backends", "trackers", "ratings", "models")
STRICT_ENV = "POPMARL_STRICT_PLUGINS"

#: Where a popmarl checkout keeps its plugins, one directory each (``plugins/<name>``), if
#: this package is the checkout's ``core/popmarl``; None when it is installed elsewhere.
_HERE = Path(__file__).resolve().parent.parent  # the popmarl package
CHECKOUT_PLUGINS: Path | None = (_HERE.parents[1] / "plugins"
                                 if _HERE.parent.name == "core" and (_HERE.parents[1] / "plugins").is_dir() else None)


@attrs.frozen(kw_only=True)
class CheckoutPlugin:
    """A plugin of a popmarl checkout: its ``directory`` under ``plugins/``, its
    ``distribution`` name, and the component names it registers, by kind."""

    directory: str
    distribution: str
    components: Mapping[str, tuple[str, ...]]


@functools.cache
def checkout_plugins(plugins_dir: Path | None = CHECKOUT_PLUGINS) -> tuple[CheckoutPlugin, ...]:
    """The plugins under ``plugins_dir`` (a checkout's ``plugins/``), read from the
    ``popmarl.<kind>`` entry points of their own ``pyproject.toml``, so unknown-name errors
    can say which plugin adds a component without importing any plugin; none outside a
    checkout, and a directory without a readable ``pyproject.toml`` is skipped."""
    if plugins_dir is None or not plugins_dir.is_dir():
        return ()
    import tomllib  # only an unknown name needs it

    found = []
    for path in sorted(plugins_dir.glob("*/pyproject.toml")):
        try:
            project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        groups = project.get("entry-points", {})
        components = {kind: tuple(sorted(groups.get(f"popmarl.{kind}", {}))) for kind in KINDS}
        found.append(CheckoutPlugin(directory=path.parent.name, distribution=str(project.get("name", path.parent.name)),
                                    components={k: names for k, names in components.items() if names}))
    return tuple(found)


def installed(distribution: str) -> bool:
    """Whether a distribution of this name is installed."""
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def unknown_hint(kind: str, name: str, plugins: Iterable[CheckoutPlugin] | None = None) -> str:
    """What to install for an unknown ``name`` of ``kind``, from the checkout's ``plugins``
    (default: :func:`checkout_plugins`): the plugin that registers ``name`` if one does, else
    those that add components of ``kind`` and are not installed (:func:`install_hint`); ``""``
    when none applies (outside a checkout, none)."""
    plugins = checkout_plugins() if plugins is None else tuple(plugins)
    for plugin in plugins:
        if name in plugin.components.get(kind, ()):
            return (f"; {kind[:-1]} {name!r} comes with plugin {plugin.distribution}, from a popmarl checkout: "
                    f"pip install ./plugins/{plugin.directory}")
    return install_hint({p.distribution: p.directory for p in plugins if kind in p.components})


def install_hint(distributions: Iterable[str] | Mapping[str, str]) -> str:
    """How to install those of ``distributions`` (plugins of a popmarl checkout; a mapping
    gives each one's directory under ``plugins/``, else it is the distribution's name) that
    are not installed yet: ``"; more from a popmarl checkout: pip install ./plugins/..."``,
    or ``""`` when all are."""
    directories = dict(distributions) if isinstance(distributions, Mapping) else {d: d for d in distributions}
    missing = [directory for d, directory in directories.items() if not installed(d)]
    if not missing:
        return ""
    return "; more from a popmarl checkout: pip install " + " ".join(f"./plugins/{d}" for d in missing)


def plugin_distributions() -> dict[str, str]:
    """Every installed distribution other than popmarl that registers ``popmarl.*`` entry
    points, with its version (sorted by name)."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name != "popmarl" and any(ep.group.startswith("popmarl.") for ep in dist.entry_points):
            found.setdefault(name, dist.version)
    return dict(sorted(found.items()))


class PluginWarning(UserWarning):
    """A plugin problem that does not stop the run (duplicate name, failed import)."""


def strict_plugins() -> bool:
    """Whether plugin problems are errors (``POPMARL_STRICT_PLUGINS=1``)."""
    return os.environ.get(STRICT_ENV, "") not in ("", "0", "false", "no")


class EntryPointScan(Protocol):
    """What :func:`importlib.metadata.entry_points` returns (its type varies by Python version)."""

    def select(self, *, group: str) -> Iterable[metadata.EntryPoint]: ...


@attrs.frozen(kw_only=True)
class Entry:
    """One registered component: where it comes from and how to load it."""

    name: str
    distribution: str
    version: str
    target: str  # "module:attr" for entry points, "<object>" for with_component
    entry_point: metadata.EntryPoint | None = attrs.field(default=None, eq=False, repr=False)
    obj: Any = attrs.field(default=None, eq=False, repr=False)

    def load(self) -> Any:
        if self.entry_point is None:
            return self.obj
        return self.entry_point.load()


def _plugin_problem(message: str) -> None:
    """Warn about a broken plugin, or raise :class:`PluginError` in strict mode."""
    if strict_plugins():
        raise PluginError(message)
    warnings.warn(message, PluginWarning, stacklevel=3)


@attrs.frozen(kw_only=True)
class Registry:
    """Components of one kind (``popmarl.<kind>`` entry points), by name."""

    kind: str
    entries: Mapping[str, Entry] = attrs.field(factory=dict, converter=lambda m: MappingProxyType(dict(m)))

    @classmethod
    def from_entry_points(cls, kind: str, found: EntryPointScan | None = None) -> Registry:
        """Build the registry of ``kind`` from the installed entry points (or from ``found``:
        one :func:`importlib.metadata.entry_points` scan shared by every kind)."""
        group = f"popmarl.{kind}"
        entries: dict[str, Entry] = {}
        for ep in metadata.entry_points(group=group) if found is None else found.select(group=group):
            dist = ep.dist
            entry = Entry(
                name=ep.name,
                distribution=dist.name if dist else "?",
                version=dist.version if dist else "?",
                target=ep.value,
                entry_point=ep,
            )
            previous = entries.get(ep.name)
            if previous is not None and previous.distribution != entry.distribution:
                warnings.warn(
                    f"{kind[:-1]} {ep.name!r} is registered by both {previous.distribution} "
                    f"and {entry.distribution}; using {entry.distribution}",
                    PluginWarning,
                    stacklevel=2,
                )
            entries[ep.name] = entry
        return cls(kind=kind, entries=dict(sorted(entries.items())))

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted."""
        return tuple(sorted(self.entries))

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def entry(self, name: str) -> Entry:
        """The :class:`Entry` of ``name``; an error listing the installed names if unknown."""
        try:
            return self.entries[name]
        except KeyError:
            raise UnknownComponentError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        """The message for an unknown ``name``: installed names, a guess, how to add more."""
        close = difflib.get_close_matches(name, self.names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        names = ", ".join(self.names()) or "none"
        return f"unknown {self.kind[:-1]} {name!r}{hint}; installed: {names}{unknown_hint(self.kind, name)}"

    def load(self, name: str) -> Any:
        """Import and return the component class registered as ``name``."""
        entry = self.entry(name)
        try:
            return entry.load()
        except Exception as exc:  # any import-time failure of a third-party plugin
            message = (
                f"plugin {entry.distribution} {entry.version} failed to load {self.kind[:-1]} "
                f"{name!r} ({entry.target}): {type(exc).__name__}: {exc}"
            )
            _plugin_problem(message)
            raise UnknownComponentError(message) from exc

    def with_component(self, name: str, obj: Any, *, distribution: str = "<local>") -> Registry:
        """A new registry with ``obj`` registered as ``name`` (this one is unchanged)."""
        entry = Entry(name=name, distribution=distribution, version="", target="<object>", obj=obj)
        return attrs.evolve(self, entries={**self.entries, name: entry})

    def check(self) -> dict[str, str | None]:
        """Import every entry; map each name to its import error, or None when it loads."""
        problems: dict[str, str | None] = {}
        for name, entry in self.entries.items():
            try:
                entry.load()
                problems[name] = None
            except Exception as exc:
                problems[name] = f"{type(exc).__name__}: {exc}"
        return problems


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
