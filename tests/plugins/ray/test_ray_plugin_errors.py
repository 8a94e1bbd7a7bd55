"""A plugin's bug raised in an actor is not a fault: the run ends at once, after one
attempt (exit status 1, the remote traceback printed, ``summary.json`` failed with the
reason), while faults of a process or machine keep being retried."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.exceptions import (
    ActorDiedError,
    GetTimeoutError,
    NodeDiedError,
    ObjectLostError,
    OutOfMemoryError,
    OwnerDiedError,
    RayTaskError,
    TaskCancelledError,
    WorkerCrashedError,
)

import popmarl
import popmarl.cli
from popmarl.errors import ConfigError, PopmarlError, UserError
from popmarl_ray import faults
from popmarl_ray.faults import LateError, is_ray_failure
from popmarl_ray.feed import AttemptClosedError, StalledError
from ray_helpers import (
    MATRIX_EXACT,
    Bandit,
    BuggyBandit,
    FragileBR,
    TalliedFailingBandit,
    kill_pid,
    ray_backend,
    tallied,
    with_killing_backend,
)

#: How a remote traceback names the bug's function (ray_helpers.mean_return).
BUG_FRAME = "in mean_return"
BUG_MESSAGE = "TypeError: unsupported operand type(s) for /: 'float' and 'str'"


def _register(monkeypatch: pytest.MonkeyPatch, **components: type) -> None:
    found = popmarl.algorithms
    for name, cls in components.items():
        found = found.with_component(name, cls)
    monkeypatch.setattr(popmarl, "algorithms", found)


def _cli_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
             config: dict[str, Any]) -> tuple[int, str, dict[str, Any] | None]:
    """``popmarl run`` in this process: exit status, stderr and the run's summary.json
    (None when the run stopped before it made its directory)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    capsys.readouterr()
    code = popmarl.cli.main(["run", str(path), "--out", str(tmp_path / "run")])
    stderr = capsys.readouterr().err
    summary = tmp_path / "run" / "summary.json"
    return code, stderr, json.loads(summary.read_text()) if summary.is_file() else None


def _assert_ended_by_bug(code: int, stderr: str, summary: dict[str, Any] | None, message: str, frame: str) -> None:
    assert code == 1, stderr
    first, *rest = stderr.strip().splitlines()
    assert first == f"popmarl: error: {message}", stderr
    assert any(frame in line for line in rest), stderr  # the remote traceback is printed
    assert summary is not None and summary["status"] == "failed"
    assert summary["stop_reason"] == f"error: RemotePluginError: {message}"


def test_a_trainer_bug_ends_the_run_after_one_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Found in a run: the trainer's TypeError was retried ``max_task_retries`` times, then
    reported as bad input (exit 2) with the traceback hidden."""
    _register(monkeypatch, bandit=Bandit, buggy=BuggyBandit)
    calls = tmp_path / "update_calls.txt"
    config = {**MATRIX_EXACT, "stopping": {"max_iterations": 2},
              "algorithm": {"player_0": "bandit", "player_1": {"name": "buggy", "params": {"calls": str(calls)}}},
              "training": {"max_env_steps": 400, "episodes_per_update": 50, "window": 100},
              "backend": ray_backend(num_rollout_workers=1, max_task_retries=3)}
    code, stderr, summary = _cli_run(tmp_path, capsys, config)
    assert tallied(calls) == 1  # one attempt: not retried
    _assert_ended_by_bug(code, stderr, summary, BUG_MESSAGE, BUG_FRAME)
    assert any("in update" in line for line in stderr.splitlines())


def test_a_policy_bug_in_evaluation_ends_the_run_after_one_attempt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _register(monkeypatch, failing=TalliedFailingBandit)
    calls = tmp_path / "act_calls.txt"
    config = {**MATRIX_EXACT, "algorithm": {"name": "failing", "params": {"calls": str(calls)}},
              "evaluation": {"exact": "never"},
              "backend": ray_backend(num_rollout_workers=1, chunks_per_worker=1, max_task_retries=2)}
    code, stderr, summary = _cli_run(tmp_path, capsys, config)
    assert tallied(calls) == 1  # one batch, played once
    _assert_ended_by_bug(code, stderr, summary, "RuntimeError: boom", "in act")
    assert "second line of a long remote traceback" in stderr


def test_an_actor_that_cannot_start_for_a_bug_ends_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _register(monkeypatch, fragile=FragileBR)
    broken = tmp_path / "broken"
    broken.touch()
    config = {**MATRIX_EXACT, "algorithm": {"name": "fragile", "params": {"broken": str(broken)}},
              "backend": ray_backend(num_rollout_workers=1)}
    code, stderr, summary = _cli_run(tmp_path, capsys, config)
    assert code == 1 and summary is None and not (tmp_path / "run").exists(), stderr  # it never started
    first, *rest = stderr.strip().splitlines()
    assert first == f"popmarl: error: TypeError: fragile: cannot build from {str(broken)!r}", stderr
    assert any("in __init__" in line for line in rest), stderr


def test_a_replacement_that_cannot_start_for_a_bug_ends_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The worker dies (a fault: replaced), but its replacement hits a plugin's bug."""
    _register(monkeypatch, fragile=FragileBR)
    broken = tmp_path / "broken"

    def break_and_kill(backend: Any) -> None:
        broken.touch()
        kill_pid(backend.worker_pids()[0])

    with_killing_backend(monkeypatch, {("evaluate", 2): break_and_kill})
    config = {**MATRIX_EXACT, "algorithm": {"name": "fragile", "params": {"broken": str(broken)}},
              "evaluation": {"exact": "never", "episodes_per_entry": 100},
              "backend": {"name": "ray_killing", "params": {"num_rollout_workers": 1}}}
    code, stderr, summary = _cli_run(tmp_path, capsys, config)
    _assert_ended_by_bug(code, stderr, summary, f"TypeError: fragile: cannot build from {str(broken)!r}",
                         "in __init__")


def _task_error(cause: BaseException) -> RayTaskError:
    return RayTaskError("train", f"Traceback (most recent call last):\n  File \"x.py\", line 1, in train\n{cause!r}",
                        cause).as_instanceof_cause()


@pytest.mark.parametrize("fault", [
    ActorDiedError(), WorkerCrashedError(), NodeDiedError("node died"), OutOfMemoryError("oom"),
    ObjectLostError("ab" * 14, None, "call"), OwnerDiedError("ab" * 14, None, "call"), TaskCancelledError(),
    GetTimeoutError("late"), LateError("rollout worker 0 hung"),
])
def test_faults_of_a_process_or_machine_are_retried(fault: BaseException) -> None:
    assert is_ray_failure(fault)
    assert is_ray_failure(_task_error(fault))  # e.g. an actor that called a dead server
    assert is_ray_failure(_task_error(_task_error(fault)))


@pytest.mark.parametrize("expected", [StalledError("no episodes"), AttemptClosedError("attempt closed")])
def test_a_learner_stopped_by_the_driver_is_retried(expected: BaseException) -> None:
    assert is_ray_failure(_task_error(expected))


def test_a_plugins_error_is_not_a_fault_and_ends_the_run_with_its_traceback() -> None:
    bug = _task_error(TypeError("unsupported operand\nmore"))
    assert not is_ray_failure(bug) and not is_ray_failure(_task_error(bug))
    assert not is_ray_failure(_task_error(ConfigError("algorithm.params.x: must be >= 1")))
    assert not is_ray_failure(TypeError("local"))
    with pytest.raises(faults.RemotePluginError) as info, faults.plugin_errors():
        raise bug
    error = info.value
    assert isinstance(error, PopmarlError) and not isinstance(error, UserError)
    lines = str(error).splitlines()
    assert lines[0] == "TypeError: unsupported operand" and "in train" in str(error)
    assert "(pid=" in lines[1] and "\x1b" not in str(error)  # Ray's colours left out
    assert isinstance(error.cause, TypeError)
    assert str(faults.RemotePluginError(_task_error(KeyError()))).startswith("KeyError\n")


def test_plugin_errors_passes_user_errors_and_faults_through() -> None:
    with pytest.raises(ConfigError, match=r"^algorithm.params.x: must be >= 1$"), faults.plugin_errors():
        raise _task_error(ConfigError("algorithm.params.x: must be >= 1"))
    died = ActorDiedError()
    with pytest.raises(ActorDiedError) as info, faults.plugin_errors():
        raise died
    assert info.value is died

    @faults.plugin_errors()
    def decorated() -> None:
        raise _task_error(ValueError("bad value"))

    for _ in range(2):  # a decorator: each call gets a fresh context
        with pytest.raises(faults.RemotePluginError, match=r"^ValueError: bad value\n"):
            decorated()
