"""Box (continuous) actions on the core's own paths, without torch: a Cournot duopoly
(:mod:`testkit.cournot`) run with uniformly random policies is evaluated by sampling
(``popmarl eval``, ``show``); ``exploit`` picks a response algorithm that takes Box
actions; ``popmarl play`` reads a Box action typed as numbers; and the exact oracle
refuses Box actions in one line before anything is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import popmarl
from popmarl.cli import main
from popmarl.config.schema import ComponentConfig
from popmarl.interfaces.spaces import Box
from popmarl.plugins.registry import Registries
from popmarl.tools.exploit import BOX_FALLBACK_ALGORITHM, FALLBACK_ALGORITHM, response_algorithms
from popmarl.tools.play import describe_box, parse_box_action
from testkit.cournot import Cournot

SEATS = ("firm_0", "firm_1")


@pytest.fixture(scope="module")
def cournot() -> Iterator[str]:
    """The test env ``cournot`` registered for this module's tests."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(popmarl, "envs", popmarl.envs.with_component("cournot", Cournot))
        yield "cournot"


def _config(directory: Path, name: str, **config: Any) -> Path:
    path = directory / f"{name}.yaml"
    config = {"env": {"name": "cournot"}, "solver": {"name": "uniform"}, "stopping": {"max_iterations": 1},
              "evaluation": {"episodes_per_entry": 16, "num_envs": 8, "versus_random_every": 1,
                             "versus_random_episodes": 8}, "trackers": [], **config}
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def random_run(cournot: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PSRO with the core's ``random`` algorithm (uniform quantities in the Box)."""
    directory = tmp_path_factory.mktemp("cournot")
    assert main(["run", str(_config(directory, "random", algorithm={"name": "random"})),
                 "--out", str(directory / "run")]) == 0
    return directory / "run"


def test_a_random_run_is_evaluated_by_sampling(random_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["eval", str(random_run), "--episodes", "800", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])["populations"]
    assert set(report) == set(SEATS)
    for figures in report.values():
        assert figures["episodes"] == 800 and not figures["exact"]
        assert figures["win"] + figures["draw"] + figures["loss"] == pytest.approx(1.0)
        # Uniform quantities q, q' in [0, 9]: E[q (9 - q - q')] = 40.5 - 27 - 20.25 = -6.75,
        # with a standard deviation of 18.8 per game (0.67 over 800 games).
        assert figures["mean_return"] == pytest.approx(-6.75, abs=2.7)
    metrics = [json.loads(line) for line in (random_run / "metrics.jsonl").read_text().splitlines()]
    assert all(np.isfinite(metrics[-1][f"versus_random/{seat}/return"]) for seat in SEATS)
    assert metrics[-1]["nash_conv"] is None  # no exact NashConv for a Box game
    assert main(["show", str(random_run)]) == 0
    assert "population firm_0: 2 policies" in capsys.readouterr().out


def test_exploit_falls_back_to_an_algorithm_that_takes_box_actions() -> None:
    """A run whose algorithm does not learn gets responses of dqn for Discrete seats and
    of ppo (Gaussian) for Box seats."""
    chosen = response_algorithms(SEATS, {s: s for s in SEATS}, {s: ComponentConfig(name="random") for s in SEATS},
                                 None, Registries.current(), boxes=["firm_1"])
    assert chosen == {"firm_0": ComponentConfig(name=FALLBACK_ALGORITHM),
                      "firm_1": ComponentConfig(name=BOX_FALLBACK_ALGORITHM)}


@pytest.mark.parametrize("algorithm", [{"name": "exact_matrix_br"},
                                       {"firm_0": {"name": "random"}, "firm_1": {"name": "exact_matrix_br"}}])
def test_the_exact_oracle_refuses_box_actions_in_one_line(
        algorithm: dict[str, Any], cournot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["run", str(_config(tmp_path, "exact", algorithm=algorithm)), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("popmarl: error: algorithm exact_matrix_br: population firm_")
    assert "acts in Box(shape=(1,), low=0.0, high=9.0" in error
    assert "exact best responses need Discrete actions" in error and "e.g. sac, ppo" in error
    assert not out.exists()


BOX = Box(shape=(2,), low=[0.0, -1.0], high=[9.0, 1.0])


def test_a_typed_box_action_is_parsed_into_the_boxs_shape_and_dtype() -> None:
    for text in ("4.5 -0.25", "4.5, -0.25", "[4.5 -0.25]", " 4.5,-0.25 "):
        action = parse_box_action(text, BOX)
        assert action.dtype == np.float32 and action.tolist() == [4.5, -0.25]
    grid = Box(shape=(2, 2), low=0.0, high=1.0, dtype="float64")
    for text in ("0 0.25 0.5 1", "[[0.   0.25]\n [0.5  1.  ]]"):  # the second as numpy prints it
        action = parse_box_action(text, grid)
        assert action.shape == (2, 2) and action.dtype == np.float64 and action.tolist() == [[0, 0.25], [0.5, 1]]
    assert parse_box_action("9 1", BOX).tolist() == [9.0, 1.0]  # the bounds belong to the Box


@pytest.mark.parametrize(("text", "problem"), [
    ("up", "'up' is not a number"),
    ("1 x", "'x' is not a number"),
    ("1", "'1': 1 number, the action needs 2"),
    ("1 0 0", "'1 0 0': 3 numbers, the action needs 2"),
    ("10 0", "entry 1: 10 is outside [0, 9]"),
    ("1 -1.5", "entry 2: -1.5 is outside [-1, 1]"),
    ("nan 0", "entry 1: nan is not a finite number"),
    ("1 inf", "entry 2: inf is not a finite number"),
])
def test_a_bad_box_action_gets_one_line_saying_what_to_type(text: str, problem: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_box_action(text, BOX)
    message = str(error.value)
    assert "\n" not in message
    assert message == f"{problem}; type 2 numbers separated by spaces or commas, within [0, 9], [-1, 1], or quit"


def test_a_box_is_described_by_its_count_shape_and_bounds() -> None:
    assert describe_box(Box(shape=(1,), low=0.0, high=9.0)) == "1 number, in [0, 9]"
    assert describe_box(Box(shape=(5,), low=0.0, high=1.0)) == "5 numbers separated by spaces or commas, each in [0, 1]"
    assert describe_box(Box(shape=(2, 3))) == ("6 numbers separated by spaces or commas (the Box's shape (2, 3), "
                                               "row by row), each in [-inf, inf]")
