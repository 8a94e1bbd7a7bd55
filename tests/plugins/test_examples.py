"""Every config under examples/ is a valid config for the installed plugins."""

from __future__ import annotations

from pathlib import Path

import pytest

import popmarl

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_config_is_valid(path: Path) -> None:
    config = popmarl.load_config(path)
    assert config.scenario.name in popmarl.scenarios.names()
