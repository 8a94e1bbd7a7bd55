"""Bad configs and bad command lines, each through the real ``popmarl`` command line in a
subprocess: exit status 2, one line on stderr (no traceback) naming the offending key or
value, nothing on stdout, and nothing written anywhere (the whole workspace, the --out
directory included, is byte-for-byte unchanged)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import popmarl
from popmarl.plugins.registry import installed

from testkit.run_files import tree_digest

OPENSPIEL_INSTALLED = "openspiel" in popmarl.envs.names()


def hint(distribution: str) -> tuple[str, ...]:
    """The install hint an unknown name's error gives for ``distribution``: only where it is
    not installed (test_registry checks that an installed one is never named)."""
    return () if installed(distribution) else (f"./plugins/{distribution}",)


class Workspace:
    """What a case may prepare in its temporary directory before the command runs."""

    def __init__(self, root: Path, write_config_in: Callable[..., Path], run_in: Callable[..., dict]) -> None:
        self.root = root
        self.out = root / "out"
        self._write_config_in = write_config_in
        self._run_in = run_in

    def config(self, **overrides: object) -> Path:
        return self._write_config_in(self.root, "config.yaml", **overrides)

    def file(self, name: str, text: str | bytes) -> Path:
        path = self.root / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    def finished_run(self, name: str = "done", **overrides: object) -> Path:
        self._run_in(self.root, out=name, **{"stopping": {"max_iterations": 1}, **overrides})
        return self.root / name


CASES = []


def case(*expected: str):
    """Register a case: a function building the command line; ``expected``: substrings the
    one-line error must contain."""
    def register(build: Callable[[Workspace], list]) -> Callable[[Workspace], list]:
        CASES.append(pytest.param(build, expected, id=build.__name__))
        return build
    return register


# -- the config file itself -----------------------------------------------------------------

@case("bad.yaml", "invalid YAML at line")
def malformed_yaml(ws):
    return ["run", ws.file("bad.yaml", "env: matrix\nalgorithm: [random\n"), "--out", ws.out]


@case("empty.yaml", "empty")
def empty_file(ws):
    return ["run", ws.file("empty.yaml", ""), "--out", ws.out]


@case("list.yaml", "must be a mapping", "list")
def top_level_list(ws):
    return ["run", ws.file("list.yaml", "- env: matrix\n- algorithm: random\n"), "--out", ws.out]


@case("nope.yaml", "no such config file")
def missing_file(ws):
    return ["run", ws.root / "nope.yaml", "--out", ws.out]


@case("configs", "is a directory")
def directory_as_config(ws):
    (ws.root / "configs").mkdir()
    return ["run", ws.root / "configs", "--out", ws.out]


@case("binary.yaml", "cannot read")
def undecodable_file(ws):
    return ["run", ws.file("binary.yaml", b"\xff\xfe\x00garbage\x80"), "--out", ws.out]


# -- keys and values ------------------------------------------------------------------------

@case("stoping", "unknown key", "did you mean 'stopping'?")
def unknown_top_level_key(ws):
    return ["run", ws.config(stoping={"max_iterations": 2}), "--out", ws.out]


@case("stopping.max_iteration", "unknown key", "did you mean 'max_iterations'?")
def misspelled_nested_key(ws):
    return ["run", ws.config(stopping={"max_iteration": 2}), "--out", ws.out]


@case("stopping.max_iterations", "integer", "'ten'")
def string_for_int(ws):
    return ["run", ws.config(stopping={"max_iterations": "ten"}), "--out", ws.out]


@case("stopping.max_iterations", ">= 0", "-1")
def negative_max_iterations(ws):
    return ["run", ws.config(stopping={"max_iterations": -1}), "--out", ws.out]


@case("evaluation.episodes_per_entry", ">= 1", "0")
def zero_episodes_per_entry(ws):
    return ["run", ws.config(evaluation={"episodes_per_entry": 0}), "--out", ws.out]


@case("evaluation.exact", "'always'", "auto", "never")
def value_outside_a_literal(ws):
    return ["run", ws.config(evaluation={"exact": "always"}), "--out", ws.out]


@case("env: required")
def missing_required_key(ws):
    return ["run", ws.config(env=None), "--out", ws.out]


# -- component names ------------------------------------------------------------------------

@case("env.name", "unknown env 'gridworld'", "matrix", *hint("popmarl-openspiel"))
def unknown_env(ws):
    return ["run", ws.config(env={"name": "gridworld"}), "--out", ws.out]


@case("env.name", "matrix", *hint("popmarl-openspiel"))
def unknown_env_openspiel(ws):
    # Where the openspiel plugin is installed, 'openspiel' is known: a near miss must then
    # still point at it.
    name = "open_spiel" if OPENSPIEL_INSTALLED else "openspiel"
    return ["run", ws.config(env={"name": name, "params": {}}), "--out", ws.out]


@case("algorithm.name", "unknown algorithm 'dqnn'", "exact_matrix_br", "random")
def unknown_algorithm(ws):
    return ["run", ws.config(algorithm={"name": "dqnn"}), "--out", ws.out]


@case("solver.name", "unknown solver 'no_such_solver'", "uniform", "latest", *hint("popmarl-solvers"))
def unknown_solver(ws):
    return ["run", ws.config(solver={"name": "no_such_solver"}), "--out", ws.out]


@case("backend.name", "unknown backend 'rey'", "local")
def unknown_backend(ws):
    return ["run", ws.config(backend={"name": "rey"}), "--out", ws.out]


@case("trackers[1].name", "unknown tracker 'tensorbord'", "console", "jsonl")
def unknown_tracker(ws):
    return ["run", ws.config(trackers=["console", "tensorbord"]), "--out", ws.out]


@case("scenario.name", "unknown scenario 'psr0'", "psro", "did you mean 'psro'?")
def unknown_scenario(ws):
    return ["run", ws.config(scenario="psr0"), "--out", ws.out]


# -- component params -----------------------------------------------------------------------

@case("env.params.gaem", "unknown key", "did you mean 'game'?")
def unknown_params_key(ws):
    return ["run", ws.config(env={"params": {"gaem": "rps"}}), "--out", ws.out]


@case("env.params.game", "'rsp'", "did you mean 'rps'?")
def bad_param_value(ws):
    return ["run", ws.config(env={"params": {"game": "rsp"}}), "--out", ws.out]


@case("algorithm.params.initial", "'best'", "first", "uniform")
def bad_algorithm_param(ws):
    return ["run", ws.config(algorithm={"params": {"initial": "best"}}), "--out", ws.out]


# -- per-population algorithms (``name: None`` drops BASE_CONFIG's one component) ----------

@case("algorithm.player_2: no such population", "the populations are player_0, player_1")
def algorithm_for_an_unknown_population(ws):
    return ["run", ws.config(algorithm={"name": None, "player_0": "exact_matrix_br", "player_1": "random",
                                        "player_2": "random"}), "--out", ws.out]


@case("algorithm: no algorithm for population(s) player_1", "the populations are player_0, player_1")
def algorithm_missing_a_population(ws):
    return ["run", ws.config(algorithm={"name": None, "player_0": "exact_matrix_br"}), "--out", ws.out]


@case("algorithm.player_1.params.initial", "'best'", "first", "uniform")
def bad_param_of_one_population(ws):
    return ["run", ws.config(algorithm={"name": None, "player_0": "random",
                                        "player_1": {"name": "exact_matrix_br", "params": {"initial": "best"}}}),
            "--out", ws.out]


@case("env.params.path", "required")
def matrix_file_without_path(ws):
    return ["run", ws.config(env={"params": {"game": "file"}}), "--out", ws.out]


@case("env.params.path", "no such file", "missing.npy")
def matrix_file_missing(ws):
    return ["run", ws.config(env={"params": {"game": "file", "path": str(ws.root / "missing.npy")}}), "--out", ws.out]


@case("env.params.path", "garbage.npy", "not a .npy")
def matrix_file_not_npy(ws):
    path = ws.file("garbage.npy", b"this is not numpy at all")
    return ["run", ws.config(env={"params": {"game": "file", "path": str(path)}}), "--out", ws.out]


@case("env.params.path", "flat.npy", "shape", "(3, 3)")
def matrix_file_wrong_shape(ws):
    np.save(ws.root / "flat.npy", np.zeros((3, 3)))
    return ["run", ws.config(env={"params": {"game": "file", "path": str(ws.root / "flat.npy")}}), "--out", ws.out]


@case("env.params.path", "pickled.npy")
def matrix_file_pickled(ws):
    np.save(ws.root / "pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return ["run", ws.config(env={"params": {"game": "file", "path": str(ws.root / "pickled.npy")}}), "--out", ws.out]


@case("env.params.players", "random_zero_sum", "2 players")
def random_zero_sum_three_players(ws):
    return ["run", ws.config(env={"params": {"game": "random_zero_sum", "players": 3}}), "--out", ws.out]


# -- agents ---------------------------------------------------------------------------------

@case("agents.mapping", "'per_agent'", "per_player", "shared")
def bad_mapping_string(ws):
    return ["run", ws.config(agents={"mapping": "per_agent"}), "--out", ws.out]


@case("agents.mapping", "player_1")
def mapping_leaves_an_agent_unmapped(ws):
    return ["run", ws.config(agents={"mapping": {"player_0": "left", "nobody_.*": "right"}}), "--out", ws.out]


@case("agents.mapping", "letters, digits")
def mapping_to_a_bad_population_name(ws):
    return ["run", ws.config(agents={"mapping": {"player_.*": "a b"}}), "--out", ws.out]


@case("training.self_play", "applies to scenario psro only")
def psro_only_training_key_in_a_marl_run(ws):
    return ["run", ws.config(scenario="marl", training={"self_play": 0.5}), "--out", ws.out]


@case("training.window", "keep: best", "at most 32, got 100")
def keep_best_with_a_window_no_version_fills(ws):
    return ["run", ws.config(training={"keep": "best", "episodes_per_update": 32}), "--out", ws.out]


@case("training", "min_env_steps (50000) exceeds max_env_steps (20000)")
def plateau_floor_above_the_cap(ws):
    return ["run", ws.config(training={"min_env_steps": 50000, "max_env_steps": 20000, "patience": 3}), "--out", ws.out]


@case("training.patience", "applies to scenario psro only")
def plateau_rule_in_a_marl_run(ws):
    return ["run", ws.config(scenario="marl", training={"patience": 3}), "--out", ws.out]


@case("stopping.target_nash_conv", "applies to scenario psro only")
def target_nash_conv_in_a_marl_run(ws):
    return ["run", ws.config(scenario="marl", stopping={"target_nash_conv": 0.1}), "--out", ws.out]


@case("solver", "applies to scenario psro only")
def solver_in_a_marl_run(ws):
    return ["run", ws.config(scenario="marl", solver="latest"), "--out", ws.out]


@case("scenario.params.frozen", "unknown population", "player_7", "player_0")
def marl_freezes_an_unknown_population(ws):
    return ["run", ws.config(scenario={"name": "marl", "params": {"frozen": {"player_7": "initial"}}}), "--out", ws.out]


# -- several at once ------------------------------------------------------------------------

@case("stoping", "stopping.max_iterations", "evaluation.episodes_per_entry", "env.params.game", "solver.name")
def several_problems_in_one_message(ws):
    return ["run", ws.config(stoping={}, stopping={"max_iterations": "ten"}, evaluation={"episodes_per_entry": 0},
                             env={"params": {"game": "rsp"}}, solver="no_such_solver"), "--out", ws.out]


# -- the command line -----------------------------------------------------------------------

@case("--set", "KEY=VALUE", "stopping.max_iterations")
def set_without_equals(ws):
    return ["run", ws.config(), "--set", "stopping.max_iterations", "--out", ws.out]


@case("stopping.max_iter", "unknown key", "did you mean 'max_iterations'?")
def set_unknown_key(ws):
    return ["run", ws.config(), "--set", "stopping.max_iter=5", "--out", ws.out]


@case("--set seed", "not valid YAML")
def set_bad_yaml_value(ws):
    return ["run", ws.config(), "--set", "seed=[1", "--out", ws.out]


@case("--set env.name.game", "env.name is not a mapping")
def set_through_a_scalar(ws):
    return ["run", ws.config(), "--set", "env.name.game=rps"]


@case("--resume", "nowhere", "no such run directory")
def resume_missing_dir(ws):
    return ["run", ws.config(), "--resume", ws.root / "nowhere"]


@case("--resume", "not a run directory")
def resume_a_dir_that_is_not_a_run(ws):
    (ws.root / "empty").mkdir()
    return ["run", ws.config(), "--resume", ws.root / "empty"]


@case("--resume", "differs from the run's config in: seed", "popmarl run --resume")
def resume_with_a_different_config(ws):
    done = ws.finished_run()
    return ["run", ws.config(seed=5), "--resume", done]


@case("--resume", "differs from the run's config in: env.params.game")
def resume_with_a_different_game(ws):
    done = ws.finished_run()
    return ["run", ws.config(env={"params": {"game": "matching_pennies"}}), "--resume", done]


@case("--resume", "differs from the run's config in: stopping.max_iterations;", "--set stopping.max_iterations=N")
def resume_with_a_config_whose_stopping_differs(ws):
    # The README's `run CONFIG --set stopping.max_iterations=1 --out D` then `run CONFIG --resume D`
    # would otherwise re-read max_iterations from the file and run on.
    done = ws.finished_run()
    return ["run", ws.config(stopping={"max_iterations": 5}), "--resume", done]


@case("--resume", "different config", "differs in: seed", "only stopping and trackers may change")
def resume_setting_a_key_that_is_not_stopping(ws):
    done = ws.finished_run()
    return ["run", "--resume", done, "--set", "seed=5"]


@case("--out", "already holds a run", "--resume")
def out_already_holds_a_run(ws):
    done = ws.finished_run()
    return ["run", ws.config(), "--out", done]


@case("--out", "not a directory")
def out_is_a_file(ws):
    return ["run", ws.config(), "--out", ws.file("taken", "x")]


@case("--out", "--resume", "exclusive")
def out_and_resume_together(ws):
    done = ws.finished_run()
    return ["run", ws.config(), "--resume", done, "--out", ws.out]


@case("invalid choice", "'fly'")
def unknown_subcommand(ws):
    return ["fly", "--out", ws.out]


@case("run", "a CONFIG is required", "--resume")
def run_without_a_config(ws):
    return ["run", "--out", ws.out]


@case("unrecognized arguments", "--outt")
def unknown_option(ws):
    return ["run", ws.config(), "--outt", ws.out]


@case("nothing-here", "no such run directory")
def show_missing_dir(ws):
    return ["show", ws.root / "nothing-here"]


@case("summary.json")
def show_a_dir_that_is_not_a_run(ws):
    (ws.root / "not-a-run").mkdir()
    return ["show", ws.root / "not-a-run"]


def test_there_are_at_least_twenty_distinct_cases() -> None:
    assert len(CASES) >= 20
    assert len({p.id for p in CASES}) == len(CASES)


@attrs.frozen
class Outcome:
    workspace: Workspace
    before: dict[str, str]
    result: Any  # conftest.CliResult


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, config_writer, runner_in, cli) -> dict[str, Outcome]:
    """Every case prepared, then run concurrently (each its own subprocess and directory)."""
    prepared = []
    for param in CASES:
        build = param.values[0]
        ws = Workspace(tmp_path_factory.mktemp(param.id), config_writer, runner_in)
        args = build(ws)
        prepared.append((param.id, ws, args, tree_digest(ws.root)))

    def run(item):
        case_id, ws, args, before = item
        return case_id, Outcome(ws, before, cli.run(*args, cwd=ws.root))

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(pool.map(run, prepared))


@pytest.mark.parametrize(("build", "expected"), CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(build, expected, outcomes, request) -> None:
    outcome = outcomes[request.node.callspec.id]
    result, ws = outcome.result, outcome.workspace
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr, result
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, f"not one line:\n{result}"
    line = result.stderr.rstrip("\n")
    assert line.startswith("popmarl") and ": error: " in line, line
    for text in expected:
        assert text in line, f"{text!r} not in {line!r}"
    assert result.stdout == "", result
    assert not ws.out.exists()
    assert tree_digest(ws.root) == outcome.before, "the failed command wrote or changed files"
