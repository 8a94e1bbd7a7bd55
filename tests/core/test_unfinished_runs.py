"""A run that was killed (or is going) is read from its last committed checkpoint, and
gives the same meta-strategies a finished run gives for that iteration: per population,
per seat and joint, in psro (per-seat mixtures over a shared pool, a joint meta-solver),
league (its Nash mixture and its main agents) and marl. A kill after the last commit and
before ``summary.json`` leaves exactly the finished run's checkpoint without its summary,
so removing the summary of a finished run is that kill.

Also: how the status tells a live run from a killed one (``.process.json``), and that
``show``, ``--json`` and ``--follow`` say it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import popmarl
from learning_schedule import ScheduleAlgorithm
from popmarl.gametheory.metagame import check_payoffs
from popmarl.runs.process_file import PROCESS_FILE, this_process
from popmarl.runs.rundir import RunDirectory
from popmarl.tools.loaded_run import LoadedRun, load_run
from popmarl.tools.run_status import run_status


class FirstAndLatest(popmarl.MetaSolver):
    """Seat 0 plays the first policy, the other seats the newest: the seats' mixtures over
    one shared pool differ from their population's."""

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(np.eye(n)[0 if k == 0 else n - 1] for k, n in enumerate(payoffs.shape[1:]))


class Tilted(popmarl.JointMetaSolver):
    """A correlated, non-product joint distribution: weight 1 + the sum of a profile's indices."""

    @attrs.frozen(kw_only=True)
    class Config:
        pass

    def solve_joint(self, payoffs: np.ndarray) -> np.ndarray:
        weights = 1.0 + np.indices(check_payoffs(payoffs).shape[1:]).sum(axis=0)
        return weights / weights.sum()


FOUND = (popmarl.Registries.current().with_component("solvers", "first_and_latest", FirstAndLatest)
         .with_component("solvers", "tilted", Tilted).with_component("algorithms", "schedule", ScheduleAlgorithm))
RPS = {"name": "matrix", "params": {"game": "rps"}}
CONFIGS: dict[str, dict[str, Any]] = {
    "psro_shared_pool": {"env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 4, "seed": 1}},
                         "algorithm": "exact_matrix_br", "agents": {"mapping": "shared"}, "solver": "first_and_latest"},
    "psro_joint": {"env": {"name": "matrix", "params": {"game": "random_general_sum", "players": 3, "size": 3,
                                                        "seed": 3}},
                   "algorithm": "exact_matrix_br", "solver": "tilted"},
    "league": {"scenario": {"name": "league", "params": {"steps_per_round": 20}}, "env": RPS,
               "algorithm": {"name": "schedule"}, "solver": "latest",  # named: the league's default needs popmarl-solvers
               "training": {"episodes_per_update": 2}, "evaluation": {"episodes_per_entry": 4}},
    "marl": {"scenario": {"name": "marl", "params": {"frozen": {"player_1": "initial"}}}, "env": RPS,
             "algorithm": {"name": "schedule"}, "training": {"max_env_steps": 8, "episodes_per_update": 2},
             "evaluation": {"episodes_per_entry": 4}},
}


def _finished_run(tmp_path: Path, name: str) -> Path:
    config = popmarl.validate({**CONFIGS[name], "stopping": {"max_iterations": 3}, "trackers": []}, registries=FOUND)
    popmarl.run(config, out=str(tmp_path / name), registries=FOUND)
    return tmp_path / name


def _meta_strategies(run: LoadedRun) -> dict[str, Any]:
    """Everything a loaded run plays: per population and per seat, with the joint."""
    return {
        "populations": {p: (pop.policy_ids, pop.mixture.tolist()) for p, pop in run.populations.items()},
        "seats": {a: (pool.policy_ids, pool.mixture.tolist()) for a, pool in run.pools.items()},
        "joint": {a: None if not pool.has_joint else (pool.meta.profiles, pool.meta.probabilities.tolist())
                  for a, pool in run.pools.items()},
    }


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_killed_run_loads_the_meta_strategies_the_finished_run_gives(name: str, tmp_path: Path) -> None:
    path = _finished_run(tmp_path, name)
    finished = popmarl.load_run(path, registries=FOUND)
    assert finished.status.state == "completed" and finished.iteration == 3
    (path / "summary.json").unlink()  # killed after its last commit, before its summary
    killed = popmarl.load_run(path, registries=FOUND)
    assert killed.status.state == "interrupted" and killed.status.iteration == 3 and killed.iteration == 3
    assert killed.status.describe() == "interrupted at iteration 3: continue with --resume"
    assert _meta_strategies(killed) == _meta_strategies(finished)
    if name == "psro_shared_pool":  # the seats' own mixtures, not their population's
        assert killed.pools["player_0"].policy_ids == ("shared/0",)
        assert killed.pools["player_1"].policy_ids == ("shared/3",)
    if name == "psro_joint":
        assert killed.pools["player_0"].has_joint
    if name == "league":  # its main agents, as the summary names them
        mains = load_run(path, main=True, registries=FOUND)
        assert {p: pop.policy_ids for p, pop in mains.populations.items()} == {
            "player_0": ("player_0/main",), "player_1": ("player_1/main",)}
    past = popmarl.load_run(path, iteration=2, registries=FOUND)
    assert past.iteration == 2 and past.status.state == "interrupted"


@pytest.mark.parametrize("name", ["psro_shared_pool", "psro_joint", "marl"])
def test_show_json_of_a_killed_run_gives_what_its_summary_gave(name: str, tmp_path: Path, run_cli) -> None:
    path = _finished_run(tmp_path, name)
    summary = json.loads((path / "summary.json").read_text())
    shown = json.loads(run_cli("show", path, "--json").stdout)
    (path / "summary.json").unlink()
    result = run_cli("show", path, "--json")
    assert result.returncode == 0, result
    killed = json.loads(result.stdout)
    assert (killed["status"], killed["iteration"]) == ("interrupted", 3)
    assert killed["description"] == "interrupted at iteration 3: continue with --resume"
    assert killed["populations"] == summary["populations"] == shown["populations"]
    assert killed["meta_strategies"] == summary.get("meta_strategies")
    assert killed["joint_meta_strategy"] == summary.get("joint_meta_strategy")
    for key in ("iterations", "nash_conv", "env_steps", "mean_returns", "win_rates"):
        assert killed.get(key) == summary.get(key), key
    assert killed["metrics"] == shown["metrics"] and killed["metrics"]["iteration"] == 3
    assert (shown["status"], shown["description"], shown["stop_reason"]) == ("completed", "completed", "max_iterations")


def _with_process(path: Path, **changed: Any) -> None:
    """A ``.process.json`` as a session writes it, for this process with ``changed`` fields."""
    me = attrs.asdict(this_process())
    me.pop("written_ns")
    (path / PROCESS_FILE).write_text(json.dumps({**me, **changed}))


def test_the_process_file_tells_a_live_run_from_a_killed_one(tmp_path: Path) -> None:
    path = _finished_run(tmp_path, "psro_shared_pool")
    assert not (path / PROCESS_FILE).exists(), "a session that ended removes its .process.json"
    (path / "summary.json").unlink()
    run = RunDirectory(path)
    _with_process(path)  # this very process: alive
    assert run_status(run).state == "running" and run_status(run).iteration == 3
    assert run_status(run).describe() == "running, iteration 3"
    assert popmarl.load_run(path, registries=FOUND).status.state == "running"
    _with_process(path, host=f"not-{socket.gethostname()}")
    assert run_status(run).state == "unknown"
    assert run_status(run).describe() == f"running or interrupted (started on host not-{socket.gethostname()}), " \
                                         "iteration 3"
    _with_process(path, start="another-boot:1")  # its pid, since given to another process
    if Path("/proc/self/stat").is_file():
        assert run_status(run).state == "interrupted"
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    _with_process(path, pid=int(ended.stdout), start=None)  # a process that has ended
    assert run_status(run).state == "interrupted"


def test_a_summary_written_after_the_process_file_is_the_run_s_end(tmp_path: Path) -> None:
    """A kill between writing the summary and removing the process file: the summary, newer
    than the process file, tells the run's end; an older one (an earlier session's) does not."""
    path = _finished_run(tmp_path, "psro_shared_pool")
    summary = path / "summary.json"
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    _with_process(path, pid=int(ended.stdout), start=None)
    process_ns = (path / PROCESS_FILE).stat().st_mtime_ns
    os.utime(summary, ns=(process_ns + 10**9, process_ns + 10**9))
    assert run_status(RunDirectory(path)).state == "completed"
    os.utime(summary, ns=(process_ns - 10**9, process_ns - 10**9))
    assert run_status(RunDirectory(path)).state == "interrupted"


def test_a_run_killed_before_its_first_checkpoint_says_so(tmp_path: Path, run_cli, write_config) -> None:
    path = tmp_path / "run"
    RunDirectory(path).create(write_config().read_text())
    result = run_cli("show", path)
    assert result.returncode == 0, result
    assert "status          interrupted before its first checkpoint: start it again with --resume" in result.stdout
    loaded = run_cli("eval", path)
    assert loaded.returncode == 2 and loaded.stderr.count("\n") == 1, loaded
    assert "it has no checkpoint to load yet" in loaded.stderr and "Traceback" not in loaded.stderr


def test_follow_of_a_finished_run_prints_it_once_and_ends(tmp_path: Path, run_cli) -> None:
    path = _finished_run(tmp_path, "psro_shared_pool")
    result = run_cli("show", path, "--follow", "--json")
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "completed"
    text = run_cli("show", path, "--follow")
    assert text.returncode == 0 and text.stdout.count("status          completed") == 1, text


def test_follow_of_a_running_run_ends_on_ctrl_c_with_status_0(tmp_path: Path, cli) -> None:
    path = _finished_run(tmp_path, "psro_shared_pool")
    (path / "summary.json").unlink()
    _with_process(path)  # this test's process runs it: followed until Ctrl-C
    follow = subprocess.Popen(cli.command(["show", path, "--follow", "--json", "--interval", "0.05"]), cwd=tmp_path,
                              env=cli.env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert follow.stdout is not None
    first = json.loads(follow.stdout.readline())  # printed once it has looked: then Ctrl-C
    assert (first["status"], first["iteration"]) == ("running", 3)
    follow.send_signal(signal.SIGINT)
    out, err = follow.communicate(timeout=600)
    assert follow.returncode == 0 and "Traceback" not in err, err


def test_resume_refuses_a_run_that_is_going(tmp_path: Path) -> None:
    path = _finished_run(tmp_path, "psro_shared_pool")
    _with_process(path)  # this test's process runs it
    before = (path / "summary.json").read_bytes()
    config = popmarl.load_config(str(path / "config.yaml"), registries=FOUND)
    with pytest.raises(popmarl.ResumeError, match=rf"the run is going \(process {os.getpid()} on this host\)"):
        popmarl.run(config, resume=str(path), registries=FOUND)
    assert (path / "summary.json").read_bytes() == before and (path / PROCESS_FILE).exists()


def test_play_and_rank_say_they_read_a_killed_run(run_inprocess, tmp_path: Path, run_cli, cli) -> None:
    run_inprocess(stopping={"max_iterations": 2})
    path = tmp_path / "run"
    (path / "summary.json").unlink()
    said = "interrupted at iteration 2: continue with --resume"
    played = subprocess.run(cli.command(["play", path, "--seed", "0"]), input="quit\n", capture_output=True,
                            text=True, cwd=tmp_path, env=cli.env(), timeout=600)
    assert played.returncode == 0, played.stderr
    assert played.stdout.startswith(f"{path}, iteration 2 ({said}): you play player_0"), played.stdout
    ranked = run_cli("rank", path, "--json")
    assert ranked.returncode == 0, ranked
    assert f"{path}: {said}" in ranked.stdout.splitlines()
    players = {row["policy"] for row in json.loads(ranked.stdout.splitlines()[-1])["players"]}
    assert players == {f"{p}/{k}" for p in ("player_0", "player_1") for k in range(3)}  # uniform: all 3 each
