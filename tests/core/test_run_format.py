"""Run format 2 (``docs/run_format.md``): no file of a run directory repeats another, every
array is deflated, and a checkpoint reads back what it committed.

What "repeats" means here: a file whose bytes are another's, a metrics line found in
another file, an array (of 64 bytes or more) equal in value to one of another file. Two
files of the same role may hold equal contents when what they describe is equal (two
frozen policies that are the same best response, two learners in the same state): the
check compares files of different roles, and any two for metrics lines.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from learning_schedule import ScheduleAlgorithm
from popmarl.errors import CheckpointError
from popmarl.runs.rundir import FORMAT, RunDirectory, weights_digest
from testkit.run_files import read_metrics, without_times

FOUND = popmarl.Registries.current().with_component("algorithms", "schedule", ScheduleAlgorithm)
RPS = {"name": "matrix", "params": {"game": "rps"}}
CONFIGS: dict[str, dict[str, Any]] = {
    "psro": {"env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 12, "seed": 1}},
             "algorithm": "exact_matrix_br", "solver": "uniform"},
    "league": {"scenario": {"name": "league", "params": {"steps_per_round": 20}}, "env": RPS,
               "algorithm": {"name": "schedule"}, "solver": "latest",
               "training": {"episodes_per_update": 2}, "evaluation": {"episodes_per_entry": 4}},
    "marl": {"scenario": {"name": "marl", "params": {"frozen": {"player_1": "initial"}}}, "env": RPS,
             "algorithm": {"name": "schedule"}, "training": {"max_env_steps": 8, "episodes_per_update": 2},
             "evaluation": {"episodes_per_entry": 4}},
}
#: Arrays smaller than this may coincide (a one-hot pure strategy, a counter).
MIN_ARRAY_BYTES = 64
#: Shorter text lines may coincide (``{}``).
MIN_LINE = 16


def _run(tmp_path: Path, name: str, iterations: int = 4, resume: bool = False) -> Path:
    config = popmarl.validate({**CONFIGS[name], "stopping": {"max_iterations": iterations}, "trackers": []},
                              registries=FOUND)
    path = tmp_path / name
    if resume:
        popmarl.run(config, resume=str(path), registries=FOUND)
    else:
        popmarl.run(config, out=str(path), registries=FOUND)
    return path


def role(path: Path) -> str:
    """What a file of a run directory is, its population, learner and iteration left out."""
    parts = path.parts
    if parts[:2] == ("checkpoints", "policies"):
        return "policy"
    if parts[0] == "checkpoints" and parts[1].startswith("learners-"):
        return "learner/" + re.sub(r"member-\d+", "member", "/".join(parts[3:]))
    return "/".join(parts)


def _files(root: Path) -> list[Path]:
    return [p.relative_to(root) for p in sorted(root.rglob("*")) if p.is_file()]


def _arrays(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            for key in data.files:
                yield key, data[key]


def _value_key(array: np.ndarray) -> str:
    """Equal for arrays of equal shape and values, whatever their numeric dtype."""
    if array.dtype.kind in "biuf":
        array = array.astype(np.float64)
    return hashlib.sha256(f"{array.shape}{array.dtype.str}".encode() + np.ascontiguousarray(array).tobytes()).hexdigest()


def repetitions(root: Path) -> list[str]:
    """Every repetition in run directory ``root`` (see the module), described."""
    files = _files(root)
    found: list[str] = []
    by_bytes: dict[str, list[Path]] = {}
    for f in files:
        if (root / f).stat().st_size:
            by_bytes.setdefault(hashlib.sha256((root / f).read_bytes()).hexdigest(), []).append(f)
    found += [f"same bytes: {', '.join(map(str, group))}" for group in by_bytes.values()
              if len({role(f) for f in group}) > 1]
    texts = {f: (root / f).read_text(encoding="utf-8") for f in files if f.suffix in (".jsonl", ".json", ".yaml")}
    for f in files:
        if f.suffix == ".jsonl":
            lines = [line for line in texts[f].splitlines() if len(line) >= MIN_LINE]
            found += [f"{f}'s lines in {g}" for g, text in texts.items() if g != f and any(x in text for x in lines)]
    arrays: dict[str, set[tuple[Path, str]]] = {}
    for f in files:
        for key, array in _arrays(root / f):
            if array.nbytes >= MIN_ARRAY_BYTES:
                arrays.setdefault(_value_key(array), set()).add((f, key))
    found += [f"equal arrays: {sorted(map(str, group))}" for group in arrays.values()
              if len({role(f) for f, _ in group}) > 1]
    return found


def stored_arrays(root: Path) -> list[str]:
    """The ``.npz`` files of ``root`` with a member that is not deflated."""
    return [str(f) for f in _files(root) if f.suffix == ".npz"
            and any(i.compress_type != zipfile.ZIP_DEFLATED for i in zipfile.ZipFile(root / f).infolist())]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_no_file_of_a_run_directory_repeats_another(name: str, tmp_path: Path) -> None:
    path = _run(tmp_path, name)
    assert repetitions(path) == []
    assert stored_arrays(path) == []
    assert not (path / "checkpoints" / "history.jsonl").exists()
    assert json.loads((path / "checkpoints" / "state.json").read_text())["format"] == FORMAT == 2


def test_the_check_finds_what_format_1_repeated(tmp_path: Path) -> None:
    """Format 1's copies, put back into a format-2 run, are each found."""
    path = _run(tmp_path, "psro")
    assert repetitions(path) == []
    (path / "checkpoints" / "history.jsonl").write_bytes((path / "metrics.jsonl").read_bytes())
    with np.load(path / "payoffs.npz") as table:
        np.savez(path / "checkpoints" / "copy.npz", payoffs=table["payoffs"])
    found = repetitions(path)
    assert any(f.startswith("same bytes") and "history.jsonl" in f for f in found)
    assert any("history.jsonl's lines in metrics.jsonl" in f for f in found)
    assert any(f.startswith("equal arrays") and "copy.npz" in f and "payoffs.npz" in f for f in found)
    assert stored_arrays(path) == ["checkpoints/copy.npz"]


def test_the_checkpoint_commits_payoffs_npz_and_metrics_lines(tmp_path: Path) -> None:
    """psro's table is payoffs.npz itself, its history the lines of metrics.jsonl; they
    read back as the scenario committed them."""
    path = _run(tmp_path, "psro")
    run = RunDirectory(path)
    state, arrays = run.load_state()
    with np.load(path / "checkpoints" / state["arrays"]) as own:
        assert "payoffs" not in own.files and "meta_0" in own.files
    with np.load(path / "payoffs.npz") as table:
        for key in table.files:
            np.testing.assert_array_equal(arrays[key], table[key])
    metrics = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert state["history"] == metrics and state["history_length"] == 4


def test_a_learner_whose_weights_are_a_frozen_policys_names_it(tmp_path: Path) -> None:
    path = _run(tmp_path, "marl")
    run = RunDirectory(path)
    state, _ = run.load_state()
    meta = json.loads(next((path / "checkpoints" / state["learners"]).glob("*/learner.json")).read_text())
    assert "weights_policy" in meta and not (path / "checkpoints" / state["learners"] / meta["key"] /
                                             "weights.npz").exists()
    learner = run.load_learners(state)[meta["key"]]
    expected = run.load_policy(meta["weights_policy"])
    assert sorted(learner.weights) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(learner.weights[key], expected[key])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_resumed_run_ends_as_a_straight_one_and_repeats_nothing(name: str, tmp_path: Path) -> None:
    straight = _run(tmp_path / "straight", name, iterations=4)
    _run(tmp_path / "split", name, iterations=2)
    split = _run(tmp_path / "split", name, iterations=4, resume=True)
    assert repetitions(split) == []
    assert [without_times(m) for m in read_metrics(split)] == [without_times(m) for m in read_metrics(straight)]
    for f in _files(straight):
        if f.suffix == ".npz":
            assert (split / f).read_bytes() == (straight / f).read_bytes(), f


def test_a_learner_that_names_a_policy_of_other_weights_is_a_checkpoint_error(tmp_path: Path) -> None:
    path = _run(tmp_path, "marl")
    run = RunDirectory(path)
    state, _ = run.load_state()
    meta_file = next((path / "checkpoints" / state["learners"]).glob("*/learner.json"))
    meta = json.loads(meta_file.read_text())
    other = next(p for p in state["policies"][meta["population"]]
                 if weights_digest(run.load_policy(p)) != meta["weights_digest"])
    meta_file.write_text(json.dumps({**meta, "weights_policy": other}))
    with pytest.raises(CheckpointError, match="weights are not the learner's"):
        run.load_learners(state)


def _as_format_1(path: Path) -> None:
    """Rewrite a psro run's checkpoint as format 1 wrote it: the history copied into
    ``checkpoints/history.jsonl``, the payoff table in the iteration's arrays."""
    state_file = path / "checkpoints" / "state.json"
    state = json.loads(state_file.read_text())
    with np.load(path / "checkpoints" / state["arrays"]) as own, np.load(path / "payoffs.npz") as table:
        arrays = {**{k: own[k] for k in own.files}, "payoffs": table["payoffs"], "filled": table["filled"]}
    np.savez(path / "checkpoints" / state["arrays"], **arrays)
    (path / "checkpoints" / "history.jsonl").write_bytes((path / "metrics.jsonl").read_bytes())
    state.pop("payoffs")
    state_file.write_text(json.dumps({**state, "format": 1}))


def test_a_format_1_run_reads_and_resumes_into_format_2(tmp_path: Path) -> None:
    straight = _run(tmp_path / "straight", "psro", iterations=4)
    path = _run(tmp_path / "split", "psro", iterations=2)
    _as_format_1(path)
    state, arrays = RunDirectory(path).load_state()
    assert state["format"] == 1 and len(state["history"]) == 2 and arrays["payoffs"].shape == (2, 3, 3)
    _run(tmp_path / "split", "psro", iterations=4, resume=True)
    assert json.loads((path / "checkpoints" / "state.json").read_text())["format"] == 2
    assert not (path / "checkpoints" / "history.jsonl").exists()
    assert repetitions(path) == []
    assert [without_times(m) for m in read_metrics(path)] == [without_times(m) for m in read_metrics(straight)]
    assert (path / "payoffs.npz").read_bytes() == (straight / "payoffs.npz").read_bytes()
