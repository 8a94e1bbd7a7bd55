"""Config validation (popmarl.config.schema, popmarl.config.conversion), in process. The same errors seen
through the real command line are in test_cli_errors.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import popmarl
from popmarl.config.loading import apply_overrides
from popmarl.config.schema import RunConfig, dump, validate
from popmarl.errors import ConfigError

BASE = {"env": {"name": "matrix", "params": {"game": "rps"}}, "algorithm": "exact_matrix_br"}


def problems(raw: object) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate(raw)
    assert str(caught.value) == "; ".join(caught.value.problems)
    return caught.value.problems


def test_minimal_config_gets_every_default_resolved() -> None:
    config = validate(BASE)
    assert isinstance(config, RunConfig)
    assert config.scenario.name == "psro" and config.solver.name == "uniform" and config.backend.name == "local"
    assert [t.name for t in config.trackers] == ["console"]
    assert config.agents.mapping == "per_player"
    # params are validated against the component's Config and its defaults filled in
    assert {k: config.env.params[k] for k in ("game", "size", "players", "seed", "path")} == {
        "game": "rps", "size": 3, "players": 2, "seed": 0, "path": None}
    assert config.algorithm.params["initial"] == "first"


def test_bare_names_and_mappings_are_the_same_component() -> None:
    a = validate({**BASE, "solver": "latest", "trackers": ["jsonl"]})
    b = validate({**BASE, "solver": {"name": "latest"}, "trackers": [{"name": "jsonl"}]})
    assert a == b


def test_the_dumped_config_validates_to_itself() -> None:
    config = validate({**BASE, "seed": 7, "stopping": {"max_iterations": 4}, "trackers": ["jsonl"]})
    assert validate(yaml.safe_load(dump(config))) == config


@pytest.mark.parametrize(("raw", "expected"), [
    ({**BASE, "stoping": {}}, "stoping: unknown key (did you mean 'stopping'?)"),
    ({**BASE, "stopping": {"max_iteration": 3}}, "stopping.max_iteration: unknown key (did you mean 'max_iterations'?)"),
    ({**BASE, "stopping": {"max_iterations": "ten"}}, "stopping.max_iterations: must be an integer, got 'ten'"),
    ({**BASE, "stopping": {"max_iterations": -1}}, "stopping.max_iterations: must be >= 0, got -1"),
    ({**BASE, "stopping": {"max_iterations": 2.5}}, "stopping.max_iterations: must be an integer, got 2.5"),
    ({**BASE, "stopping": {"max_iterations": True}}, "stopping.max_iterations: must be an integer, got True"),
    ({**BASE, "stopping": {"target_nash_conv": -0.1}}, "stopping.target_nash_conv: must be >= 0"),
    ({**BASE, "evaluation": {"episodes_per_entry": 0}}, "evaluation.episodes_per_entry: must be >= 1, got 0"),
    ({**BASE, "evaluation": {"exact": "always"}}, "evaluation.exact: 'always' is not allowed"),
    ({**BASE, "seed": "abc"}, "seed: must be an integer"),
    ({**BASE, "stopping": [1, 2]}, "stopping: must be a mapping"),
    ({**BASE, "trackers": "jsonl"}, "trackers: must be a list"),
    ({"algorithm": "random"}, "env: required"),
    ({**BASE, "env": {"name": "matrix", "params": {"gaem": "rps"}}}, "env.params.gaem: unknown key (did you mean 'game'?)"),
    ({**BASE, "env": {"name": "matrix", "params": {"game": "rsp"}}}, "env.params.game: 'rsp' is not allowed (did you mean 'rps'?)"),
    ({**BASE, "env": {"name": "matrix", "params": {"size": 0}}}, "env.params.size: must be >= 1, got 0"),
    ({**BASE, "env": "gridworld"}, "env.name: unknown env 'gridworld'"),
    ({**BASE, "solver": "no_such_solver"}, "solver.name: unknown solver 'no_such_solver'"),
    ({**BASE, "trackers": ["console", "tensorbord"]}, "trackers[1].name: unknown tracker 'tensorbord'"),
    ({**BASE, "trackers": [{"name": "console", "params": {"stream": "stdin"}}]}, "trackers[0].params.stream"),
])
def test_each_problem_names_its_dotted_path(raw: dict, expected: str) -> None:
    found = problems(raw)
    assert any(expected in p for p in found), found


def test_every_problem_is_reported_at_once() -> None:
    raw = {
        "env": {"name": "matrix", "params": {"game": "rsp", "size": -2}},
        "algorithm": "exact_matrix_br",
        "solver": "no_such_solver",
        "stoping": {},
        "stopping": {"max_iterations": "ten"},
        "evaluation": {"episodes_per_entry": 0},
    }
    found = problems(raw)
    for path in ("stoping", "stopping.max_iterations", "evaluation.episodes_per_entry", "env.params.game",
                 "env.params.size", "solver.name"):
        assert any(p.startswith(path + ":") for p in found), (path, found)
    assert len(found) == 6, found


def test_component_problems_are_collected_together() -> None:
    found = problems({"env": {"name": "matrix", "params": {"game": "rsp", "size": -2}},
                      "algorithm": "no_such_algorithm", "solver": "no_such_solver"})
    for path in ("env.params.game", "env.params.size", "algorithm.name", "solver.name"):
        assert any(p.startswith(path + ":") for p in found), (path, found)


@pytest.mark.parametrize("raw", [[1, 2], "text", 3])
def test_a_config_must_be_a_mapping(raw: object) -> None:
    assert "must be a mapping" in problems(raw)[0]


def test_overrides_are_dotted_and_yaml_typed() -> None:
    raw = apply_overrides(BASE, ["stopping.max_iterations=7", "seed=3", "env.params.game=matching_pennies",
                                 "solver=latest", "stopping.target_nash_conv=1.0e-3", "trackers=[jsonl]"])
    config = validate(raw)
    assert config.stopping.max_iterations == 7 and config.seed == 3
    assert config.env.params["game"] == "matching_pennies"
    assert config.solver.name == "latest" and config.stopping.target_nash_conv == 0.001
    assert [t.name for t in config.trackers] == ["jsonl"]
    assert BASE["env"]["params"]["game"] == "rps", "overrides do not modify their input"


def test_override_into_a_bare_component_name() -> None:
    raw = apply_overrides({**BASE, "algorithm": "exact_matrix_br"}, ["algorithm.params.initial=uniform"])
    assert validate(raw).algorithm == validate({**BASE, "algorithm": {"name": "exact_matrix_br",
                                                                     "params": {"initial": "uniform"}}}).algorithm


@pytest.mark.parametrize("null", ["null", "", "~"])
def test_null_unsets_a_key_unless_null_is_one_of_its_values(null: str) -> None:
    """``--set KEY=null`` undoes what a config sets: the default applies (a component, a
    section, a value, a param); a key that takes null (an optional cap) is set to it."""
    raw = {**BASE, "solver": {"name": "latest"}, "backend": "local", "evaluation": {"episodes_per_entry": 7},
           "stopping": {"max_iterations": 4, "target_nash_conv": 0.5}, "algorithm": {
               "name": "exact_matrix_br", "params": {"initial": "uniform"}}}
    keys = ["solver", "backend", "evaluation.episodes_per_entry", "stopping.target_nash_conv", "trackers",
            "algorithm.params.initial", "seed"]
    config = validate(apply_overrides(raw, [f"{key}={null}" for key in keys]))
    assert config == validate({**BASE, "stopping": {"max_iterations": 4}})
    assert config.solver == RunConfig.__attrs_attrs__.solver.default and config.stopping.target_nash_conv is None
    assert validate(apply_overrides(raw, [f"stopping.max_iterations={null}"])).stopping.max_iterations is None
    with pytest.raises(ConfigError, match=r"^env: required$"):
        validate(apply_overrides(raw, [f"env={null}"]))


@pytest.mark.parametrize(("override", "message"), [
    ("stopping.max_iterations", "expected KEY=VALUE"),
    ("=3", "expected KEY=VALUE"),
    ("seed=[1", "not valid YAML"),
    ("env.name.x=1", "env.name is not a mapping"),
])
def test_bad_overrides(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_overrides(BASE, [override])


def test_load_config_reads_yaml_and_applies_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(BASE))
    config = popmarl.load_config(str(path), ["stopping.max_iterations=2"])
    assert config.stopping.max_iterations == 2


@pytest.mark.parametrize(("text", "message"), [
    ("env: [unclosed", "invalid YAML at line 1"),
    ("", "empty"),
    ("- a\n- b\n", "must be a mapping of top-level keys, got list"),
])
def test_load_config_refuses_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        popmarl.load_config(str(path))


def test_load_config_refuses_missing_files_and_directories(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        popmarl.load_config(str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigError, match="is a directory"):
        popmarl.load_config(str(tmp_path))
