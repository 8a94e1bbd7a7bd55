"""Fixtures of the tianshou plugin tests (helpers live in tianshou_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from tianshou_helpers import BoxGame

import popmarl


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    """Small networks are fastest on one thread, and the test machine's cores are shared."""
    torch.set_num_threads(1)


@pytest.fixture
def box_game(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Registers the test env ``box_game`` (Box actions, sampled evaluation) for one test."""
    monkeypatch.setattr(popmarl, "envs", popmarl.envs.with_component("box_game", BoxGame))
    yield "box_game"
