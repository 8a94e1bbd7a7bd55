"""Configs these algorithms cannot work with fail in one line naming the key, before
anything is written: value mixing on Box actions or a zero-sum game, a bad parameter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import popmarl
from popmarl.errors import ConfigError
from testkit.team_configs import SPREAD, box, marl_config


def _refused(config: dict[str, Any], tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        popmarl.run(popmarl.validate(config), out=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("algorithm", ["vdn", "qmix"])
def test_value_mixing_on_box_actions_is_refused(algorithm: str, tmp_path: Path) -> None:
    message = _refused(marl_config(algorithm, box(SPREAD)), tmp_path)
    assert message.startswith(f"algorithm: {algorithm} needs discrete actions, and population agent_0 acts in Box(")
    assert message.endswith("use mappo (discrete or Box actions)")


def test_value_mixing_on_a_zero_sum_game_is_refused(tmp_path: Path) -> None:
    config = {**marl_config("qmix", SPREAD), "env": {"name": "matrix", "params": {"game": "matching_pennies"}}}
    assert _refused(config, tmp_path) == ("algorithm: qmix trains a cooperative team on its seats' summed reward, and "
                                          "env MatrixEnv is two-player zero-sum; use dqn, ppo or mappo")


@pytest.mark.parametrize(("param", "value", "expected"), [
    ("critic", "central", r"^algorithm\.params\.critic: .*'central'"),
    ("value_norm", "batch", r"^algorithm\.params\.value_norm: .*'batch'"),
    ("clip", -1.0, r"^algorithm\.params\.clip: "),
])
def test_a_bad_mappo_parameter_names_its_key(param: str, value: Any, expected: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=expected):
        popmarl.validate(marl_config("mappo", SPREAD, **{param: value}))


def test_a_bad_qmix_parameter_names_its_key() -> None:
    with pytest.raises(ConfigError, match=r"^algorithm\.params\.mixing_embed_dim: "):
        popmarl.validate(marl_config("qmix", SPREAD, mixing_embed_dim=0))
    with pytest.raises(ConfigError, match=r"^algorithm\.params\.critic: unknown key; allowed: lr, "):
        popmarl.validate(marl_config("vdn", SPREAD, critic="shared"))
