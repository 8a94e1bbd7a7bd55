"""The third-party-style scenario plugin (contrib/popmarl-reservoir), installed by pip
(tox env ``contrib``; by hand: ``pip install ./contrib/popmarl-reservoir``) and run by
name: ``reservoir_self_play`` with the example plugin's learner ``softmax_pg``."""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import popmarl
from popmarl.data.episodes import Episode, Observations
from popmarl.interfaces.algorithm import TrainerContext

DIST = "popmarl-reservoir"
SETTINGS = {
    "scenario": {"name": "reservoir_self_play", "params": {"capacity": 3}},
    "agents": {"mapping": "shared"},
    "algorithm": {"name": "softmax_pg", "params": {"lr": 0.5}},
    "training": {"max_episodes": 128, "episodes_per_update": 32, "max_env_steps": None},
    "evaluation": {"episodes_per_entry": 50, "exact": "never"},
    "stopping": {"max_iterations": 6},
    "solver": None,
}
#: Metrics that measure time, not behaviour.
TIMED = ("wall_time_s", "iteration_time_s")


@pytest.fixture(scope="module", autouse=True)
def installed() -> metadata.Distribution:
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{DIST} is not installed: run `pip install ./contrib/popmarl-reservoir` "
                    "(tox env 'contrib' does) before these tests", pytrace=False)
    assert {(ep.group, ep.name) for ep in dist.entry_points} == {("popmarl.scenarios", "reservoir_self_play")}
    assert popmarl.scenarios.entry("reservoir_self_play").distribution == DIST
    return dist


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _weights(run: Path, policy_id: str) -> dict[str, np.ndarray]:
    population, index = policy_id.rsplit("/", 1)
    with np.load(run / "checkpoints" / "policies" / population / f"{index}.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _untimed(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in line.items() if k not in TIMED} for line in lines]


def test_runs_by_name_with_a_bounded_reservoir_and_a_learner_that_carries_on(run_cli, write_config,
                                                                               tmp_path: Path) -> None:
    result = run_cli("run", write_config(**SETTINGS), "--out", tmp_path / "run")
    assert result.returncode == 0, result
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    lines = _metrics(run)
    assert summary["scenario"] == "reservoir_self_play" and summary["status"] == "completed"
    assert [m["iteration"] for m in lines] == [1, 2, 3, 4, 5, 6]
    # One snapshot per iteration; the reservoir grows to its capacity, then stays there.
    policies = summary["populations"]["shared"]["policies"]
    assert policies == [f"shared/{i}" for i in range(7)]
    assert [m["reservoir_size"] for m in lines] == [2, 3, 3, 3, 3, 3]
    assert len(set(summary["reservoir"])) == 3 and set(summary["reservoir"]) <= set(policies)
    assert summary["populations"]["shared"]["meta_strategy"] == [1 / 3 if p in summary["reservoir"] else 0.0
                                                                 for p in policies]
    # The learner carries on: 128 episodes / 32 per update = 4 updates per task, its own
    # count over the whole run keeps growing, and its trainer state is checkpointed.
    assert [m["train/updates"] for m in lines] == [4.0] * 6
    assert [m["train/total_updates"] for m in lines] == [4.0, 8.0, 12.0, 16.0, 20.0, 24.0]
    learner = run / "checkpoints" / "learners-000006" / "shared"
    assert json.loads((learner / "learner.json").read_text())["trainer"] == ["trainer.json", "velocity.npz"]
    assert json.loads((learner / "trainer" / "trainer.json").read_text())["updates"] == 24
    # Each snapshot is a different policy (it learned), evaluated against the reservoir.
    weights = [_weights(run, pid)["b"] for pid in policies]
    assert all(not np.array_equal(a, b) for a, b in zip(weights, weights[1:]))
    assert all(np.isfinite(m["mean_return_vs_reservoir"]) for m in lines)


def test_resume_after_a_stop_is_identical_to_an_uninterrupted_run(run_cli, write_config, tmp_path: Path) -> None:
    straight = run_cli("run", write_config(**SETTINGS), "--out", tmp_path / "straight")
    assert straight.returncode == 0, straight
    config = write_config("short.yaml", **{**SETTINGS, "stopping": {"max_iterations": 3}})
    first = run_cli("run", config, "--out", tmp_path / "resumed")
    assert first.returncode == 0, first
    resumed = run_cli("run", config, "--resume", tmp_path / "resumed", "--set", "stopping.max_iterations=6")
    assert resumed.returncode == 0, resumed
    assert "resume: stopping.max_iterations 3 -> 6" in resumed.stdout
    assert _untimed(_metrics(tmp_path / "resumed")) == _untimed(_metrics(tmp_path / "straight"))
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("straight", "resumed"))
    assert a["reservoir"] == b["reservoir"] and a["populations"] == b["populations"]
    for pid in a["populations"]["shared"]["policies"]:
        x, y = (_weights(tmp_path / d, pid) for d in ("straight", "resumed"))
        assert all(np.array_equal(x[k], y[k]) for k in x)


def test_recency_weights_newer_snapshots(run_cli, write_config, tmp_path: Path) -> None:
    settings = {**SETTINGS, "scenario": {"name": "reservoir_self_play", "params": {"capacity": 10, "recency": 2.0}},
                "stopping": {"max_iterations": 2}}
    assert run_cli("run", write_config(**settings), "--out", tmp_path / "run").returncode == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    np.testing.assert_allclose(summary["populations"]["shared"]["meta_strategy"], np.array([1.0, 4.0, 9.0]) / 14)


@pytest.mark.parametrize(("stopping", "expected"), [
    (None, ("completed", "max_iterations", 10)),  # nothing set: the scenario default, 10 iterations
    ({"max_iterations": None, "max_wall_time_s": 1e-6}, ("stopped", "max_wall_time_s", 0)),  # over before the first iteration
])
def test_runs_without_max_iterations(run_cli, write_config, tmp_path: Path, stopping: dict | None,
                                     expected: tuple[str, str, int]) -> None:
    settings = {**SETTINGS, "training": {**SETTINGS["training"], "max_episodes": 32}, "stopping": stopping}
    result = run_cli("run", write_config(**settings), "--out", tmp_path / "run")
    assert result.returncode == 0, result
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["status"], summary["stop_reason"], summary["iterations"]) == expected
    metrics = tmp_path / "run" / "metrics.jsonl"
    assert (len(_metrics(tmp_path / "run")) if metrics.exists() else 0) == expected[2]


@pytest.mark.parametrize(("settings", "message"), [
    ({"agents": {"mapping": "per_player"}},
     "agents.mapping: scenario reservoir_self_play needs one population playing every seat (set it to shared); "
     "got player_0, player_1"),
    ({"scenario": {"name": "reservoir_self_play", "params": {"capacity": 0}}}, "scenario.params.capacity"),
    ({"algorithm": {"name": "exact_matrix_br"}},
     "algorithm: exact_matrix_br (population shared) does not learn; scenario reservoir_self_play trains its "
     "population"),
    ({"training": {**SETTINGS["training"], "window": 10}}, "training.window: not used by scenario reservoir_self_play"),
])
def test_bad_configs_are_refused_before_anything_runs(run_cli, write_config, tmp_path: Path, settings: dict,
                                                      message: str) -> None:
    result = run_cli("run", write_config(**{**SETTINGS, **settings}), "--out", tmp_path / "run")
    assert result.returncode == 2, result
    assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_softmax_pg_trainer_state_continues_exactly() -> None:
    """A trainer rebuilt from the policy's weights and its state() updates as the original."""
    algorithm = popmarl.algorithms.load("softmax_pg")(lr=0.3, momentum=0.9)
    space = popmarl.PolicySpace(population="p", agents=("a",), observation_space=popmarl.Box(shape=(2,)),
                                action_space=popmarl.Discrete(n=3))
    rng = np.random.default_rng(0)

    def episodes(k: int) -> list[Episode]:
        obs = rng.normal(size=(k, 2, 2))
        return [Episode(agent="a", obs=o, actions=rng.integers(3, size=2), rewards=rng.normal(size=2), masks=None,
                        terminated=True, truncated=False, episode_return=0.5) for o in obs]

    policy = algorithm.make_policy(space=space, seed=1)
    trainer = algorithm.make_trainer(policy=policy, space=space, seed=1,
                                     context=TrainerContext.alone(policy=policy, space=space))
    for _ in range(3):
        trainer.update(episodes(4))
    state, weights = trainer.state(), policy.get_weights()
    later = [episodes(4) for _ in range(2)]
    copy = algorithm.make_policy(space=space, seed=99)
    copy.set_weights(weights)
    rebuilt = algorithm.make_trainer(policy=copy, space=space, seed=99,
                                     context=TrainerContext.alone(policy=copy, space=space))
    rebuilt.load_state(state)
    for batch in later:
        assert trainer.update(batch) == rebuilt.update(batch)
    assert all(np.array_equal(policy.get_weights()[k], copy.get_weights()[k]) for k in ("w", "b"))
    # Without the state (momentum and baseline lost), the same episodes lead elsewhere.
    fresh = algorithm.make_policy(space=space, seed=99)
    fresh.set_weights(weights)
    algorithm.make_trainer(policy=fresh, space=space, seed=99,
                           context=TrainerContext.alone(policy=fresh, space=space)).update(later[0])
    assert not np.array_equal(fresh.get_weights()["w"], copy.get_weights()["w"])
    probs = policy.probabilities(Observations(obs=np.ones((1, 2)), mask=np.array([[True, False, True]])))
    assert probs[0, 1] == 0 and probs.sum() == pytest.approx(1.0)


def test_the_plugin_readme_config_runs(run_cli, tmp_path: Path) -> None:
    readme = Path(__file__).resolve().parents[2] / "contrib" / "popmarl-reservoir" / "README.md"
    (block,) = re.findall(r"^```yaml\n(.*?)^```", readme.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    (tmp_path / "reservoir.yaml").write_text(block, encoding="utf-8")
    result = run_cli("run", "reservoir.yaml", "--set", "stopping.max_iterations=4", "--out", tmp_path / "run")
    assert result.returncode == 0, result
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["iterations"] == 4 and len(summary["reservoir"]) == 3
