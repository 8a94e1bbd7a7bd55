"""Turn plain data (parsed YAML) into attrs classes, collecting every problem at once.

Each problem reads ``dotted.path: what is wrong and what is allowed``. Supports the
annotations configs use: int, float, bool, str, Literal, ``X | None``, list, tuple,
dict/Mapping, Any, and nested attrs classes.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union

import attrs

_MISSING = object()


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is type(None):
        return "null"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple, Sequence):
        return "a list"
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        return "a mapping"
    if attrs.has(tp):
        return "a mapping"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, getattr(tp, "__name__", str(tp)))


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or ``""``."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def structure(tp: Any, value: Any, path: str, problems: list[str]) -> Any:
    """Convert ``value`` to ``tp``; append a message to ``problems`` for each error."""
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if attrs.has(tp):
        return structure_attrs(tp, value, path, problems)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in args:
            if option is type(None):
                continue
            trial: list[str] = []
            result = structure(option, value, path, trial)
            if not trial:
                return result
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return structure(non_none[0], value, path, problems)
        problems.append(f"{path}: must be {_type_name(tp)}, got {_describe(value)}")
        return None
    if origin is Literal:
        if value in args:
            return value
        hint = did_you_mean(value, [str(a) for a in args]) if isinstance(value, str) else ""
        problems.append(f"{path}: {_describe(value)} is not allowed{hint}; allowed: {', '.join(str(a) for a in args)}")
        return None
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            problems.append(f"{path}: must be a list, got {_describe(value)}")
            return None
        item = args[0] if args else Any
        items = [structure(item, v, _join(path, i), problems) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple or tp is tuple else items
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            problems.append(f"{path}: must be a mapping, got {_describe(value)}")
            return None
        item = args[1] if len(args) == 2 else Any
        return {str(k): structure(item, v, _join(path, str(k)), problems) for k, v in value.items()}
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # PyYAML reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif tp in (bool, str):
        if isinstance(value, tp):
            return value
    else:
        raise TypeError(f"cannot structure {tp!r}")
    problems.append(f"{path}: must be {_type_name(tp)}, got {_describe(value)}")
    return None


_VALIDATOR_MESSAGE = re.compile(r"^'[^']*' must be (.*): (.*)$")


def takes_none(tp: Any) -> bool:
    """Whether ``None`` (YAML ``null``) is a value of annotation ``tp``."""
    if tp is Any or tp is object or tp is type(None):
        return True
    if typing.get_origin(tp) in (Union, types.UnionType, Literal):
        return any(a is None or a is type(None) for a in typing.get_args(tp))
    return False


def structure_attrs(cls: type, value: Any, path: str, problems: list[str]) -> Any:
    """Build attrs class ``cls`` from a mapping: unknown keys, missing keys, wrong types
    and failed validators are all reported, each at its own path. A key that is null where
    null is not one of its values is taken as absent (its default, or "required"): null
    unsets it, so ``--set KEY=null`` undoes a key a config file sets."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        problems.append(f"{path or 'config'}: must be a mapping, got {_describe(value)}")
        return None
    attrs.resolve_types(cls)
    fields = {f.name: f for f in attrs.fields(cls) if f.init}
    for key in value:
        if key not in fields:
            problems.append(
                f"{_join(path, str(key))}: unknown key{did_you_mean(str(key), list(fields))}; "
                f"allowed: {', '.join(fields) or 'none'}"
            )
    kwargs: dict[str, Any] = {}
    failed = False
    for name, field in fields.items():
        where = _join(path, name)
        if name not in value or (value[name] is None and not takes_none(field.type)):
            if field.default is attrs.NOTHING:
                problems.append(f"{where}: required")
                failed = True
            continue
        before = len(problems)
        converted = structure(field.type, value[name], where, problems)
        if len(problems) > before:
            failed = True
            continue
        if field.validator is not None:
            try:
                field.validator(None, field, converted)
            except (ValueError, TypeError) as exc:
                match = _VALIDATOR_MESSAGE.match(str(exc))
                message = f"must be {match.group(1)}, got {match.group(2)}" if match else str(exc)
                problems.append(f"{where}: {message}")
                failed = True
                continue
        kwargs[name] = converted
    if failed or len(value.keys() - fields.keys()):
        return None
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        problems.append(f"{path or 'config'}: {exc}")
        return None


def unstructure(obj: Any) -> Any:
    """Plain data (for YAML/JSON) from attrs instances, tuples and mappings."""
    if attrs.has(type(obj)):
        return {f.name: unstructure(getattr(obj, f.name)) for f in attrs.fields(type(obj))}
    if isinstance(obj, Mapping):
        return {str(k): unstructure(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [unstructure(v) for v in obj]
    return obj
