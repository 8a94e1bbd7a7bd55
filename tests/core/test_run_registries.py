"""``popmarl.run(config, out, registries=...)``: a component registered in this process
only (``Registry.with_component``, as in a notebook) is used by config validation and by
the run, without touching the module-level ``popmarl.<kind>`` registries."""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import pytest

import popmarl
from popmarl.errors import ConfigError, UnknownComponentError
from popmarl.gametheory.metagame import check_payoffs

from testkit.run_files import read_summary


class FirstHeavy(popmarl.MetaSolver):
    """``first_heavy``: weight ``first`` on each population's first policy, the rest
    spread evenly (test only)."""

    @attrs.frozen(kw_only=True)
    class Config:
        first: float = 0.5

    calls = 0

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        FirstHeavy.calls += 1
        mixtures = []
        for n in check_payoffs(payoffs).shape[1:]:
            if n == 1:
                mixtures.append(np.ones(1))
                continue
            m = np.full(n, (1.0 - self.config.first) / (n - 1))
            m[0] = self.config.first
            mixtures.append(m)
        return tuple(mixtures)


CONFIG = {"solver": {"name": "first_heavy", "params": {"first": 0.7}}, "stopping": {"max_iterations": 2}}


def test_run_uses_a_component_registered_with_with_component(write_config, tmp_path: Path) -> None:
    solvers = popmarl.solvers.with_component("first_heavy", FirstHeavy)
    path = write_config(**CONFIG)
    config = popmarl.load_config(str(path), registries={"solvers": solvers})
    assert config.solver.params == {"first": 0.7}
    FirstHeavy.calls = 0
    summary = popmarl.run(config, out=str(tmp_path / "run"), registries={"solvers": solvers})
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert FirstHeavy.calls == 3  # the initial meta-game and one per iteration
    for population in summary["populations"].values():
        assert population["meta_strategy"] == pytest.approx([0.7, 0.15, 0.15])
    assert read_summary(tmp_path / "run")["status"] == "completed"
    assert "first_heavy" not in popmarl.solvers  # the module-level registry is unchanged


def test_a_registries_object_serves_validation_and_the_run(tmp_path: Path) -> None:
    found = popmarl.Registries.current().with_component("solvers", "first_heavy", FirstHeavy)
    config = popmarl.validate({**CONFIG, "env": {"name": "matrix", "params": {"game": "rps"}},
                               "algorithm": "exact_matrix_br", "trackers": []}, registries=found)
    summary = popmarl.run(config, out=str(tmp_path / "run"), registries=found)
    assert summary["populations"]["player_0"]["meta_strategy"] == pytest.approx([0.7, 0.15, 0.15])


def test_params_of_an_extra_component_are_validated(write_config) -> None:
    solvers = popmarl.solvers.with_component("first_heavy", FirstHeavy)
    path = write_config(solver={"name": "first_heavy", "params": {"frist": 0.7}})
    with pytest.raises(ConfigError, match=r"solver\.params\.frist: unknown key.*did you mean 'first'"):
        popmarl.load_config(str(path), registries={"solvers": solvers})


def test_without_the_registries_the_name_is_unknown(write_config, tmp_path: Path) -> None:
    path = write_config(**CONFIG)
    with pytest.raises(ConfigError, match=r"solver\.name: unknown solver 'first_heavy'"):
        popmarl.load_config(str(path))
    config = popmarl.load_config(str(path), registries={"solvers": popmarl.solvers.with_component(
        "first_heavy", FirstHeavy)})
    with pytest.raises(UnknownComponentError, match="unknown solver 'first_heavy'"):
        popmarl.run(config, out=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_registries_refuse_a_registry_of_another_kind() -> None:
    with pytest.raises(ValueError, match=r"registries\['solvers'\]: must be a Registry of kind 'solvers'"):
        popmarl.Registries.of({"solvers": popmarl.envs})
    with pytest.raises(ValueError, match="unknown registry kind 'widgets'"):
        popmarl.Registries.of({"widgets": popmarl.envs})
