"""Find a PettingZoo env by import path and construct it; bad input is a ConfigError.

``module`` is ``package.module`` (a PettingZoo env module with ``env()`` and/or
``parallel_env()``) or ``package.module:attr``, where ``attr`` is such an object or an
``AECEnv`` / ``ParallelEnv`` subclass. A user's own module is imported from the
directories of ``path`` (by default the one ``popmarl`` runs in), as if they were on
``PYTHONPATH``: saved in the config, they reach other processes (Ray's actors) too.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from popmarl.api import ConfigError, did_you_mean

Api = Literal["aec", "parallel"]

#: The pip install that provides each env family (longest matching prefix wins).
INSTALL_HINTS = {
    "pettingzoo.classic": 'pip install "pettingzoo[classic]"',
    "pettingzoo.butterfly": 'pip install "pettingzoo[butterfly]"',
    "pettingzoo.sisl": 'pip install "pettingzoo[sisl]"',
    "pettingzoo.atari": 'pip install "pettingzoo[atari]"',
    "pettingzoo.mpe": "pip install mpe2 (MPE moved there: use module mpe2.<env>, e.g. mpe2.simple_spread_v3)",
    "pettingzoo.magent": "pip install magent2 (MAgent moved there: use module magent2.environments.<env>)",
    "pettingzoo": "pip install pettingzoo",
    "mpe2": 'pip install mpe2 (or pip install "popmarl-pettingzoo[mpe]")',
    "magent2": "pip install magent2",
}

#: The packages whose env modules a bare env name (``rps_v2``) is looked up in.
ENV_FAMILIES = ("pettingzoo.classic", "pettingzoo.butterfly", "pettingzoo.sisl", "pettingzoo.atari", "mpe2",
                "magent2.environments")
_VERSIONED = re.compile(r"_v\d+$")

MODULE = "env.params.module"
PATH = "env.params.path"
KWARGS = "env.params.kwargs"
API = "env.params.api"


def install_hint(module: str) -> str | None:
    """The pip command that installs ``module``'s env family, if it is a known one."""
    for prefix in sorted(INSTALL_HINTS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return INSTALL_HINTS[prefix]
    return None


def default_path(module: str) -> list[str] | None:
    """``[the current directory]`` when ``module``'s top-level package is not installed
    but found there (a user's own module), or found nowhere; None for an installed one."""
    top = module.partition(":")[0].split(".")[0]
    try:
        here = Path.cwd().resolve()
    except OSError:  # the current directory was removed
        return None
    found = _locations(top)
    if found is None or any(p.resolve().parent == here for p in found):
        return [str(here)]
    return None


def _locations(top: str) -> list[Path] | None:
    """Where top-level module ``top`` is (a package's directories, a module's file); None
    if it is not found, ``[]`` if it has no place on disk (built in, made in memory)."""
    module = sys.modules.get(top)
    try:
        spec = importlib.util.find_spec(top) if module is None else getattr(module, "__spec__", None)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None if module is None else []
    if spec.submodule_search_locations:
        return [Path(p) for p in spec.submodule_search_locations]
    return [Path(spec.origin)] if spec.has_location and spec.origin else []


def _put_on_sys_path(directories: Sequence[str]) -> None:
    """Put ``directories`` first on ``sys.path`` (those not on it yet), as PYTHONPATH would."""
    new = [d for d in directories if d not in sys.path]
    if new:
        sys.path[:0] = new
        importlib.invalidate_caches()


def import_target(path: str, directories: Sequence[str] = ()) -> Any:
    """The module (or ``module:attr`` object) named by ``path``, looked for in
    ``directories`` first (``env.params.path``), then among the installed packages."""
    module_name, _, attr = path.partition(":")
    _put_on_sys_path(directories)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(_not_found(module_name, exc, directories)) from None
    except Exception as exc:  # noqa: BLE001 - any failure while importing is the user's to fix
        hint = install_hint(module_name)
        message = f"{MODULE}: importing {module_name} failed ({type(exc).__name__}: {exc})"
        raise ConfigError(message + (f"; install it with: {hint}" if hint else "")) from None
    target: Any = module
    for part in filter(None, attr.split(".")):
        if not hasattr(target, part):
            raise ConfigError(f"{MODULE}: {module_name} has no attribute {attr!r}")
        target = getattr(target, part)
    return target


def registered(path: str) -> SimpleNamespace | None:
    """For ``path`` naming one of PettingZoo's own env modules (``pettingzoo.<family>.<env>_vN``),
    that env from PettingZoo's env registry: ``env`` and, where registered, ``parallel_env``,
    each making it with ``pettingzoo.make``. Importing the versioned module itself (the old
    creation API) raises PettingZoo's DeprecationWarning; the registry is what PettingZoo
    asks for. None for any other path, an env the registry lacks, or a PettingZoo without
    a registry (then :func:`import_target` imports the module)."""
    family, _, name = path.removeprefix("pettingzoo.").partition(".")
    if not path.startswith("pettingzoo.") or "." in name or ":" in name or not _VERSIONED.search(name):
        return None
    try:
        import pettingzoo  # type: ignore[import-untyped]
    except ImportError:
        return None
    specs = {}
    for kind in ("aec", "parallel"):
        try:
            specs[kind] = pettingzoo.spec(kind, f"{family}/{name}")  # this version exactly, or an error
        except Exception:  # noqa: BLE001 - not registered (or a PettingZoo without a registry)
            pass
    if "aec" not in specs:
        return None
    if isinstance(specs["aec"].entry_point, str):
        try:
            import_target(specs["aec"].entry_point)
        except ConfigError:  # e.g. a missing dependency: said of the module as the config names it
            return None
    return SimpleNamespace(**{attr: _maker(pettingzoo.make, kind, specs[kind], attr)
                              for kind, attr in (("aec", "env"), ("parallel", "parallel_env")) if kind in specs})


def _maker(make: Callable[..., Any], kind: str, spec: Any, name: str) -> Callable[..., Any]:
    def maker(**kwargs: Any) -> Any:
        return make(kind, spec, **kwargs)

    maker.__name__ = name
    return maker


def _not_found(module_name: str, exc: ModuleNotFoundError, directories: Sequence[str]) -> str:
    missing = exc.name or ""
    hint = install_hint(module_name)
    if missing and (module_name == missing or module_name.startswith(missing + ".")):
        # The module itself (or a parent package) does not exist.
        missing = _first_missing(module_name) or missing
        parent, _, leaf = missing.rpartition(".")
        if parent:
            return f"{MODULE}: no module named {missing!r}{did_you_mean(leaf, _siblings(parent))}"
        message = f"{MODULE}: no module named {missing!r}"
        if hint:
            return message + f"; install it with: {hint}"
        suggestion = _full_name(module_name)
        if suggestion:
            return message + suggestion + "; PettingZoo envs are named by their full module path"
        return (message + f": not installed, nor in {PATH} {list(directories)!r} (by default the directory "
                "popmarl runs in; a module of your own goes there, or list the directory that holds it)")
    message = f"{MODULE}: importing {module_name} needs the missing module {missing!r}"
    return message + f"; install it with: {hint}" if hint else message + f"; install it with: pip install {missing}"


def _first_missing(module_name: str) -> str | None:
    """The shortest prefix of ``module_name`` that cannot be found."""
    parts = module_name.split(".")
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        try:
            if importlib.util.find_spec(prefix) is None:
                return prefix
        except (ImportError, ValueError):
            return prefix
    return None


def _full_name(name: str) -> str:
    """`` (did you mean 'family.env_vN'?)`` for a bare env name such as ``rps_v2`` or
    ``tictactoe``, looked up in the installed :data:`ENV_FAMILIES`; else ``""``."""
    known: dict[str, str] = {}
    for family in ENV_FAMILIES:
        try:
            spec = importlib.util.find_spec(family)
        except Exception:  # noqa: BLE001 - a family that is not installed (or broken) has no names
            continue
        for found in pkgutil.iter_modules((spec.submodule_search_locations or []) if spec else []):
            if not found.ispkg and _VERSIONED.search(found.name):
                known.setdefault(found.name, f"{family}.{found.name}")
                known.setdefault(_VERSIONED.sub("", found.name), f"{family}.{found.name}")
    close = difflib.get_close_matches(name.rpartition(".")[2], list(known), n=1, cutoff=0.8)
    return f" (did you mean {known[close[0]]!r}?)" if close else ""


def _siblings(package: str) -> list[str]:
    try:
        module = importlib.import_module(package)
    except Exception:  # noqa: BLE001 - no suggestions, then
        return []
    return [m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))]


def choose_factory(target: Any, path: str, api: str) -> tuple[Callable[..., Any], Api]:
    """The constructor to call and which API it produces, for ``api`` auto|aec|parallel.
    ``auto`` prefers ``parallel_env`` (all simultaneous agents decide in one batch)."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv  # type: ignore[import-untyped]

    if isinstance(target, type):
        kind: Api | None = "aec" if issubclass(target, AECEnv) else "parallel" if issubclass(target, ParallelEnv) else None
        if kind is None:
            raise ConfigError(f"{MODULE}: {path} is a class but not an AECEnv or ParallelEnv subclass")
        if api not in ("auto", kind):
            article = "an AEC" if kind == "aec" else "a Parallel"
            raise ConfigError(f"{API}: {path} is {article} env class, not {api}; use api: {kind} or auto")
        return target, kind
    found: dict[str, Callable[..., Any]] = {}
    for option, name in (("parallel", "parallel_env"), ("aec", "env")):
        if callable(getattr(target, name, None)):
            found[option] = getattr(target, name)
    if not found:
        raise ConfigError(
            f"{MODULE}: {path} has no env() or parallel_env(); name a PettingZoo env module "
            "such as pettingzoo.classic.connect_four_v3 or mpe2.simple_spread_v3"
        )
    if api == "auto":
        kind = "parallel" if "parallel" in found else "aec"
        return found[kind], kind
    if api not in found:
        other = next(iter(found))
        raise ConfigError(f"{API}: {path} has no {'parallel_env' if api == 'parallel' else 'env'}(); use api: {other} or auto")
    return found[api], api  # type: ignore[return-value]


def construct(factory: Callable[..., Any], kind: Api, kwargs: Mapping[str, Any], path: str) -> Any:
    """``factory(**kwargs)``; a constructor that rejects the kwargs is a ConfigError."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    try:
        env = factory(**kwargs)
    except (TypeError, ValueError, AssertionError, KeyError) as exc:
        name = getattr(factory, "__name__", "env")
        raise ConfigError(f"{KWARGS}: {path}.{name}(**{dict(kwargs)!r}) failed: {type(exc).__name__}: {exc}") from None
    expected = AECEnv if kind == "aec" else ParallelEnv
    if not isinstance(env, expected):
        raise ConfigError(f"{MODULE}: {path} made a {type(env).__name__}, not a PettingZoo {expected.__name__}")
    return env
