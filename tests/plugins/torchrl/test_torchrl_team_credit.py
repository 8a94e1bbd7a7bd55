"""Team credit on a deterministic cooperative matrix game: only the first player is paid,
``payoff[a_1, a_2]``, and the team's best joint action needs the second player too. An
independent learner in the second seat sees no reward at all; ``vdn`` and ``qmix``
regress the team's summed reward, so their second seat learns its part of the optimum."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import popmarl
from testkit.team_configs import PARAMS

#: Player 1 is paid 2 for (0, 0) and 1 on the other diagonal cells; player 2 never (so
#: an unpaid seat that ignored the team's reward would find (0, 0) one time in five).
PAYOFF = np.stack([np.diag([2.0, 1.0, 1.0, 1.0, 1.0]), np.zeros((5, 5))])


@pytest.mark.parametrize("algorithm", ["vdn", "qmix"])
def test_value_mixing_credits_the_unpaid_seat_with_the_team_reward(algorithm: str, tmp_path: Path) -> None:
    np.save(tmp_path / "game.npy", PAYOFF)
    config = {"scenario": "marl", "seed": 0, "agents": {"mapping": "per_player"},
              "env": {"name": "matrix", "params": {"game": "file", "path": str(tmp_path / "game.npy")}},
              "algorithm": {"name": algorithm, "params": {**PARAMS[algorithm], "learning_starts": 64,
                                                          "eps_decay_steps": 400, "updates_per_step": 0.5,
                                                          "lr": 5e-3}},
              "stopping": {"max_iterations": 1},
              "training": {"max_env_steps": 1600, "episodes_per_update": 16, "num_envs": 16},
              "evaluation": {"episodes_per_entry": 16}, "trackers": []}
    summary = popmarl.run(popmarl.validate(config), out=tmp_path / "run")
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    team = sum(last[f"mean_return/{p}"] for p in summary["populations"])
    assert team == pytest.approx(2.0)  # greedy play: the coordinated optimum (0, 0)
