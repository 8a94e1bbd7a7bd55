"""Done-when (4): a run killed with SIGKILL at any point and continued with ``--resume``
ends exactly as an uninterrupted run (summary minus wall times, payoffs.npz, one
metrics.jsonl line per iteration); resuming a completed run changes nothing."""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest

from testkit.run_files import assert_same_arrays, read_metrics, read_npz, read_summary, tree_digest, without_times

#: Long enough to be killed in the middle: each iteration adds a row and a column to a
#: growing table and checkpoints it.
ITERATIONS = 150
KILL_CONFIG = {"env": {"params": {"game": "random_general_sum", "size": 30, "seed": 0}},
               "stopping": {"max_iterations": ITERATIONS}}
SEED = int(os.environ.get("POPMARL_TEST_KILL_SEED", random.SystemRandom().randrange(1 << 30)))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, config_writer, cli):
    """An uninterrupted run of KILL_CONFIG, and how long it ran once its directory existed."""
    root = tmp_path_factory.mktemp("reference")
    config = config_writer(root, **KILL_CONFIG)
    proc = cli.popen("run", config, "--out", root / "run", cwd=root)
    _wait_for(root / "run" / "config.yaml", proc)
    start = time.monotonic()
    _, stderr = proc.communicate(timeout=600)
    seconds = time.monotonic() - start
    assert proc.returncode == 0, stderr
    return root / "run", seconds


def _assert_same_run(run: Path, reference_run: Path) -> None:
    summary, expected = read_summary(run), read_summary(reference_run)
    assert summary["status"] == "completed" and summary["iterations"] == ITERATIONS
    assert without_times(summary) == without_times(expected)
    for key in ("populations", "meta_strategies", "nash_conv", "iterations"):
        assert summary[key] == expected[key], key
    assert_same_arrays(read_npz(run / "payoffs.npz"), read_npz(reference_run / "payoffs.npz"))
    metrics, expected_metrics = read_metrics(run), read_metrics(reference_run)
    assert [m["iteration"] for m in metrics] == list(range(1, ITERATIONS + 1)), "one line per iteration"
    assert [without_times(m) for m in metrics] == [without_times(m) for m in expected_metrics]


def _wait_for(path: Path, proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.001)


#: Where to kill: as soon as the run directory exists (before or during the first
#: checkpoint), then at a random moment of a random iteration early in the run and late in
#: it (progress, not wall time, picks the iteration, so a loaded machine cannot make the
#: run finish before the kill).
KILL_POINTS = {"as_soon_as_the_directory_exists": None, "random_early": (1, 30), "random_late": (60, 140)}


def _wait_for_iterations(metrics: Path, count: int, proc) -> None:
    deadline = time.monotonic() + 600
    while not metrics.exists() or metrics.read_bytes().count(b"\n") < count:
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, f"{metrics} never reached {count} lines"
        time.sleep(0.002)


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill_9_then_resume_ends_like_an_uninterrupted_run(point, reference, tmp_path, write_config, popen_cli,
                                                           run_cli) -> None:
    reference_run, seconds = reference
    rng = random.Random(f"{SEED}-{point}")
    config = write_config(**KILL_CONFIG)
    run = tmp_path / "run"
    proc = popen_cli("run", config, "--out", run)
    try:
        _wait_for(run / "config.yaml", proc)
        if KILL_POINTS[point] is not None:
            _wait_for_iterations(run / "metrics.jsonl", rng.randint(*KILL_POINTS[point]), proc)
            time.sleep(rng.uniform(0, 2 * seconds / ITERATIONS))  # somewhere in the next iteration or two
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=600)
    context = f"kill point {point}, POPMARL_TEST_KILL_SEED={SEED}"
    assert proc.returncode == -signal.SIGKILL, f"the run was not killed mid-way ({context}): {stderr}"
    done = len(read_metrics(run)) if (run / "metrics.jsonl").exists() else 0
    assert done < ITERATIONS, context

    result = run_cli("run", config, "--resume", run)
    assert result.returncode == 0, f"{context}\n{result}"
    _assert_same_run(run, reference_run)


def test_resume_of_a_completed_run_changes_nothing(reference, tmp_path, write_config, run_cli) -> None:
    reference_run, _ = reference
    run = tmp_path / "run"
    shutil.copytree(reference_run, run)
    before = tree_digest(run)
    result = run_cli("run", write_config(**KILL_CONFIG), "--resume", run)
    assert result.returncode == 0, result
    summary = read_summary(run)
    assert summary["status"] == "completed"
    assert without_times(summary) == without_times(read_summary(reference_run))
    after = tree_digest(run)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed in ([], ["summary.json"]), changed  # at most the summary's wall time is rewritten


def test_resume_with_more_iterations_continues_the_run(run_inprocess, tmp_path: Path) -> None:
    """Stopping may change on resume: 3 iterations then 3 more equal 6 straight."""
    config = {"env": {"params": {"game": "random_zero_sum", "size": 7, "seed": 2}}}
    run_inprocess(out="straight", stopping={"max_iterations": 6}, **config)
    first = run_inprocess(out="split", stopping={"max_iterations": 3}, **config)
    assert first["iterations"] == 3
    resumed = run_inprocess(resume="split", stopping={"max_iterations": 6}, **config)
    assert without_times(resumed) == without_times(read_summary(tmp_path / "straight"))
    assert [m["iteration"] for m in read_metrics(tmp_path / "split")] == [1, 2, 3, 4, 5, 6]
    assert_same_arrays(read_npz(tmp_path / "split" / "payoffs.npz"), read_npz(tmp_path / "straight" / "payoffs.npz"))


def test_readme_run_then_resume_continues_the_run_as_configured(run_cli, write_config, tmp_path: Path) -> None:
    """The README's two lines: `run CONFIG --out D --set stopping.max_iterations=N`, then
    `run --resume D` continues with D's config (N), not the file's max_iterations."""
    config = write_config(stopping={"max_iterations": 30})
    first = run_cli("run", config, "--out", "runs/demo", "--set", "stopping.max_iterations=2")
    assert first.returncode == 0, first
    resumed = run_cli("run", "--resume", "runs/demo")
    assert resumed.returncode == 0, resumed
    summary = read_summary(tmp_path / "runs" / "demo")
    assert summary["iterations"] == 2 and summary["status"] == "completed"
    assert len(read_metrics(tmp_path / "runs" / "demo")) == 2
    assert "resume:" not in resumed.stdout
    # The file's config, which says 30, is refused rather than silently run on to 30.
    before = tree_digest(tmp_path / "runs" / "demo")
    refused = run_cli("run", config, "--resume", "runs/demo")
    assert refused.returncode == 2 and "stopping.max_iterations" in refused.stderr, refused
    assert tree_digest(tmp_path / "runs" / "demo") == before
    # The command that made the run, repeated with --resume for --out, continues it as is.
    again = run_cli("run", config, "--resume", "runs/demo", "--set", "stopping.max_iterations=2")
    assert again.returncode == 0 and "resume:" not in again.stdout, again
    assert read_summary(tmp_path / "runs" / "demo")["iterations"] == 2


def test_resume_applies_and_says_an_explicit_stopping_change(run_cli, write_config, tmp_path: Path) -> None:
    run_cli("run", write_config(stopping={"max_iterations": 2}, trackers=["console"]), "--out", "run")
    result = run_cli("run", "--resume", "run", "--set", "stopping.max_iterations=4")
    assert result.returncode == 0, result
    assert result.stdout.splitlines()[0] == "resume: stopping.max_iterations 2 -> 4"
    assert read_summary(tmp_path / "run")["iterations"] == 4
    metrics = read_metrics(tmp_path / "run")
    assert [m["iteration"] for m in metrics] == [1, 2, 3, 4]
    # The console's rows show the run's elapsed time, carried over the resume.
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("iteration ")]
    assert [(row[1], row[-1]) for row in rows] == [(f"{m['iteration']}/4", f"{m['wall_time_s']:.1f}s")
                                                   for m in metrics[2:]]
    assert "max_iterations: 4" in (tmp_path / "run" / "config.yaml").read_text()


def test_resume_below_the_iterations_done_says_it_stops_at_once(run_inprocess, tmp_path: Path, capsys) -> None:
    run_inprocess(stopping={"max_iterations": 3})
    capsys.readouterr()
    resumed = run_inprocess(resume="run", overrides=["stopping.max_iterations=2"])
    assert resumed["iterations"] == 3
    assert capsys.readouterr().out.splitlines()[:2] == [
        "resume: stopping.max_iterations 3 -> 2",
        "resume: the run has done 3 iterations already, so it stops at once; "
        "to go on, set stopping.max_iterations above 3"]
    # Raised again, it goes on and says nothing more.
    run_inprocess(resume="run", overrides=["stopping.max_iterations=4"])
    assert capsys.readouterr().out.splitlines()[:1] == ["resume: stopping.max_iterations 2 -> 4"]
    assert read_summary(tmp_path / "run")["iterations"] == 4


def test_resume_refuses_a_corrupt_checkpoint_without_touching_it(run_inprocess, run_cli, write_config,
                                                                  tmp_path: Path) -> None:
    run_inprocess(stopping={"max_iterations": 2})
    state = tmp_path / "run" / "checkpoints" / "state.json"
    state.write_text("{ not json")
    before = tree_digest(tmp_path / "run")
    result = run_cli("run", "--resume", tmp_path / "run", "--set", "stopping.max_iterations=4")
    assert result.returncode == 2, result
    assert result.stdout == "", result  # the stopping change is not announced: nothing happens
    assert result.stderr.count("\n") == 1 and "state.json" in result.stderr and "Traceback" not in result.stderr
    assert tree_digest(tmp_path / "run") == before


def test_resume_of_a_run_killed_before_its_first_checkpoint_starts_it_afresh(run_inprocess, write_config,
                                                                             tmp_path: Path) -> None:
    """What a kill leaves between creating the directory and committing iteration 0."""
    import popmarl
    from popmarl.config.schema import dump
    from popmarl.runs.rundir import RunDirectory

    straight = run_inprocess(out="straight")
    config = popmarl.load_config(str(write_config()))
    RunDirectory(tmp_path / "early").create(dump(config))
    assert not RunDirectory(tmp_path / "early").state_file.exists()
    resumed = popmarl.run(config, resume=str(tmp_path / "early"))
    assert without_times(resumed) == without_times(straight)
    assert [m["iteration"] for m in read_metrics(tmp_path / "early")] == [1, 2, 3]


def test_resume_rebuilds_a_payoff_file_the_kill_left_stale(run_inprocess, tmp_path: Path) -> None:
    """A kill between a checkpoint's commit (state.json naming the new table, written as
    checkpoints/payoffs-<iteration>.npz) and its renaming to payoffs.npz, at the last
    iteration: resuming must not leave the previous iteration's table behind."""
    run_inprocess(out="two", stopping={"max_iterations": 2})
    run_inprocess(out="three", stopping={"max_iterations": 3})
    expected = read_npz(tmp_path / "three" / "payoffs.npz")
    shutil.move(tmp_path / "three" / "payoffs.npz", tmp_path / "three" / "checkpoints" / "payoffs-000003.npz")
    shutil.copy(tmp_path / "two" / "payoffs.npz", tmp_path / "three" / "payoffs.npz")
    run_inprocess(resume="three", stopping={"max_iterations": 3})
    assert_same_arrays(read_npz(tmp_path / "three" / "payoffs.npz"), expected)
    assert not (tmp_path / "three" / "checkpoints" / "payoffs-000003.npz").exists()


def test_frozen_policies_are_stored_deflated_and_load_exactly(tmp_path: Path) -> None:
    """A run keeps every frozen policy; tables of repetitive entries (a tabular policy's
    information-state keys) take a fraction of their raw size, and load back bit-exact."""
    import numpy as np

    from popmarl.runs.rundir import RunDirectory

    run = RunDirectory(tmp_path / "run")
    run.create("seed: 0\n")
    keys = np.array([f"[Observer: 0][Private: {i % 6}][Round 1][Player: 0][Pot: {i}]" for i in range(500)])
    probs = np.random.default_rng(0).dirichlet(np.ones(3), size=500)
    run.save_policy("player_0/1", {"keys": keys, "probs": probs, "players": np.zeros(500, np.int64)})
    stored = run.checkpoints / "policies" / "player_0" / "1.npz"
    assert stored.stat().st_size < (keys.nbytes + probs.nbytes) / 4
    loaded = run.load_policy("player_0/1")
    assert loaded["keys"].dtype == keys.dtype and loaded["probs"].dtype == np.float64
    assert_same_arrays(loaded, {"keys": keys, "probs": probs, "players": np.zeros(500, np.int64)})


def test_out_of_a_finished_run_from_python_names_the_keywords_too(run_inprocess, tmp_path: Path) -> None:
    """``popmarl.run(out=...)`` into a run's directory: one line that a Python caller can act
    on as well as a command-line one (``out=`` / ``resume=``, not only ``--out``)."""
    from popmarl.errors import UserError

    run_inprocess(stopping={"max_iterations": 1})
    before = tree_digest(tmp_path / "run")
    with pytest.raises(UserError) as info:
        run_inprocess(stopping={"max_iterations": 1})
    message = str(info.value)
    assert "\n" not in message and "already holds a run" in message
    assert "out=" in message and "resume=" in message and f"--resume {tmp_path / 'run'}" in message
    assert tree_digest(tmp_path / "run") == before
