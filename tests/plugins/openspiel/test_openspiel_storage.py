"""How a run stores tabular policies: compactly (every frozen policy is kept, 2 a
Leduc iteration), losslessly, and resumably from both the compact and the earlier
uncompressed files."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from openspiel_helpers import requires_nash

import popmarl
from popmarl.runs.rundir import RunDirectory

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
#: A Leduc best response as ``np.savez`` wrote it is 220-224 KB, 96% of it the
#: information-state keys as fixed-width UTF-32.
UNCOMPRESSED_BYTES = 200_000


def _leduc(tmp_path: Path, iterations: int, **where: str) -> dict:
    config = popmarl.load_config(str(EXAMPLES / "psro_leduc.yaml"),
                                 [f"stopping.max_iterations={iterations}", "trackers=[jsonl]"])
    return popmarl.run(config, **{k: str(tmp_path / v) for k, v in where.items()})


def _policy_files(run: Path) -> list[Path]:
    return sorted((run / "checkpoints" / "policies").glob("*/*.npz"))


@requires_nash
def test_leduc_policies_take_a_few_kilobytes_each_and_load_exactly(tmp_path: Path) -> None:
    _leduc(tmp_path, 3, out="run")
    files = _policy_files(tmp_path / "run")
    assert len(files) == 2 * 4  # per player: the uniform start and three best responses
    sizes = {f.relative_to(tmp_path).as_posix(): f.stat().st_size for f in files}
    assert max(sizes.values()) <= 8_000, sizes
    weights = RunDirectory(tmp_path / "run").load_policy("player_1/3")
    assert weights["keys"].shape == (468,) and weights["keys"].dtype.kind == "U"
    assert weights["probs"].dtype == np.float64 and set(np.unique(weights["probs"])) <= {0.0, 1.0}
    assert np.all(weights["players"] == 1)


@requires_nash
def test_leduc_resume_from_compact_or_uncompressed_policies_ends_like_a_straight_run(tmp_path: Path) -> None:
    """Resuming from either storage gives the straight run's ``final_policy.json``,
    byte for byte (so run directories written before the compact storage still resume)."""
    _leduc(tmp_path, 5, out="straight")
    _leduc(tmp_path, 2, out="compact")
    shutil.copytree(tmp_path / "compact", tmp_path / "uncompressed")
    for path in _policy_files(tmp_path / "uncompressed"):  # as the earlier storage wrote them
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        np.savez(path, **arrays)
    assert max(f.stat().st_size for f in _policy_files(tmp_path / "uncompressed")) > UNCOMPRESSED_BYTES
    for run in ("compact", "uncompressed"):
        summary = _leduc(tmp_path, 5, resume=run)
        assert summary["iterations"] == 5
        assert (tmp_path / run / "final_policy.json").read_bytes() == \
            (tmp_path / "straight" / "final_policy.json").read_bytes(), run
        for new in range(3, 6):  # the resumed run's new policies equal the straight run's
            for player in (0, 1):
                pid = f"player_{player}/{new}"
                ours, theirs = (RunDirectory(tmp_path / r).load_policy(pid) for r in (run, "straight"))
                assert ours.keys() == theirs.keys()
                for key in ours:
                    np.testing.assert_array_equal(ours[key], theirs[key])
