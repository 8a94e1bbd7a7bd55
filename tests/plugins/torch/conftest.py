"""Fixtures of the popmarl-torch tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    """Small networks are fastest on one thread, and the test machine's cores are shared."""
    torch.set_num_threads(1)
