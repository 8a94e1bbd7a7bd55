"""Every config the README and the docs show runs as shown (see tests/readme_configs.py for how a
fragment becomes a config, and the short overrides), here those on the ray backend.
They are sized for a cluster; on this session's local Ray of 2 CPUs they run with one
rollout worker and half a CPU per learner (``address: auto`` joins the Ray already up,
as on a cluster's head node)."""

from __future__ import annotations

from pathlib import Path

import pytest

import popmarl
from popmarl.config.loading import apply_overrides
from popmarl.config.schema import validate

from readme_configs import readme_configs, short

RAY = [c for c in readme_configs() if c.uses_ray]
FIT_LOCAL_RAY = ("backend.params.num_rollout_workers=1", "backend.params.num_cpus_per_learner=0.5")


def test_the_readme_shows_a_ray_config() -> None:
    assert RAY


@pytest.mark.parametrize("shown", RAY, ids=[c.where for c in RAY])
def test_a_readme_ray_config_runs(shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = apply_overrides(short(shown.config), FIT_LOCAL_RAY)
    summary = popmarl.run(validate(config), out="runs/readme")
    assert summary["status"] == "completed" and summary["iterations"] == 1
    assert (tmp_path / "runs" / "readme" / "summary.json").is_file()
