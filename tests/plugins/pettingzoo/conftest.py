"""Fixtures of the pettingzoo plugin tests (the guards themselves live in ``pz_guards``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from pz_guards import Ledger, guarded_module, random_actions


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    """A fresh :class:`Ledger`, with ``pz_guard`` importable for this test."""
    book = Ledger()
    monkeypatch.setitem(sys.modules, "pz_guard", guarded_module(book))
    yield book


@pytest.fixture
def play() -> Callable[..., list[tuple[int, np.ndarray, bool]]]:
    """``play(env, vec, steps, seed=0)``: step ``vec`` with random legal actions; return
    every finished episode as ``(copy, returns, truncated)``, in order."""

    def run(env: Any, vec: Any, steps: int, seed: int = 0) -> list[tuple[int, np.ndarray, bool]]:
        rng = np.random.default_rng(seed)
        step = vec.reset()
        done: list[tuple[int, np.ndarray, bool]] = []
        for _ in range(steps):
            step = vec.step(random_actions(env, step, rng))
            done.extend(zip(step.finished.tolist(), step.returns, step.truncated.tolist()))
        return done

    return run
