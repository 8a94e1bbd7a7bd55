"""Registries (popmarl.plugins.registry): built from entry points, immutable, lazily loading,
clear about unknown names, duplicates and broken plugins."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import attrs
import pytest

import popmarl
from popmarl.plugins import registry as registries
from popmarl.errors import PluginError, UnknownComponentError
from popmarl.plugins.registry import (KINDS, STRICT_ENV, PluginWarning, Registry, checkout_plugins, install_hint, installed,
                              plugin_distributions)

#: The checkout's plugins, one directory each.
PLUGINS = Path(__file__).resolve().parents[2] / "plugins"

#: What the core distribution itself registers, per kind.
CORE_BUILTINS = {
    "scenarios": {"psro"},
    "algorithms": {"random", "exact_matrix_br"},
    "envs": {"matrix"},
    "solvers": {"uniform", "latest"},
    "backends": {"local"},
    "trackers": {"console", "jsonl"},
    "ratings": {"elo"},
    "models": set(),  # network models need torch: popmarl-torch registers them
}


class _Thing:
    """A stand-in component."""


@pytest.fixture(autouse=True)
def _lenient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plugin problems are warnings unless a test turns strict mode on."""
    monkeypatch.delenv(STRICT_ENV, raising=False)


def test_kinds_are_those_of_the_design() -> None:
    assert set(KINDS) == set(CORE_BUILTINS)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_a_registry_of_popmarl_entry_points(kind: str) -> None:
    registry = getattr(popmarl, kind)
    assert isinstance(registry, Registry)
    assert registry.kind == kind
    assert registries.get(kind) is registry
    assert CORE_BUILTINS[kind] <= set(registry.names())
    assert list(registry.names()) == sorted(registry.names())
    for name in CORE_BUILTINS[kind]:
        entry = registry.entry(name)
        assert (entry.distribution, entry.version) == ("popmarl", popmarl.__version__)
        assert entry.target.startswith(("popmarl.builtin.", "popmarl.scenario."))


def test_registries_get_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kinds: scenarios"):
        registries.get("widgets")


def test_registry_is_immutable() -> None:
    registry = popmarl.solvers
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        registry.kind = "envs"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        registry.entries = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        registry.entries["sneaky"] = registry.entry("uniform")  # type: ignore[index]
    assert "sneaky" not in registry.names()


def test_with_component_returns_a_new_registry_and_leaves_the_old_one_alone() -> None:
    old = popmarl.solvers
    before = old.names()
    new = old.with_component("mine", _Thing)
    assert new is not old
    assert "mine" in new.names() and "mine" not in old.names()
    assert old.names() == before
    assert set(new.names()) == set(before) | {"mine"}
    assert new.load("mine") is _Thing
    assert new.entry("mine").distribution == "<local>"
    # It may shadow an installed name, again without touching the original.
    shadow = old.with_component("uniform", _Thing)
    assert shadow.load("uniform") is _Thing
    assert old.load("uniform") is not _Thing


def test_unknown_name_lists_installed_names_and_a_guess() -> None:
    with pytest.raises(UnknownComponentError) as caught:
        popmarl.solvers.load("unifrom")
    message = str(caught.value)
    assert "unknown solver 'unifrom'" in message
    assert "did you mean 'uniform'?" in message
    for name in popmarl.solvers.names():
        assert name in message
    assert ("pip install ./plugins/popmarl-solvers" in message) is not installed("popmarl-solvers")
    assert isinstance(caught.value, KeyError)  # lookups by name fail like a mapping's


def test_every_plugin_component_name_hints_at_its_plugin() -> None:
    """Unknown-name hints come from the plugins' own entry points: every component a plugin
    of the checkout registers (installed or not) names that plugin's directory."""
    registered = {}
    for path in sorted(PLUGINS.glob("*/pyproject.toml")):
        groups = tomllib.loads(path.read_text(encoding="utf-8"))["project"].get("entry-points", {})
        for group, names in groups.items():
            if group.removeprefix("popmarl.") in KINDS:
                registered.update({(group.removeprefix("popmarl."), name): path.parent.name for name in names})
    assert {("algorithms", "mappo"), ("algorithms", "dqn"), ("envs", "pettingzoo"), ("backends", "ray")} <= set(registered)
    assert {(kind, name): p.directory for p in checkout_plugins() for kind, names in p.components.items()
            for name in names} == registered
    for (kind, name), directory in registered.items():
        message = Registry(kind=kind).unknown_message(name)  # a registry without it
        assert message.endswith(f"comes with plugin {directory}, from a popmarl checkout: "
                                f"pip install ./plugins/{directory}"), message
    assert "pip install ./plugins/popmarl-torchrl" in Registry(kind="algorithms").unknown_message("mappo")


def test_install_hints_name_only_distributions_that_are_not_installed(make_dist) -> None:
    """A hint says what works (a plugin's path in a checkout, not an index name that no
    index has) and never names a distribution that is already installed."""
    make_dist("popmarl-hint-present", entry_points={"popmarl.solvers": {"hint_present": "nowhere:X"}})
    assert installed("popmarl-hint-present") and not installed("popmarl-hint-absent")
    assert install_hint(["popmarl-hint-present"]) == ""
    assert install_hint(["popmarl-hint-present", "popmarl-hint-absent"]) == (
        "; more from a popmarl checkout: pip install ./plugins/popmarl-hint-absent")
    for kind in KINDS:
        message = getattr(popmarl, kind).unknown_message("zzzz")
        for dist in plugin_distributions():
            assert dist not in message, (kind, message)
        assert "pip install popmarl" not in message  # no index has popmarl's plugins


def test_unknown_name_without_a_close_match_has_no_guess() -> None:
    with pytest.raises(UnknownComponentError) as caught:
        popmarl.envs.load("zzzzzzzz")
    assert "did you mean" not in str(caught.value)
    assert "matrix" in str(caught.value)


def test_names_imports_nothing_and_load_imports_only_what_is_asked() -> None:
    """In a fresh interpreter: listing every registry imports no component module; loading
    one imports exactly that one."""
    script = """
import sys
import popmarl
for kind in popmarl.KINDS:
    getattr(popmarl, kind).names()
builtin = sorted(m for m in sys.modules if m.startswith("popmarl.builtin."))
assert builtin == [], builtin
popmarl.solvers.load("uniform")
builtin = sorted(m for m in sys.modules if m.startswith("popmarl.builtin."))
assert builtin == ["popmarl.builtin.solvers"], builtin
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_a_plugin_module_is_imported_only_when_its_name_is_loaded(make_dist) -> None:
    make_dist("popmarl-lazy-probe", entry_points={"popmarl.solvers": {"lazy_probe": "lazy_probe_mod:Solver"}},
              modules={"lazy_probe_mod": "from popmarl.builtin.solvers import Uniform as Solver\n"})
    registry = Registry.from_entry_points("solvers")
    assert "lazy_probe" in registry.names()
    assert registry.entry("lazy_probe").distribution == "popmarl-lazy-probe"
    assert "lazy_probe_mod" not in sys.modules
    cls = registry.load("lazy_probe")
    assert "lazy_probe_mod" in sys.modules
    assert cls().solve(__import__("numpy").zeros((2, 2, 2)))[0].tolist() == [0.5, 0.5]


def test_two_distributions_claiming_one_name_warn_naming_both(make_dist) -> None:
    make_dist("popmarl-dup-claimer", entry_points={"popmarl.solvers": {"uniform": "dup_mod:Other"}},
              modules={"dup_mod": "class Other:\n    pass\n"})
    with pytest.warns(PluginWarning) as record:
        registry = Registry.from_entry_points("solvers")
    messages = [str(w.message) for w in record if issubclass(w.category, PluginWarning)]
    assert len(messages) == 1, messages
    assert "'uniform'" in messages[0]
    assert "popmarl-dup-claimer" in messages[0]
    assert re.search(r"(?<![\w-])popmarl(?![\w-])", messages[0]), messages[0]  # the core, by name
    # Whichever wins, the registry stays usable and names the winner.
    assert registry.entry("uniform").distribution in ("popmarl", "popmarl-dup-claimer")


def test_one_distribution_has_no_duplicate_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)
        for kind in KINDS:
            Registry.from_entry_points(kind)


@pytest.fixture
def broken_dist(make_dist):
    return make_dist("popmarl-broken-probe", version="0.0.7",
                     entry_points={"popmarl.solvers": {"broken_probe": "broken_probe_mod:Solver"}},
                     modules={"broken_probe_mod": "import no_such_module_anywhere_xyz\n"})


def test_a_plugin_that_fails_to_import_warns_naming_its_distribution_and_error(broken_dist) -> None:
    registry = Registry.from_entry_points("solvers")
    assert "broken_probe" in registry.names()  # listing does not import it
    with pytest.warns(PluginWarning) as record, pytest.raises(UnknownComponentError) as caught:
        registry.load("broken_probe")
    message = str(record[0].message)
    assert "popmarl-broken-probe" in message and "0.0.7" in message
    assert "ModuleNotFoundError" in message and "no_such_module_anywhere_xyz" in message
    assert "broken_probe" in str(caught.value)
    # The rest of the registry still works.
    assert registry.load("uniform").__name__ == "Uniform"


def test_a_broken_plugin_is_an_error_in_strict_mode(broken_dist, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STRICT_ENV, "1")
    registry = Registry.from_entry_points("solvers")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)
        with pytest.raises(PluginError) as caught:
            registry.load("broken_probe")
    assert "popmarl-broken-probe" in str(caught.value)
    assert "no_such_module_anywhere_xyz" in str(caught.value)


@pytest.mark.parametrize("value", ["", "0", "false", "no"])
def test_strict_mode_is_off_for_false_values(broken_dist, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(STRICT_ENV, value)
    with pytest.warns(PluginWarning), pytest.raises(UnknownComponentError):
        Registry.from_entry_points("solvers").load("broken_probe")


def test_check_reports_each_entry(broken_dist) -> None:
    problems = Registry.from_entry_points("solvers").check()
    assert problems["uniform"] is None and problems["latest"] is None
    assert "ModuleNotFoundError" in problems["broken_probe"]


def test_component_builds_an_instance_with_params() -> None:
    solver = registries.component("solvers", "uniform")
    assert type(solver).__name__ == "Uniform"
    env = registries.component("envs", "matrix", {"game": "matching_pennies"})
    assert env.config.game == "matching_pennies"


def test_registries_follow_what_popmarl_exposes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner looks components up in ``popmarl.<kind>``, so a notebook (or a test) can
    swap in a ``with_component`` registry."""
    monkeypatch.setattr(popmarl, "solvers", popmarl.solvers.with_component("mine", _Thing))
    assert registries.get("solvers").load("mine") is _Thing
