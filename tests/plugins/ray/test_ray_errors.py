"""Errors reach the user as one line: no cluster at the address, too few CPUs, a bad
parameter, a fault that persists; a plugin's bug is not retried and keeps its traceback."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray

import popmarl
from popmarl.errors import ConfigError, UserError
from popmarl_ray import RayBackendError, RayConnectionError
from popmarl_ray.faults import RemotePluginError
from ray_helpers import MATRIX_EXACT, FailingBandit, KillingBackend, kill_pid, ray_backend, run, with_killing_backend


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1"])
def test_no_cluster_at_the_address(tmp_path: Path, address: str) -> None:
    started = time.monotonic()
    with pytest.raises(RayConnectionError) as info:
        run({**MATRIX_EXACT, "backend": ray_backend(address=address, connect_timeout_s=2)}, tmp_path / "run")
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert message.startswith(f"ray backend: no Ray cluster at {address!r} (127.0.0.1:1: connection refused)")
    assert "ray start --head" in message and "\n" not in message
    assert isinstance(info.value, UserError)


def test_bad_address_exits_2_with_one_line(write_config: Callable[..., Path], run_cli: Callable[..., Any]) -> None:
    config = write_config(backend={"name": "ray", "params": {"address": "127.0.0.1:1"}})
    result = run_cli("run", config, "--out", "run")
    assert result.returncode == 2, result
    assert result.stderr.startswith("popmarl: error: ray backend: no Ray cluster at '127.0.0.1:1'"), result
    assert len(result.stderr.strip().splitlines()) == 1, result


def test_more_cpus_than_the_local_ray_has(tmp_path: Path) -> None:
    with pytest.raises(RayBackendError) as info:
        run({**MATRIX_EXACT, "backend": ray_backend(num_rollout_workers=3)}, tmp_path / "run")
    assert str(info.value).startswith("ray backend: the run needs 3 CPUs and 0 GPUs (3 workers x 1 CPU + 2 learners x 0 "
                                      "CPU); the Ray cluster has 2 CPUs and 0 GPUs; lower num_rollout_workers, "
                                      "num_cpus_per_worker or num_cpus_per_learner")
    assert "num_gpus_per_learner" not in str(info.value)


def test_more_gpus_than_the_local_ray_has_names_num_gpus_per_learner(tmp_path: Path) -> None:
    """Found on a one-GPU machine: two learners of 1 GPU each were told to lower the CPUs."""
    gpus = ray.cluster_resources().get("GPU", 0.0)
    with pytest.raises(RayBackendError) as info:
        run({**MATRIX_EXACT, "backend": ray_backend(num_rollout_workers=1, num_gpus_per_learner=gpus + 1)},
            tmp_path / "run")
    message = str(info.value)
    assert message.endswith("GPUs; lower num_gpus_per_learner (a fraction shares a GPU: 0.5 puts two learners on one)")
    assert "num_rollout_workers" not in message and "\n" not in message
    assert not (tmp_path / "run").exists()


def test_bad_parameters_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        run({**MATRIX_EXACT, "backend": ray_backend(num_rollout_workers=0, address="http://x/", max_staleness=-1)},
            tmp_path / "run")
    paths = [p.split(":")[0] for p in info.value.problems]
    assert paths == ["backend.params.address", "backend.params.num_rollout_workers", "backend.params.max_staleness"]


def test_a_fault_that_persists_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def kill_the_worker(backend: KillingBackend) -> None:
        kill_pid(backend.worker_pids()[0])

    with_killing_backend(monkeypatch, {("evaluate", 2): kill_the_worker})
    config = {**MATRIX_EXACT, "evaluation": {"exact": "never", "episodes_per_entry": 100},
              "backend": {"name": "ray_killing", "params": {"num_rollout_workers": 1, "max_task_retries": 0}}}
    with pytest.raises(RayBackendError) as info:
        run(config, tmp_path / "run")
    assert str(info.value).startswith("ray backend: rollout worker failed 1 times: The actor died")
    assert "\n" not in str(info.value)


def test_a_plugins_error_is_not_retried_and_keeps_its_traceback(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("failing", FailingBandit))
    config = {**MATRIX_EXACT, "algorithm": {"name": "failing"}, "evaluation": {"exact": "never"},
              "backend": ray_backend(num_rollout_workers=1, max_task_retries=1)}
    with pytest.raises(RemotePluginError) as info:
        run(config, tmp_path / "run")
    first, *traceback = str(info.value).splitlines()
    assert first == "RuntimeError: boom"
    assert traceback[0].startswith("ray::RolloutWorkerActor.evaluate()")
    assert traceback[-2:] == ["RuntimeError: boom", "second line of a long remote traceback"]
    assert isinstance(info.value.cause, RuntimeError) and not isinstance(info.value, UserError)
