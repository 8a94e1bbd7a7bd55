"""Loading a run config: a YAML file, ``--set KEY=VALUE`` overrides, then validation.

:func:`load_config` reads the file (:func:`read_yaml`), applies the overrides
(:func:`apply_overrides`) and validates the result (:func:`popmarl.config.schema.validate`);
where a ``--set PATH.name=NEW`` renamed a component but left its params, the problems with
those params become one line that says so. :func:`differences` lists the dotted keys two
configs differ in (what ``--resume`` compares).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from popmarl.config.schema import COMPONENT_KINDS, RunConfig, per_population, validate
from popmarl.errors import ConfigError
from popmarl.plugins.registry import RegistriesLike


def apply_overrides(raw: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``KEY=VALUE`` overrides (dotted keys, YAML-typed values) to a raw config."""
    raw = _deep_copy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set: expected KEY=VALUE (e.g. stopping.max_iterations=5), got {item!r}")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {key}: value is not valid YAML ({_first_line(exc)})") from None
        target: Any = raw
        parts = key.strip().split(".")
        for depth, part in enumerate(parts[:-1]):
            node = target.get(part) if isinstance(target, dict) else None
            if isinstance(node, str) and parts[depth] in (*COMPONENT_KINDS, "env"):
                node = {"name": node}
                target[part] = node
            if node is None:
                node = {}
                target[part] = node
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {'.'.join(parts[: depth + 1])} is not a mapping")
            target = node
        target[parts[-1]] = value
    return raw


def differences(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """The dotted keys whose values differ between two configs (mappings are compared key
    by key, anything else whole), each with its ``(old, new)`` value (None where absent)."""
    found: dict[str, tuple[Any, Any]] = {}
    for key in [*old, *(k for k in new if k not in old)]:
        a, b, dotted = old.get(key), new.get(key), f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            found.update(differences(a, b, f"{dotted}."))
        elif a != b:
            found[dotted] = (a, b)
    return found


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """Parse a YAML file; a missing, unreadable or malformed file is a ConfigError."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such config file")
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a config file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc.__class__.__name__}: {exc})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or _first_line(exc)
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None


def load_config(path: str | os.PathLike[str], overrides: Sequence[str] = (), *,
                registries: RegistriesLike | None = None) -> RunConfig:
    """Read, override and validate a config file (component names looked up in
    ``registries``, default ``popmarl.<kind>``)."""
    raw = read_yaml(path)
    if raw is None:
        raise ConfigError(f"{path}: the config file is empty")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must be a mapping of top-level keys, got {type(raw).__name__}")
    overridden = apply_overrides(raw, overrides)
    try:
        return validate(overridden, source=str(path), registries=registries)
    except ConfigError as exc:
        renamed = renamed_components(raw, overrides)
        if not renamed:
            raise
        raise ConfigError(_explain_renames(exc.problems, renamed)) from None


def renamed_components(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, tuple[str, str]]:
    """The components (dotted path -> (old name, new name)) that ``--set PATH.name=NEW``
    renames in ``raw`` while leaving their params alone (no ``PATH=`` or ``PATH.params...``
    override): their params are still the old component's."""
    keys = [item.partition("=")[0].strip() for item in overrides]
    renamed: dict[str, tuple[str, str]] = {}
    for key, item in zip(keys, overrides):
        path = key.removesuffix(".name")
        if path == key or not _is_component_path(raw, path) or any(
                k == path or k == f"{path}.params" or k.startswith(f"{path}.params.") for k in keys):
            continue
        old = _node(raw, path)
        old_name = old.get("name") if isinstance(old, Mapping) else old
        new_name = yaml.safe_load(item.partition("=")[2] or "null")
        renamed.pop(path, None)
        if isinstance(old_name, str) and isinstance(new_name, str) and new_name != old_name:
            renamed[path] = (old_name, new_name)
    return renamed


def _is_component_path(raw: Mapping[str, Any], path: str) -> bool:
    head, _, population = path.partition(".")
    return path in COMPONENT_KINDS or (head == "algorithm" and bool(population) and per_population(raw.get(head)))


def _node(raw: Mapping[str, Any], path: str) -> Any:
    node: Any = raw
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _explain_renames(problems: Sequence[str], renamed: Mapping[str, tuple[str, str]]) -> list[str]:
    """``problems`` with those under a renamed component's params made one line per component,
    where the first of them was."""
    order: list[tuple[str | None, str]] = []
    unfit: dict[str, list[str]] = {}
    for problem in problems:
        where = problem.partition(":")[0]
        path = next((p for p in renamed if where == f"{p}.params" or where.startswith(f"{p}.params.")), None)
        if path is None:
            order.append((None, problem))
            continue
        if path not in unfit:
            unfit[path] = []
            order.append((path, ""))
        key = where.removeprefix(f"{path}.params").lstrip(".")
        if key and key not in unfit[path]:
            unfit[path].append(key)
    return [problem if path is None else _rename_problem(path, *renamed[path], unfit[path]) for path, problem in order]


def _rename_problem(path: str, old: str, new: str, keys: Sequence[str]) -> str:
    listed = ", ".join(keys) if len(keys) <= 4 else f"{', '.join(keys[:3])} and {len(keys) - 3} more"
    return (f"--set {path}.name={new}: {path}.params still hold {old}'s params, which {new} does not take"
            f"{f' ({listed})' if keys else ''}; add --set {path}.params={{}} for {new}'s defaults, or set its params")
