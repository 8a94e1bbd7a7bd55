"""Every algorithm runs ``marl`` end to end on mpe2 (CleanRL-style smoke runs): parameter
sharing (``shared``) and a per_player team whose seats differ in spaces, Box actions for
``mappo`` and ``masac``; one learner over the team, and exported policies that hold the actors alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import popmarl
from testkit.team_configs import SPEAKER_LISTENER, SPREAD, box, marl_config

CASES = [
    ("mappo", SPREAD, "shared"), ("mappo", SPEAKER_LISTENER, "per_player"), ("mappo", box(SPREAD), "per_player"),
    ("vdn", SPREAD, "shared"), ("vdn", SPEAKER_LISTENER, "per_player"),
    ("qmix", SPREAD, "per_player"), ("qmix", SPEAKER_LISTENER, "per_player"),
    ("masac", box(SPREAD), "shared"), ("masac", box(SPREAD), "per_player"),
]


def _run(config: dict[str, Any], out: Path) -> dict[str, Any]:
    return popmarl.run(popmarl.validate(config), out=out)


@pytest.mark.parametrize(("algorithm", "env", "mapping"), CASES,
                         ids=[f"{a}-{e['params']['module'].split('.')[-1]}-{m}{'-box' if 'continuous_actions' in str(e) else ''}"
                              for a, e, m in CASES])
def test_a_short_run_trains_one_team_learner_and_exports_actors(algorithm: str, env: dict[str, Any], mapping: str,
                                                               tmp_path: Path) -> None:
    summary = _run(marl_config(algorithm, env, mapping), tmp_path / "run")
    assert summary["status"] == "completed" and summary["iterations"] == 2
    metrics = [line for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2
    populations = list(summary["populations"])
    # One learner over the team: its key is the lead population, its metrics the only ones.
    lead = populations[0]
    last = popmarl.load_run(tmp_path / "run")
    import json
    line = json.loads(metrics[-1])
    assert line[f"train/{lead}/gradient_steps"] > 0
    assert not any(key.startswith(f"train/{p}/") for p in populations[1:] for key in line)
    actor_key = "actor." if algorithm in ("mappo", "masac") else "q."
    for population in populations:
        assert len(summary["populations"][population]["policies"]) == 3
        weights = np.load(tmp_path / "run" / "checkpoints" / "policies" / population / "2.npz")
        assert all(k.startswith(actor_key) or k == "explore.eps" for k in weights.files), weights.files
        assert np.isfinite(summary["mean_returns"][population])
    assert last.population(lead).policy_ids[-1] == f"{lead}/2"
