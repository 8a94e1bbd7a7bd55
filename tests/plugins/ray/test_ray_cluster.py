"""The README's Ray cluster recipe, run as shown on this machine: its bash block starts a
head and joins a second node (two raylets, each with one CPU, its own ports and temp
dir, and a home of its own where the head's token is generated), with token
authentication on as Ray's default; a PSRO (``popmarl run`` with ``address:``) and a
``marl`` run then play on both nodes. The nodes are stopped by their process ids (the
process group the block ran in), never by ``ray stop``, which would stop every Ray on
the machine.

A driver without the head's token, with a wrong one, or facing a host that does not
answer gets one line naming the cause, and Ray's own log lines stay off the console.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import numpy as np
import pytest
import ray
import yaml

from readme_configs import README, readme_blocks

HERE = Path(__file__).resolve().parent
EXAMPLES = README.parent / "examples"
#: The README's bash block that starts a cluster.
CLUSTER_BLOCK = next(b for b in readme_blocks() if b.language == "bash" and "ray start --head" in b.code)
#: Generous bounds on the one-line errors (they take a second or two here).
FAST_S = 25.0


@attrs.frozen
class Cluster:
    """A running two-node cluster: its address, the home holding the head's token, each
    node's temp dir, and the process group of its processes."""

    address: str
    home: Path
    temp_dirs: tuple[Path, Path]
    pgid: int

    def env(self, **extra: str) -> dict[str, str]:
        """A driver's environment: this machine's, with the cluster's home (the head's
        token) and no Ray settings of its own but ``extra``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        return {**env, "HOME": str(self.home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
                **extra}

    def actors(self, node: int, name: str) -> int:
        """How many actors of class ``name`` ran on node ``node`` (0: the head), from the
        worker logs in its temp dir."""
        logs = self.temp_dirs[node] / "session_latest" / "logs"
        return sum(f":actor_name:{name}" in p.read_text(errors="replace") for p in logs.glob("worker-*.out"))


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now."""
    sockets = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def node_options(temp_dir: Path, ports: list[int], *, head: bool) -> str:
    """What this machine's second raylet needs beside the first: its own temp dir and
    ports, one CPU, on 127.0.0.1 (no network)."""
    names = ["node-manager-port", "object-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
             "runtime-env-agent-port", "metrics-export-port"]
    if head:
        names += ["ray-client-server-port", "dashboard-port"]
    options = [f"--{name}={port}" for name, port in zip(names, ports)]
    if head:
        options.append("--include-dashboard=false")
    return " ".join(["--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}", "--num-cpus=1", "--disable-usage-stats",
                     *options])


def localised(code: str, port: int, temp_dirs: tuple[Path, Path], ports: list[int]) -> str:
    """The README's block for two nodes on this machine: ``HEAD_IP`` is 127.0.0.1, the
    head's port ``port``, and each ``ray start`` gets its node's own options (before the
    line's comment)."""
    lines = []
    for line in code.replace("HEAD_IP", "127.0.0.1").replace("6379", str(port)).splitlines():
        command, hash_, comment = line.partition("  #")
        if command.startswith("ray start --head"):
            command = f"{command.rstrip()} {node_options(temp_dirs[0], ports[:8], head=True)} "
        elif command.startswith("ray start --address"):
            command = f"{command.rstrip()} {node_options(temp_dirs[1], ports[8:], head=False)} "
        lines.append(command + hash_ + comment)
    return "\n".join(lines) + "\n"


def group_pids(pgid: int) -> list[int]:
    """The processes of process group ``pgid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def stop_group(pgid: int, grace_s: float = 3.0) -> None:
    """SIGTERM each process of group ``pgid`` (the nodes this test started), then SIGKILL
    what is left after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in group_pids(pgid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while group_pids(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not group_pids(pgid):
            return


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """The README's cluster block, run on this machine (see :func:`localised`)."""
    # Short paths: a Unix socket's path (under the temp dir) has at most 107 characters.
    root = Path(tempfile.mkdtemp(prefix="pmr"))
    home, temp_dirs = root / "home", (root / "h", root / "w")
    home.mkdir()
    ports = free_ports(15)
    port = ports.pop()
    script = localised(CLUSTER_BLOCK.code, port, temp_dirs, ports)
    env = Cluster(f"127.0.0.1:{port}", home, temp_dirs, 0).env()
    proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", script], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"README.md:{CLUSTER_BLOCK.line} as run:\n{script}\n{out[-4000:]}"
        assert (home / ".ray" / "auth_token").is_file()
        yield Cluster(f"127.0.0.1:{port}", home, temp_dirs, proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
        stop_group(proc.pid)
        shutil.rmtree(root, ignore_errors=True)


def cli(cluster: Cluster, *args: str, env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``popmarl ARGS`` run as a driver of ``cluster``."""
    return subprocess.run([sys.executable, "-m", "popmarl.cli", *args], cwd=cluster.home, env=env, text=True,
                          capture_output=True, timeout=timeout)


def test_the_readme_cluster_runs_psro_and_marl_on_both_nodes(cluster: Cluster, tmp_path: Path) -> None:
    env = cluster.env(RAY_AUTH_MODE="token")
    backend = {"name": "ray", "params": {"address": cluster.address, "num_rollout_workers": 2,
                                         "num_cpus_per_worker": 1, "num_cpus_per_learner": 0}}
    # Kuhn poker PSRO, exact oracle: one rollout worker per node (each has one CPU).
    psro = cli(cluster, "run", str(EXAMPLES / "psro_kuhn.yaml"), "--out", str(tmp_path / "psro"),
               "--set", "stopping.max_iterations=2", "--set", "backend.name=ray",
               *(f"--set=backend.params.{k}={v}" for k, v in backend["params"].items()), env=env)
    assert psro.returncode == 0, psro.stderr
    assert json.loads((tmp_path / "psro" / "summary.json").read_text())["iterations"] == 2
    assert [cluster.actors(node, "RolloutWorkerActor") for node in (0, 1)] == [1, 1]
    # Ray's notices (token authentication, the connection) stay off the console. Left out:
    # a cluster node's own error that Ray forwards to every driver when, on a loaded
    # machine, its metrics agent starts late ("Failed to establish connection to the
    # event+metrics exporter agent"): the nodes', not the connection's, and not popmarl's.
    console = "\n".join(line for line in (psro.stdout + psro.stderr).splitlines()
                         if "metrics exporter agent" not in line and "metrics agent" not in line)
    assert not re.search(r"WARNING|INFO|gcs_client|[Tt]oken authentication|\x1b\[", console), console

    # marl: two bandit populations co-learn (the test's algorithm, registered in the driver only).
    marl = {"scenario": "marl", "env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 4}},
            "algorithm": {"name": "bandit"}, "stopping": {"max_iterations": 2},
            "training": {"max_env_steps": 400, "episodes_per_update": 25}, "trackers": [], "backend": backend}
    driver = textwrap.dedent(f"""\
        import json, sys
        sys.path.insert(0, {str(HERE)!r})
        import popmarl
        from ray_helpers import Bandit, run
        popmarl.algorithms = popmarl.algorithms.with_component("bandit", Bandit)
        print(json.dumps(run(json.loads(sys.argv[1]), sys.argv[2])))
        """)
    result = subprocess.run([sys.executable, "-c", driver, json.dumps(marl), str(tmp_path / "marl")],
                            cwd=cluster.home, env=env, text=True, capture_output=True, timeout=900)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert [cluster.actors(node, "RolloutWorkerActor") for node in (0, 1)] == [2, 2]
    assert not re.search(r"WARNING|gcs_client|[Tt]oken authentication", result.stderr), result.stderr


def one_line_error(cluster: Cluster, tmp_path: Path, env: dict[str, str], address: str,
                   *sets: str) -> tuple[str, float]:
    """The error line of a PSRO run on ``address``, and the seconds to it."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"env": {"name": "matrix", "params": {"game": "rps"}},
                                      "algorithm": {"name": "exact_matrix_br"}, "solver": {"name": "uniform"},
                                      "trackers": [], "backend": {"name": "ray", "params": {"address": address}}}))
    start = time.monotonic()
    result = cli(cluster, "run", str(config), "--out", str(tmp_path / "run"), *sets, env=env, timeout=900)
    seconds = time.monotonic() - start
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("popmarl: error: ray backend: "), result.stderr
    return lines[0], seconds


def test_a_driver_without_the_token_gets_one_line(cluster: Cluster, tmp_path: Path) -> None:
    line, seconds = one_line_error(cluster, tmp_path, cluster.env(), cluster.address)
    assert "uses token authentication and RAY_AUTH_MODE is not 'token' here" in line
    assert seconds < FAST_S


def test_a_wrong_token_gets_one_line(cluster: Cluster, tmp_path: Path) -> None:
    env = cluster.env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 64)
    line, seconds = one_line_error(cluster, tmp_path, env, cluster.address)
    assert "rejected this machine's authentication token (from RAY_AUTH_TOKEN)" in line
    assert seconds < FAST_S


def test_a_refused_port_gets_one_line(cluster: Cluster, tmp_path: Path) -> None:
    (port,) = free_ports(1)
    line, seconds = one_line_error(cluster, tmp_path, cluster.env(RAY_AUTH_MODE="token"), f"127.0.0.1:{port}")
    assert f"no Ray cluster at '127.0.0.1:{port}' (127.0.0.1:{port}: connection refused)" in line
    assert seconds < FAST_S


def test_a_silent_host_gets_one_line_after_the_connect_timeout(cluster: Cluster, tmp_path: Path) -> None:
    with socket.socket() as silent:  # the kernel accepts connections; nobody ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = "127.0.0.1:%d" % silent.getsockname()[1]
        line, seconds = one_line_error(cluster, tmp_path, cluster.env(RAY_AUTH_MODE="token"), address,
                                       "--set", "backend.params.connect_timeout_s=2")
    assert f"no answer from a Ray cluster at {address!r} within 2 s (connect_timeout_s)" in line
    assert 2 <= seconds < FAST_S + 2


def test_a_read_only_observation_batch_makes_no_torch_warning() -> None:
    """Arrays an actor gets from Ray's object store are read-only; the tianshou policies'
    features of them are torch tensors without torch's non-writable-array warning."""
    pytest.importorskip("popmarl_tianshou")
    import warnings

    import torch

    from popmarl.interfaces.spaces import Box
    from popmarl_torch.features import features

    obs = ray.get(ray.put(np.arange(12, dtype=np.float32).reshape(4, 3)))
    assert not obs.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = torch.from_numpy(features(Box(low=-1.0, high=20.0, shape=(3,)), obs))
    assert x.shape == (4, 3) and float(x.sum()) == 66.0


def test_rays_notices_while_connecting_stay_off_the_console(capfd: pytest.CaptureFixture[str]) -> None:
    """Ray's notice that token authentication is on (every local Ray of a run logs it)
    is kept for the driver's log, not printed."""
    from ray._private.authentication.authentication_token_setup import _warn_token_auth_enabled

    from popmarl_ray.cluster import ray_logs_off_console

    with ray_logs_off_console() as records:
        _warn_token_auth_enabled()
    out, err = capfd.readouterr()
    assert "Token authentication is enabled" not in out + err
    assert [r.levelname for r in records] == ["WARNING"] and "RAY_AUTH_MODE" in records[0].getMessage()
