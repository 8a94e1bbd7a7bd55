"""The user's game of docs/your_own_game.md (examples/games/goofspiel_lite.py) passes
PettingZoo's API tests as a Parallel and an AEC env, and its config
(examples/goofspiel_lite.yaml) trains PSRO with DQN on it, through the pettingzoo env's
``module`` and ``path`` params, in a short run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("popmarl_tianshou")
pytest.importorskip("popmarl_solvers")
from pettingzoo.test import api_test, parallel_api_test  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
GAME = ROOT / "examples" / "games" / "goofspiel_lite.py"
CONFIG = ROOT / "examples" / "goofspiel_lite.yaml"


def _game():
    spec = importlib.util.spec_from_file_location("goofspiel_lite_under_test", GAME)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_game_passes_pettingzoos_api_tests() -> None:
    game = _game()
    parallel_api_test(game.parallel_env(), num_cycles=100)
    api_test(game.env(), num_cycles=100)


def test_the_game_masks_spent_cards_and_scores_the_prizes() -> None:
    env = _game().parallel_env(cards=3)
    observations, _ = env.reset(seed=1)
    prizes = env.prizes + 1
    assert all(o["action_mask"].tolist() == [1, 1, 1] for o in observations.values())
    # player_0 bids 3, 2, 1 and player_1 bids 1, 2, 3: the first and last prizes are split.
    for bid in range(3):
        observations, rewards, terminations, _, _ = env.step({"player_0": 2 - bid, "player_1": bid})
        if bid == 0:
            assert observations["player_0"]["action_mask"].tolist() == [1, 1, 0]
    assert all(terminations.values()) and env.agents == []
    expected = float(np.sign(prizes[0] - prizes[2]))
    assert rewards == {"player_0": expected, "player_1": -expected}


def test_the_config_trains_psro_with_dqn_for_two_iterations(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sets = ["stopping.max_iterations=2", "training.max_env_steps=600", "evaluation.episodes_per_entry=20"]
    # From the repository root, as the config's env.params.path (examples/games) says.
    result = subprocess.run([str(Path(sys.executable).parent / "popmarl"), "run", str(CONFIG), "--out", str(out),
                             *[a for s in sets for a in ("--set", s)]],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iterations"] == 2
    for population in ("player_0", "player_1"):
        mixture = summary["populations"][population]["meta_strategy"]
        assert len(mixture) == 3 and sum(mixture) == pytest.approx(1.0)
    saved = (out / "config.yaml").read_text()
    assert str(ROOT / "examples" / "games") in saved  # the path, absolute, for --resume and popmarl eval
