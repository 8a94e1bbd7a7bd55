"""Tracker ``mlflow`` against a local sqlite store and a real ``mlflow server``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlflow_helpers import (
    PLOTS_AT_END,
    MlflowServer,
    artifact_paths,
    client,
    iterations_in,
    mlflow_run_id,
    mlflow_tracker,
    sqlite_uri,
    steps,
)

RUN_FILES = {"config.yaml", "summary.json", "metrics.jsonl", "payoffs.npz"}
PLOTS = {"nash_conv.png", "payoffs.png", "meta_strategies.png"}


def check_mlflow_run(uri: str, run_dir: Path, *, experiment: str, iterations: int, plots: bool = True) -> Any:
    """The run's MLflow run: alone in its experiment, one ``nash_conv`` point per
    iteration, the config as params, plugin and seed tags, the run's files as artifacts."""
    mlflow = client(uri)
    run_id = mlflow_run_id(run_dir, uri)
    found = mlflow.get_experiment_by_name(experiment)
    assert [r.info.run_id for r in mlflow.search_runs([found.experiment_id])] == [run_id]
    assert steps(uri, run_id) == list(range(1, iterations + 1)) == iterations_in(run_dir)
    assert steps(uri, run_id, "population_size/player_0") == list(range(1, iterations + 1))
    run = mlflow.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    metrics = run.data.metrics
    assert {"exploitability", "meta_entropy/player_1", "env_steps", "steps_per_s", "train_time_s",
            "eval_time_s"} <= set(metrics)
    assert metrics["population_size/player_0"] == iterations + 1
    params = run.data.params
    assert params["env.name"] == "matrix" and params["env.params.game"] == "rps"
    assert params["evaluation.exact"] == "auto" and params["seed"] == "0"
    assert "mlflow" in {v for k, v in params.items() if k.startswith("trackers.") and k.endswith(".name")}
    assert params["stopping.target_nash_conv"] == "null"
    tags = run.data.tags
    assert tags["popmarl.seed"] == "0" and tags["popmarl.status"] == "completed"
    assert tags["popmarl.trackers.mlflow"] == tags["popmarl.plugins.mlflow"] == "popmarl-mlflow 0.1.0"
    assert tags["popmarl.envs.matrix"].startswith("popmarl ")
    policies = {f"checkpoints/policies/player_{p}/{i}.npz" for p in (0, 1) for i in range(iterations + 1)}
    assert RUN_FILES | (PLOTS if plots else set()) | policies <= artifact_paths(uri, run_id)
    assert "mlflow_run.json" not in artifact_paths(uri, run_id)
    return run


def test_default_local_store(tmp_path: Path, fresh_store: Callable[[Path], str],
                             run_popmarl: Callable[..., dict[str, Any]]) -> None:
    uri = fresh_store(tmp_path)  # the default store: <parent of the run directory>/mlflow.db
    summary = run_popmarl(tmp_path / "run", [PLOTS_AT_END, mlflow_tracker()], iterations=3)
    assert summary["status"] == "completed"
    run = check_mlflow_run(uri, tmp_path / "run", experiment="popmarl", iterations=3)
    assert run.data.params["stopping.max_iterations"] == "3"
    assert run.info.artifact_uri.startswith(str(tmp_path / "mlartifacts"))


def test_tracking_server(tmp_path: Path, mlflow_server: MlflowServer,
                         run_popmarl: Callable[..., dict[str, Any]]) -> None:
    tracker = mlflow_tracker(mlflow_server.uri, experiment="server-run", run_name="run")
    summary = run_popmarl(tmp_path / "run", ["jsonl", tracker], iterations=3)
    assert summary["status"] == "completed"
    run = check_mlflow_run(mlflow_server.uri, tmp_path / "run", experiment="server-run", iterations=3, plots=False)
    # uploaded after the other trackers' last words: the events file ends with run_end
    local = client(mlflow_server.uri).download_artifacts(run.info.run_id, "events.jsonl", str(tmp_path))
    assert '"event": "run_end"' in Path(local).read_text().splitlines()[-1]


def test_resume_continues_the_same_run(tmp_path: Path, mlflow_server: MlflowServer,
                                       run_popmarl: Callable[..., dict[str, Any]]) -> None:
    trackers = [mlflow_tracker(mlflow_server.uri, experiment="resume")]
    run_dir = tmp_path / "run"
    run_popmarl(run_dir, trackers, iterations=2)
    first = mlflow_run_id(run_dir, mlflow_server.uri)
    assert steps(mlflow_server.uri, first) == [1, 2]
    summary = run_popmarl(run_dir, trackers, iterations=5, resume=True)
    assert summary["status"] == "completed" and mlflow_run_id(run_dir, mlflow_server.uri) == first
    run = check_mlflow_run(mlflow_server.uri, run_dir, experiment="resume", iterations=5, plots=False)
    # stopping.max_iterations changed on resume: the param keeps the first value, a tag has the new one
    assert run.data.params["stopping.max_iterations"] == "2"
    assert run.data.tags["popmarl.config.stopping.max_iterations"] == "5"


def test_runs_in_one_process_keep_apart(tmp_path: Path, fresh_store: Callable[[Path], str],
                                        run_popmarl: Callable[..., dict[str, Any]]) -> None:
    import mlflow

    store_a, store_b = fresh_store(tmp_path / "a"), fresh_store(tmp_path / "b")
    run_popmarl(tmp_path / "a" / "one", [mlflow_tracker(store_a)], iterations=2)
    run_popmarl(tmp_path / "b" / "two", [mlflow_tracker(store_b)], iterations=3)
    run_popmarl(tmp_path / "a" / "three", [mlflow_tracker(store_a)], iterations=1)
    assert mlflow.active_run() is None
    ids = {name: mlflow_run_id(tmp_path / folder / name, uri)
           for folder, name, uri in (("a", "one", store_a), ("b", "two", store_b), ("a", "three", store_a))}
    assert len(set(ids.values())) == 3
    assert steps(store_a, ids["one"]) == [1, 2]
    assert steps(store_b, ids["two"]) == [1, 2, 3]
    assert steps(store_a, ids["three"]) == [1]
    assert len(client(store_a).search_runs([client(store_a).get_experiment_by_name("popmarl").experiment_id])) == 2
    assert sqlite_uri(tmp_path / "a" / "mlflow.db") == store_a
