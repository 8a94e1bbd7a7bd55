"""The third-party-style example plugin (contrib/popmarl-example-plugin), installed by pip
(tox env ``contrib``; by hand: ``pip install -e contrib/popmarl-example-plugin``) and used
by name only."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import yaml

import popmarl

DIST = "popmarl-example-plugin"
COMPONENTS = {("algorithm", "softmax_br"), ("solver", "hedge")}


@pytest.fixture(scope="module", autouse=True)
def installed() -> metadata.Distribution:
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{DIST} is not installed: run `pip install ./contrib/popmarl-example-plugin` "
                    "(tox env 'contrib' does) before these tests", pytrace=False)
    groups = {(ep.group, ep.name) for ep in dist.entry_points}
    assert groups >= {("popmarl.algorithms", "softmax_br"), ("popmarl.solvers", "hedge")}
    return dist


def _load(kind: str, name: str) -> type:
    registry = getattr(popmarl, kind)
    assert registry.entry(name).distribution == DIST
    return registry.load(name)


def _collapsed(run: Path, summary: dict, agent: str) -> np.ndarray:
    """The agent's meta-strategy as one mixed strategy over actions (from saved policies)."""
    strategy = 0.0
    for policy_id, weight in zip(summary["populations"][agent]["policies"], summary["meta_strategies"][agent]):
        population, index = policy_id.rsplit("/", 1)
        with np.load(run / "checkpoints" / "policies" / population / f"{index}.npz", allow_pickle=False) as data:
            strategy = strategy + weight * data["probs"]
    return np.asarray(strategy)


# -- through the command line -----------------------------------------------------------------

def test_popmarl_plugins_lists_both(run_cli, installed) -> None:
    result = run_cli("plugins")
    assert result.returncode == 0, result
    rows = {tuple(line.split()[:2]): line.split() for line in result.stdout.splitlines()[1:]}
    for kind, name in COMPONENTS:
        assert rows[(kind, name)][2:4] == [DIST, installed.version]


def test_a_config_uses_both_by_name(run_cli, write_config, tmp_path: Path) -> None:
    game = {"game": "random_zero_sum", "size": 6, "seed": 3}
    config = write_config(env={"params": game}, algorithm={"name": "softmax_br", "params": {"temperature": 0.02}},
                          solver={"name": "hedge", "params": {"iterations": 2000}}, stopping={"max_iterations": 15})
    result = run_cli("run", config, "--out", tmp_path / "run")
    assert result.returncode == 0, result
    run = tmp_path / "run"
    summary = yaml.safe_load((run / "summary.json").read_text())
    metrics = [yaml.safe_load(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert summary["status"] == "completed" and summary["iterations"] == 15
    assert max(m["nash_conv"] for m in metrics) > 0.2, "the game is not trivially solved"
    assert summary["nash_conv"] < 0.03, "softmax-BR PSRO with Hedge converges close to equilibrium"
    assert summary["solver"]["meta_nash_conv"] < 0.03
    # Every new policy is a proper mixed strategy (a smoothed response, not a pure one).
    probs = _collapsed(run, summary, "player_0")
    assert probs.sum() == pytest.approx(1.0) and np.all(probs >= 0)
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["algorithm"] == {"name": "softmax_br", "params": {"temperature": 0.02}}
    assert resolved["solver"] == {"name": "hedge", "params": {"iterations": 2000, "learning_rate": None}}


def test_hedge_on_rps_plays_near_uniform(run_cli, write_config, tmp_path: Path) -> None:
    result = run_cli("run", write_config(solver="hedge", stopping={"max_iterations": 10}), "--out", tmp_path / "run")
    assert result.returncode == 0, result
    summary = yaml.safe_load((tmp_path / "run" / "summary.json").read_text())
    for agent in ("player_0", "player_1"):
        np.testing.assert_allclose(_collapsed(tmp_path / "run", summary, agent), np.full(3, 1 / 3), atol=0.02)
    assert summary["nash_conv"] < 0.05 and summary["solver"]["meta_nash_conv"] < 0.05


@pytest.mark.parametrize(("override", "path"), [
    ("algorithm.params.temperature=0", "algorithm.params.temperature"),
    ("solver.params.iterations=0", "solver.params.iterations"),
    ("solver.params.learning_rte=0.1", "solver.params.learning_rte"),
])
def test_plugin_params_are_validated_like_the_core(run_cli, write_config, tmp_path: Path, override: str,
                                                    path: str) -> None:
    config = write_config(algorithm="softmax_br", solver="hedge")
    result = run_cli("run", config, "--set", override, "--out", tmp_path / "run")
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and path in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_listing_does_not_import_the_plugin() -> None:
    """A third-party plugin is imported only when a config names one of its components."""
    code = ("import sys, popmarl\n"
            "names = [n for k in popmarl.KINDS for n in getattr(popmarl, k).names()]\n"
            "assert 'softmax_br' in names and 'hedge' in names, names\n"
            "assert not any(m.startswith('popmarl_example') for m in sys.modules)\n"
            "popmarl.solvers.load('hedge')\n"
            "assert 'popmarl_example.hedge' in sys.modules and 'popmarl_example.softmax_br' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


# -- the classes, loaded by name ----------------------------------------------------------------

def test_both_have_configs_with_defaults() -> None:
    softmax_br, hedge = _load("algorithms", "softmax_br"), _load("solvers", "hedge")
    assert issubclass(softmax_br, popmarl.Algorithm) and issubclass(hedge, popmarl.MetaSolver)
    assert softmax_br().config.temperature > 0
    assert hedge().config.iterations >= 1


def test_hedge_approximates_a_zero_sum_equilibrium() -> None:
    hedge = _load("solvers", "hedge")(iterations=3000)
    rng = np.random.default_rng(0)
    for _ in range(3):
        a = rng.uniform(-1, 1, (7, 5))
        result = hedge.solve_detailed(np.stack([a, -a]))
        for mixture in result.mixtures:
            assert mixture.sum() == pytest.approx(1.0) and np.all(mixture >= 0)
        assert result.metrics["meta_nash_conv"] < 0.05


def test_hedge_handles_n_players_and_single_policies() -> None:
    hedge = _load("solvers", "hedge")(iterations=200)
    mixtures = hedge.solve(np.random.default_rng(1).normal(size=(3, 2, 3, 4)))
    assert [m.shape for m in mixtures] == [(2,), (3,), (4,)]
    assert hedge.solve(np.zeros((2, 1, 1)))[0].tolist() == [1.0]


def test_softmax_br_sharpens_with_lower_temperature() -> None:
    algorithm = _load("algorithms", "softmax_br")
    env = popmarl.envs.load("matrix")(game="rps")
    space = popmarl.PolicySpace(population="player_0", agents=("player_0",),
                                observation_space=env.observation_space("player_0"),
                                action_space=env.action_space("player_0"))
    opponent = algorithm().make_policy(space=space, seed=0)
    opponent.set_weights({"probs": np.array([1.0, 0.0, 0.0])})  # always rock
    problem = popmarl.BestResponseProblem(env=env, space=space, seed=0,
                                          opponents={"player_0": [(opponent, 1.0)], "player_1": [(opponent, 1.0)]})
    sharp = algorithm(temperature=0.01).best_response(problem).get_weights()["probs"]
    soft = algorithm(temperature=100.0).best_response(problem).get_weights()["probs"]
    assert sharp.argmax() == 1 and sharp[1] > 0.999  # paper beats rock
    np.testing.assert_allclose(soft, np.full(3, 1 / 3), atol=0.01)
    with pytest.raises(ValueError):
        algorithm(temperature=0.0)
