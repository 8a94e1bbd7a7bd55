"""Bad ``env.params`` are ConfigErrors that name the field and, where it helps, the fix."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import popmarl
import pytest
from popmarl.errors import ConfigError
from popmarl_pettingzoo import PettingZooEnv
from popmarl_pettingzoo.loading import install_hint

pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")


def _error(**params: Any) -> str:
    with pytest.raises(ConfigError) as error:
        PettingZooEnv(**params)
    return str(error.value)


def test_unknown_module_suggests_the_closest_name() -> None:
    message = _error(module="pettingzoo.classic.tictactoe_v2")
    assert message == "env.params.module: no module named 'pettingzoo.classic.tictactoe_v2' (did you mean 'tictactoe_v3'?)"


def test_missing_family_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("mpe2.")]:  # imported by an earlier test (README configs)
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mpe2", None)  # as if mpe2 were not installed
    message = _error(module="mpe2.simple_spread_v3")
    assert message.startswith("env.params.module: no module named 'mpe2'") and "pip install mpe2" in message


def test_missing_dependency_names_the_pettingzoo_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("pettingzoo.butterfly.pistonball")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pymunk", None)  # as if pettingzoo[butterfly] were not installed
    message = _error(module="pettingzoo.butterfly.pistonball_v6")
    assert message.startswith("env.params.module: importing pettingzoo.butterfly.pistonball_v6 needs the missing "
                              "module 'pymunk'")
    assert message.endswith('install it with: pip install "pettingzoo[butterfly]"')


def test_a_bare_env_name_suggests_its_full_module_path() -> None:
    assert "(did you mean 'pettingzoo.classic.rps_v2'?)" in _error(module="rps_v2")
    assert "(did you mean 'pettingzoo.classic.tictactoe_v3'?)" in _error(module="tictactoe")
    assert "(did you mean 'mpe2.simple_spread_v3'?)" in _error(module="simple_spread_v3")
    assert "did you mean" not in _error(module="blotto")


def test_moved_families_point_to_their_new_package() -> None:
    assert "pip install mpe2" in _error(module="pettingzoo.mpe.simple_spread_v3")
    assert install_hint("pettingzoo.sisl.waterworld_v4") == 'pip install "pettingzoo[sisl]"'
    assert install_hint("mypackage.envs") is None


def test_objects_that_make_no_env() -> None:
    assert _error(module="numpy").startswith("env.params.module: numpy has no env() or parallel_env()")
    assert "has no attribute 'nothing'" in _error(module="pettingzoo.classic.rps_v2:nothing")
    assert "not an AECEnv or ParallelEnv subclass" in _error(module="popmarl_pettingzoo.env:PettingZooConfig")


def test_constructor_rejecting_kwargs() -> None:
    message = _error(module="pettingzoo.classic.connect_four_v3", kwargs={"board": 9})
    assert message.startswith("env.params.kwargs: pettingzoo.classic.connect_four_v3.env(**{'board': 9}) failed: "
                              "TypeError:")


def test_api_that_the_module_lacks() -> None:
    assert _error(module="pettingzoo.classic.tictactoe_v3", api="parallel").startswith(
        "env.params.api: pettingzoo.classic.tictactoe_v3 has no parallel_env(); use api: aec or auto")


def test_env_classes_by_import_path() -> None:
    env = PettingZooEnv(module="pettingzoo.classic.tictactoe.tictactoe:raw_env")
    assert env.api == "aec" and env.agents == ("player_1", "player_2")
    assert "is an AEC env class, not parallel" in _error(module="pettingzoo.classic.tictactoe.tictactoe:raw_env", api="parallel")


def test_every_bad_field_is_reported_at_once(write_config: Callable[..., Path]) -> None:
    config = write_config(env={"name": "pettingzoo", "params": {
        "game": None, "module": "not a module", "api": "aecc", "max_steps": 0, "kwargs": [1], "has_chance": "yes"}})
    with pytest.raises(ConfigError) as error:
        popmarl.load_config(config)
    problems = error.value.problems
    assert any(p.startswith("env.params.module: must be an import path") for p in problems)
    assert any(p.startswith("env.params.api: 'aecc' is not allowed (did you mean 'aec'?)") for p in problems)
    assert "env.params.max_steps: must be >= 1, got 0" in problems
    assert "env.params.kwargs: must be a mapping, got [1]" in problems
    assert any(p.startswith("env.params.has_chance: ") for p in problems), problems


def test_cli_prints_one_line_and_exits_2(write_config: Callable[..., Path], run_cli: Callable[..., Any]) -> None:
    config = write_config(env={"name": "pettingzoo", "params": {"game": None, "module": "pettingzoo.classic.tictactoe_v2"}},
                          algorithm={"name": "random"})
    result = run_cli("run", config, "--out", "runs/bad")
    assert result.returncode == 2, result
    assert "env.params.module: no module named 'pettingzoo.classic.tictactoe_v2'" in result.stderr
    assert "Traceback" not in result.stderr
