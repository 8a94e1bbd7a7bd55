"""The command line (popmarl.cli) doing its jobs, through real subprocesses: done-when (1)
the RPS demo converges, (5) ``popmarl plugins [--check]``, and ``popmarl show``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import yaml

import popmarl
from popmarl.plugins.hooks import PLUGIN_GROUP
from popmarl.plugins.registry import KINDS, STRICT_ENV

from testkit.run_files import read_metrics, read_npz, read_summary


def _popmarl_script() -> str:
    script = Path(sys.executable).with_name("popmarl")
    found = str(script) if script.exists() else shutil.which("popmarl")
    assert found, "the `popmarl` console script is not installed next to this interpreter"
    return found


def test_rps_demo_converges_through_the_popmarl_command(write_config, tmp_path: Path) -> None:
    """Done-when (1): rps + exact_matrix_br + uniform + 300 iterations, NashConv <= 0.1."""
    config = write_config(stopping={"max_iterations": 300})
    out = tmp_path / "rps"
    proc = subprocess.run([_popmarl_script(), "run", str(config), "--out", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    summary = read_summary(out)
    assert summary["status"] == "completed" and summary["stop_reason"] == "max_iterations"
    assert summary["iterations"] == 300
    assert summary["nash_conv"] <= 0.1
    assert summary["exploitability"] == pytest.approx(summary["nash_conv"] / 2)
    metrics = read_metrics(out)
    assert [m["iteration"] for m in metrics] == list(range(1, 301))
    assert metrics[0]["nash_conv"] >= 1.0 and metrics[-1]["nash_conv"] <= 0.1  # it did have to converge
    for population in ("player_0", "player_1"):
        info = summary["populations"][population]
        assert len(info["policies"]) == 301
        np.testing.assert_allclose(info["meta_strategy"], np.full(301, 1 / 301))
    # The run directory holds everything DESIGN section 6 promises.
    for name in ("config.yaml", "summary.json", "metrics.jsonl", "payoffs.npz", "checkpoints"):
        assert (out / name).exists(), name
    assert read_npz(out / "payoffs.npz")["payoffs"].shape == (2, 301, 301)
    resolved = yaml.safe_load((out / "config.yaml").read_text())
    assert resolved["stopping"]["max_iterations"] == 300
    assert resolved["env"]["params"]["game"] == "rps" and "size" in resolved["env"]["params"]
    for key in ("scenario", "iterations", "populations", "nash_conv", "exploitability", "env_steps", "wall_time_s",
                "status"):
        assert key in summary, key


def test_set_overrides_reach_the_run(run_cli, write_config, tmp_path: Path) -> None:
    result = run_cli("run", write_config(), "--set", "stopping.max_iterations=2", "--set", "solver=latest",
                     "--set", "seed=4", "--out", tmp_path / "out")
    assert result.returncode == 0, result
    summary = read_summary(tmp_path / "out")
    assert summary["iterations"] == 2 and summary["seed"] == 4
    assert summary["populations"]["player_0"]["meta_strategy"] == [0.0, 0.0, 1.0]
    resolved = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert resolved["solver"]["name"] == "latest" and resolved["seed"] == 4


def test_default_out_directory_is_under_runs(run_cli, write_config, tmp_path: Path) -> None:
    result = run_cli("run", write_config(stopping={"max_iterations": 1}))
    assert result.returncode == 0, result
    made = list((tmp_path / "runs").iterdir())
    assert len(made) == 1 and made[0].name.startswith("psro-matrix-")
    assert read_summary(made[0])["status"] == "completed"


# -- popmarl plugins --------------------------------------------------------------------------

def _rows(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    assert lines[0].split()[:4] == ["kind", "name", "distribution", "version"]
    return [line.split() for line in lines[1:]]


def test_plugins_lists_every_component_with_its_distribution_and_version(run_cli) -> None:
    result = run_cli("plugins")
    assert result.returncode == 0, result
    rows = {(r[0], r[1]): r for r in _rows(result.stdout)}
    expected = 0
    for kind in KINDS:
        for name, entry in getattr(popmarl, kind).entries.items():
            row = rows[(kind[:-1], name)]
            assert row[2] == entry.distribution
            assert row[3] == metadata.version(entry.distribution)
            expected += 1
    for ep in metadata.entry_points(group=PLUGIN_GROUP):
        assert ("hooks", ep.name) in rows
        expected += 1
    assert len(rows) == expected
    assert rows[("solver", "uniform")][2:4] == ["popmarl", popmarl.__version__]


@pytest.fixture
def probe_dists(make_dist, tmp_path: Path):
    """One distribution whose module leaves a marker file when imported, one that cannot import."""
    marker = tmp_path / "imported.marker"
    good = make_dist("popmarl-probe-good", version="3.1.4", on_path=False,
                     entry_points={"popmarl.solvers": {"probe_good": "probe_good_mod:Solver"},
                                   PLUGIN_GROUP: {"probe_hooks": "probe_hooks_mod"}},
                     modules={"probe_good_mod": f"""
                         import pathlib
                         pathlib.Path({str(marker)!r}).write_text("imported")
                         print("a plugin that prints when imported")
                         from popmarl.builtin.solvers import Uniform as Solver
                         """,
                              "probe_hooks_mod": "x = 1\n"})
    bad = make_dist("popmarl-probe-bad", version="0.0.1", on_path=False,
                    entry_points={"popmarl.algorithms": {"probe_bad": "probe_bad_mod:Algo"}},
                    modules={"probe_bad_mod": "import no_such_module_for_probe\n"})
    return marker, [good.site, bad.site]


def test_plugins_lists_without_importing(run_cli, probe_dists) -> None:
    marker, sites = probe_dists
    result = run_cli("plugins", pythonpath=sites, env={STRICT_ENV: "1"})
    assert result.returncode == 0, result
    rows = {(r[0], r[1]): r for r in _rows(result.stdout)}
    assert rows[("solver", "probe_good")][2:4] == ["popmarl-probe-good", "3.1.4"]
    assert rows[("algorithm", "probe_bad")][2:4] == ["popmarl-probe-bad", "0.0.1"]
    assert rows[("hooks", "probe_hooks")][2:4] == ["popmarl-probe-good", "3.1.4"]
    assert not marker.exists(), "listing imported a plugin"


def test_plugins_check_imports_each_component_and_reports_failures(run_cli, probe_dists, make_dist) -> None:
    """One ``--check`` of everything installed (each distribution imported in a child
    interpreter, in parallel) plus the probes; hook plugins are checked too."""
    marker, sites = probe_dists
    bad_hooks = make_dist("popmarl-probe-bad-hooks", version="0.0.2", on_path=False,
                          entry_points={PLUGIN_GROUP: {"probe_bad_hooks": "probe_bad_hooks_mod"}},
                          modules={"probe_bad_hooks_mod": "raise RuntimeError('probe hook plugin is broken')\n"})
    crash = make_dist("popmarl-probe-crash", on_path=False,
                      entry_points={"popmarl.envs": {"probe_crash": "probe_crash_mod:Env"}},
                      modules={"probe_crash_mod": "import os\nos._exit(3)\n"})
    # Not strict: a broken hook plugin would otherwise stop the command line before the check.
    result = run_cli("plugins", "--check", pythonpath=[*sites, bad_hooks.site, crash.site], env={STRICT_ENV: "0"})
    assert result.returncode == 1, result
    assert marker.exists(), "--check did not import the plugin"
    rows = {(r[0], r[1]): r for r in _rows(result.stdout)}
    assert rows[("solver", "probe_good")][4] == "ok"
    assert rows[("hooks", "probe_hooks")][4] == "ok"
    assert rows[("algorithm", "probe_bad")][4:6] == ["FAILED:", "ModuleNotFoundError:"]
    assert "no_such_module_for_probe" in " ".join(rows[("algorithm", "probe_bad")])
    assert rows[("hooks", "probe_bad_hooks")][4:6] == ["FAILED:", "RuntimeError:"]
    assert "probe hook plugin is broken" in " ".join(rows[("hooks", "probe_bad_hooks")])
    # A plugin that kills its interpreter fails its own check, and only its own.
    assert "FAILED: the check's interpreter exited with status 3" in " ".join(rows[("env", "probe_crash")])
    # Every installed component and hook plugin besides the broken probes imports fine.
    broken = {("algorithm", "probe_bad"), ("hooks", "probe_bad_hooks"), ("env", "probe_crash")}
    others = [row for key, row in rows.items() if key not in broken]
    assert others and all(row[4] == "ok" for row in others), [r for r in others if r[4] != "ok"]
    for kind in KINDS:
        for name in getattr(popmarl, kind).names():
            assert (kind[:-1], name) in rows
    for ep in metadata.entry_points(group=PLUGIN_GROUP):
        assert rows[("hooks", ep.name)][4] == "ok"


def test_version_prints_popmarl_and_each_installed_plugin(run_cli, probe_dists) -> None:
    _, sites = probe_dists
    result = run_cli("--version", pythonpath=sites)
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0] == f"popmarl {popmarl.__version__}"
    assert "popmarl-probe-good 3.1.4" in lines and "popmarl-probe-bad 0.0.1" in lines
    for dist in metadata.distributions():  # every installed distribution registering popmarl entry points
        if dist.metadata["Name"] != "popmarl" and any(ep.group.startswith("popmarl.") for ep in dist.entry_points):
            assert f"{dist.metadata['Name']} {dist.version}" in lines
    assert len(lines) == len(set(lines))


# -- popmarl show -----------------------------------------------------------------------------

def test_show_prints_summary_table_and_meta_strategies(run_inprocess, run_cli, tmp_path: Path) -> None:
    summary = run_inprocess(stopping={"max_iterations": 3}, trackers=["jsonl"])
    result = run_cli("show", tmp_path / "run")
    assert result.returncode == 0, result
    out = result.stdout
    fields = dict(line.split(None, 1) for line in out.splitlines()[:8] if len(line.split(None, 1)) == 2)
    assert fields["status"] == "completed" and fields["iterations"] == "3" and fields["scenario"] == "psro"
    assert float(fields["nash_conv"]) == pytest.approx(summary["nash_conv"])
    assert "population player_0: 4 policies; meta-strategy [0.250 0.250 0.250 0.250]" in out
    assert "payoffs of player_0 (rows) vs player_1 (columns)" in out
    table = [line.split() for line in out.splitlines() if line.startswith("player_0/")]
    values = read_npz(tmp_path / "run" / "payoffs.npz")["payoffs"][0]
    assert [float(v) for v in table[1][1:]] == pytest.approx(values[1].tolist(), abs=1e-4)
    listed = [line.split(None, 1) for line in out.splitlines()[-8:]]
    run = tmp_path / "run"
    expected = sorted(p.name for p in run.iterdir())
    assert [(kind, Path(path).name) for kind, path in listed[-len(expected):]] == [
        ("directory" if (run / name).is_dir() else "file", name) for name in expected]
    assert {"config.yaml", "summary.json", "metrics.jsonl", "payoffs.npz", "events.jsonl", "checkpoints"} <= set(expected)
    assert f"directory  {run / 'checkpoints'}/" in out.splitlines()


def test_show_summarises_a_long_meta_strategy_by_its_support(run_inprocess, run_cli, tmp_path: Path) -> None:
    summary = run_inprocess(solver="latest", stopping={"max_iterations": 14})  # self-play: all weight on the last
    assert summary["populations"]["player_0"]["meta_strategy"][-1] == 1.0
    result = run_cli("show", tmp_path / "run")
    assert result.returncode == 0, result
    assert "population player_0: 15 policies; meta-strategy support 1; largest: player_0/14 1.000" in result.stdout


def test_show_output_piped_into_a_closed_pipe_is_not_an_error(run_inprocess, cli, tmp_path: Path) -> None:
    run_inprocess(stopping={"max_iterations": 20})
    proc = subprocess.run(f"{' '.join(cli.command(['show', str(tmp_path / 'run')]))} | head -n 1", shell=True,
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_help_and_exit_statuses(run_cli) -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("run", "plugins", "show"):
        assert command in result.stdout
    assert run_cli().returncode == 2  # a command is required


def test_summary_json_is_plain_json(run_inprocess, tmp_path: Path) -> None:
    run_inprocess(stopping={"max_iterations": 1})
    text = (tmp_path / "run" / "summary.json").read_text()
    assert json.loads(text)["status"] == "completed"
    assert "NaN" not in text and "Infinity" not in text


def test_summary_json_puts_headline_figures_before_the_policy_lists(run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(stopping={"max_iterations": 12})
    text = (tmp_path / "run" / "summary.json").read_text()
    assert json.loads(text) == json.loads(json.dumps(summary))
    keys = list(json.loads(text))
    assert keys[-2:] == ["populations", "meta_strategies"]
    assert keys.index("nash_conv") < 10 and keys.index("iterations") < 10 and keys.index("status") < 10
    lines = text.splitlines()
    headline = max(i for i, line in enumerate(lines) if line.startswith(('  "nash_conv"', '  "wall_time_s"')))
    assert headline < 12, text  # the figures come first, unburied
    ids = summary["populations"]["player_0"]["policies"]
    assert len(ids) == 13 and sum(ids[0] in line for line in lines) == 1  # a policy list is one line
