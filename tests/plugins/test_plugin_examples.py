"""The example plugins under examples/plugins/ (shown on docs/plugins/) install by pip
offline, pass ``popmarl plugins --check``, and do what their pages say in a short run.

Each is copied out of the work tree (a build writes ``build/`` and ``*.egg-info`` next to
its sources) and installed with ``--target`` into a folder that the runs put on
``PYTHONPATH``: the test environment itself is left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "plugins"
#: Each example: its directory, and the (kind, name) it registers.
COMPONENTS = {
    "popmarl-bandit-pg": ("algorithm", "bandit_pg"),
    "popmarl-nim": ("env", "nim"),
    "popmarl-regret-matching": ("solver", "regret_matching"),
    "popmarl-br-dynamics": ("scenario", "best_response_dynamics"),
    "popmarl-csv-tracker": ("tracker", "csv"),
    "popmarl-counting-backend": ("backend", "counting"),
}
POPMARL = str(Path(sys.executable).parent / "popmarl")


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES.iterdir() if (p / "pyproject.toml").is_file()) == sorted(COMPONENTS)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every example, installed into one folder (one pip call: no network, no isolation)."""
    root = tmp_path_factory.mktemp("plugin-examples")
    sources = []
    for name in COMPONENTS:
        shutil.copytree(EXAMPLES / name, root / "src" / name,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        sources.append(str(root / "src" / name))
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                             "--no-index", "--target", str(root / "site"), *sources],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return root / "site"


def _popmarl(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "POPMARL_STRICT_PLUGINS": "1"}
    result = subprocess.run([POPMARL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"popmarl {' '.join(args)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _run(site: Path, tmp_path: Path, example: str, config: str, *sets: str) -> Path:
    out = tmp_path / "run"
    _popmarl(site, tmp_path, "run", str(EXAMPLES / example / config), "--out", str(out),
             *[a for s in sets for a in ("--set", s)])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed", summary
    return out


def test_plugins_check_finds_every_example_ok_with_its_api_declared(site: Path, tmp_path: Path) -> None:
    rows = _popmarl(site, tmp_path, "plugins", "--check").stdout.splitlines()
    for example, (kind, name) in COMPONENTS.items():
        (row,) = [r for r in rows if r.split()[:3] == [kind, name, example]]
        assert row.split()[-1] == "ok", row  # ok with no note: POPMARL_API is declared and current


def test_the_algorithm_learns_to_defect_in_the_prisoners_dilemma(site: Path, tmp_path: Path) -> None:
    out = _run(site, tmp_path, "popmarl-bandit-pg", "bandit_pg.yaml")
    for population in ("player_0", "player_1"):
        first = np.load(out / "checkpoints" / "policies" / population / "0.npz")["logits"]
        logits = np.load(out / "checkpoints" / "policies" / population / "1.npz")["logits"]
        probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        assert np.allclose(first, 0.0)  # uniform play to start with
        assert probs[1] > 0.9, probs  # defect: the best response to uniform play


def test_the_env_plays_zero_sum_games_of_nim(site: Path, tmp_path: Path) -> None:
    out = _run(site, tmp_path, "popmarl-nim", "nim.yaml")
    table = np.load(out / "payoffs.npz")
    assert table["filled"].all()
    assert np.allclose(table["payoffs"][0], -table["payoffs"][1])
    assert np.all(np.abs(table["payoffs"]) <= 1.0)
    # Both players always take three stones: from 7, player_0 takes the last one.
    script = """
import numpy as np
from popmarl_nim.nim import Nim
vector = Nim(stones=7, take=3).vector(num_envs=2, seed=0)
step, movers = vector.reset(), []
while not len(step.finished):
    (agent,) = step.decisions
    movers.append(agent)
    step = vector.step({agent: np.full(len(step.decisions[agent][0]), 2)})
assert movers == ["player_0", "player_1", "player_0"], movers
assert step.returns.tolist() == [[1.0, -1.0], [1.0, -1.0]], step.returns
"""
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_solver_mixes_rock_paper_scissors_uniformly(site: Path, tmp_path: Path) -> None:
    out = _run(site, tmp_path, "popmarl-regret-matching", "regret_matching.yaml")
    summary = json.loads((out / "summary.json").read_text())
    for mixture in summary["meta_strategies"].values():
        assert len(mixture) == 3 and min(mixture) >= 0 and sum(mixture) == pytest.approx(1.0)
        assert mixture == pytest.approx([1 / 3] * 3, abs=0.05)
    assert summary["nash_conv"] < 0.1


def test_the_scenario_cycles_through_rock_paper_scissors(site: Path, tmp_path: Path) -> None:
    out = _run(site, tmp_path, "popmarl-br-dynamics", "best_response_dynamics.yaml", "stopping.max_iterations=3")
    for population in ("player_0", "player_1"):
        played = [int(np.argmax(np.load(out / "checkpoints" / "policies" / population / f"{i}.npz")["probs"]))
                  for i in range(4)]
        assert played == [0, 1, 2, 0]  # rock, paper, scissors, rock
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["return/player_0"] for line in lines] == [0.0, 0.0, 0.0]  # a mirror match: a tie


def test_the_tracker_writes_one_row_per_iteration(site: Path, tmp_path: Path) -> None:
    out = _run(site, tmp_path, "popmarl-csv-tracker", "csv_tracker.yaml")
    header, *rows = (out / "metrics.csv").read_text().splitlines()
    assert header.split(",")[0] == "iteration" and "nash_conv" in header.split(",")
    assert [row.split(",")[0] for row in rows] == ["1", "2"]


def test_the_backend_counts_its_tasks(site: Path, tmp_path: Path) -> None:
    _run(site, tmp_path, "popmarl-counting-backend", "counting.yaml")
    counts = json.loads((tmp_path / "task_counts.json").read_text())
    assert counts["best_respond"] == 4  # 2 iterations x 2 populations, answered exactly
    assert "train" not in counts
    assert counts["policies"] == 6 and counts["evaluate"] > 0
