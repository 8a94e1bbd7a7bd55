"""Fixtures of the core tests: throwaway installed distributions, in-process runs."""

from __future__ import annotations

import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest


@attrs.frozen
class FakeDist:
    """A distribution "installed" into a directory of its own: ``NAME-VERSION.dist-info``
    (``METADATA`` + ``entry_points.txt``) next to its modules. Put :attr:`site` on
    ``sys.path`` (or ``PYTHONPATH``) and :mod:`importlib.metadata` finds it."""

    site: Path
    name: str
    version: str


@pytest.fixture
def make_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeDist]]:
    """``make_dist(name, entry_points={group: {name: "module:attr"}}, modules={module: source},
    version="1.0", on_path=True)`` creates a :class:`FakeDist`; with ``on_path`` it is put on
    ``sys.path`` for the test. Its modules are dropped from ``sys.modules`` afterwards."""
    created: list[str] = []

    def make(name: str, *, entry_points: Mapping[str, Mapping[str, str]], modules: Mapping[str, str] | None = None,
             version: str = "1.0", on_path: bool = True) -> FakeDist:
        site = tmp_path / f"site-{name}"
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
        lines = []
        for group, entries in entry_points.items():
            lines.append(f"[{group}]")
            lines.extend(f"{key} = {target}" for key, target in entries.items())
            lines.append("")
        (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
        for module, source in (modules or {}).items():
            (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
            created.append(module)
        if on_path:
            monkeypatch.syspath_prepend(str(site))
        return FakeDist(site, name, version)

    yield make
    for module in created:
        sys.modules.pop(module, None)


@pytest.fixture(scope="session")
def runner_in(config_writer: Callable[..., Path]) -> Callable[..., dict[str, Any]]:
    """``run_in(directory, out="run", overrides=(), resume=None, **config)``: write a config
    into ``directory`` (BASE_CONFIG merged with ``config``), run it with :func:`popmarl.run`
    in this process into ``directory/out`` (or continue ``directory/resume``) and return
    the summary."""
    import popmarl

    configs = itertools.count()

    def run_in(directory: Path, out: str | Path = "run", overrides: Sequence[str] = (),
               resume: str | Path | None = None, **config: Any) -> dict[str, Any]:
        name = f"config-{next(configs)}.yaml"
        loaded = popmarl.load_config(str(config_writer(directory, name, **config)), list(overrides))
        if resume is not None:
            return popmarl.run(loaded, resume=str(Path(directory) / resume))
        return popmarl.run(loaded, out=str(Path(directory) / out))

    return run_in


@pytest.fixture
def run_inprocess(tmp_path: Path, runner_in: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``run_inprocess(out="run", overrides=(), resume=None, **config)``: ``run_in(tmp_path, ...)``."""

    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return runner_in(tmp_path, *args, **kwargs)

    return run
