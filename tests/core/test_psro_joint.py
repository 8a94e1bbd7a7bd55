"""PSRO with a joint meta-solver (JPSRO): opponents drawn together from a distribution
over profiles, one best response per recommendation (CE), CCE/CE gaps in the real game,
checkpoints, summaries and ``popmarl eval`` of joint meta-strategies.

The solvers here are test-only joint distributions (not equilibria): the mechanics are
what is tested; ``cce``/``ce`` themselves are tested in the solvers plugin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import popmarl
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.errors import ConfigError
from popmarl.tools.evaluate import load_run
from popmarl.tools.pools import draw_profile
from popmarl.gametheory.metagame import cce_gap, check_payoffs
from popmarl.runs.rundir import RunDirectory


class Tilted(popmarl.JointMetaSolver):
    """A correlated, non-product distribution: weight 1 + sum of the profile's indices."""

    @attrs.frozen(kw_only=True)
    class Config:
        pass

    def solve_joint(self, payoffs: np.ndarray) -> np.ndarray:
        shape = check_payoffs(payoffs).shape[1:]
        weights = 1.0 + np.indices(shape).sum(axis=0)
        return weights / weights.sum()


class TiltedCE(Tilted):
    conditional = True


FOUND = popmarl.Registries.current().with_component("solvers", "tilted", Tilted).with_component(
    "solvers", "tilted_ce", TiltedCE)
GAME = {"name": "matrix", "params": {"game": "random_general_sum", "players": 3, "size": 4, "seed": 3}}


def _run(tmp_path: Path, solver: str, out: str = "run", iterations: int = 3, **extra: Any) -> dict[str, Any]:
    config = popmarl.validate({"scenario": "psro", "env": GAME, "algorithm": "exact_matrix_br", "solver": solver,
                               "stopping": {"max_iterations": iterations}, "trackers": ["jsonl"], **extra},
                              registries=FOUND)
    return popmarl.run(config, out=str(tmp_path / out), registries=FOUND)


def _strategies(run_dir: Path, profile: list[str]) -> list[np.ndarray]:
    return [np.asarray(RunDirectory(run_dir).load_policy(pid)["probs"]) for pid in profile]


def _game() -> np.ndarray:
    return np.asarray(MatrixEnv(**GAME["params"]).payoffs)


def test_cce_gap_is_the_lifted_joint_gap_in_the_real_game(tmp_path: Path) -> None:
    summary = _run(tmp_path, "tilted")
    joint = summary["joint_meta_strategy"]
    payoffs = _game()
    lifted = np.zeros(payoffs.shape[1:])
    for profile, p in zip(joint["profiles"], joint["probabilities"]):
        x, y, z = _strategies(tmp_path / "run", profile)
        lifted += p * np.einsum("i,j,k->ijk", x, y, z)
    assert summary["cce_gap"] == pytest.approx(cce_gap(payoffs, lifted), abs=1e-12)
    assert summary["cce_gap"] > 0  # the tilted distribution is no equilibrium
    sizes = [len(p["policies"]) for p in summary["populations"].values()]
    assert len(joint["profiles"]) == np.prod(sizes)  # every profile has weight
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(m["cce_gap"] >= 0 and "ce_gap" not in m for m in metrics)  # the CE gap: for CE solvers
    assert all(m["solver/meta_joint_entropy"] > 0 for m in metrics)


def test_ce_best_responds_to_each_recommendation(tmp_path: Path) -> None:
    """CE: one best response per recommended policy; only novel ones join the population."""
    summary = _run(tmp_path, "tilted_ce", iterations=1)
    for population in summary["populations"].values():
        # one initial policy, so one recommendation: one best response joins
        assert len(population["policies"]) == 2
    summary = _run(tmp_path, "tilted_ce", out="longer", iterations=3)
    assert summary["ce_gap"] > 0 and summary["cce_gap"] >= 0
    payoffs = _game()
    for k, population in enumerate(summary["populations"].values()):
        policies = population["policies"]
        weights = [RunDirectory(tmp_path / "longer").load_policy(pid)["probs"].tolist() for pid in policies]
        assert len({tuple(w) for w in weights}) == len(weights)  # no duplicates
        assert len(policies) <= 1 + payoffs.shape[1 + k]  # the uniform start and pure strategies


def test_checkpoint_holds_the_joint_and_resumes_identically(tmp_path: Path) -> None:
    straight = _run(tmp_path, "tilted_ce", out="straight", iterations=3)
    _run(tmp_path, "tilted_ce", out="split", iterations=2)
    config = popmarl.validate({"scenario": "psro", "env": GAME, "algorithm": "exact_matrix_br", "solver": "tilted_ce",
                               "stopping": {"max_iterations": 3}, "trackers": ["jsonl"]}, registries=FOUND)
    resumed = popmarl.run(config, resume=str(tmp_path / "split"), registries=FOUND)
    assert resumed["joint_meta_strategy"] == straight["joint_meta_strategy"]
    assert resumed["ce_gap"] == straight["ce_gap"] and resumed["cce_gap"] == straight["cce_gap"]


def test_eval_draws_a_joint_run_s_seats_together(tmp_path: Path) -> None:
    _run(tmp_path, "tilted", iterations=2)
    loaded = load_run(tmp_path / "run", registries=FOUND)
    joint = loaded.meta_strategy
    assert joint.joint_agents == ("player_0", "player_1", "player_2")
    rng = np.random.default_rng(0)
    seen = {}
    for _ in range(4000):
        profile = draw_profile(loaded.pools, loaded.env.agents, rng)
        key = tuple(id(profile[a]) for a in joint.joint_agents)
        seen[key] = seen.get(key, 0) + 1
    total = joint.probabilities.sum()
    expected = {tuple(id(loaded.pools[a].live[pid]) for a, pid in zip(joint.joint_agents, prof)): q / total
                for prof, q in joint.joint_support()}
    assert set(seen) <= set(expected)
    for key, count in seen.items():
        assert count / 4000 == pytest.approx(expected[key], abs=0.03)


def test_joint_solvers_need_one_population_per_seat(tmp_path: Path) -> None:
    config = popmarl.validate({"scenario": "psro", "env": {"name": "matrix", "params": {"game": "rps"}},
                               "algorithm": "exact_matrix_br", "solver": "tilted", "agents": {"mapping": "shared"},
                               "trackers": []}, registries=FOUND)
    with pytest.raises(ConfigError, match="agents.mapping: joint meta-solvers"):
        popmarl.run(config, out=str(tmp_path / "run"), registries=FOUND)
    assert not (tmp_path / "run").exists()
