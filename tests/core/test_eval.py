"""``popmarl eval``: each seat plays its own meta-strategy, also when seats share a population."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import popmarl
from popmarl.cli import main

#: Each seat is paid only for its own action: seat 0 gets 0/1/2, seat 1 gets 0/10/20 for
#: actions 0/1/2, so a seat's mean return tells which of its pool's policies it played.
SEAT_PAYOFFS = np.array([[[0, 0, 0], [1, 1, 1], [2, 2, 2]], [[0, 10, 20]] * 3], dtype=float)


class FirstAndLatest(popmarl.MetaSolver):
    """A solver whose seats' mixtures differ: seat 0 plays the first policy, the others
    the newest one."""

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        shape = payoffs.shape[1:]
        return tuple(np.eye(n)[0 if k == 0 else n - 1] for k, n in enumerate(shape))


@pytest.fixture
def shared_run(run_inprocess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared-mapping PSRO run: pool [action 0, action 2, action 2]; seat 0's meta-strategy
    is [1, 0, 0], seat 1's [0, 0, 1]."""
    monkeypatch.setattr(popmarl, "solvers", popmarl.solvers.with_component("first_and_latest", FirstAndLatest))
    np.save(tmp_path / "seats.npy", SEAT_PAYOFFS)
    summary = run_inprocess(env={"params": {"game": "file", "path": str(tmp_path / "seats.npy")}},
                            agents={"mapping": "shared"}, solver="first_and_latest", stopping={"max_iterations": 2})
    assert summary["meta_strategies"] == {"player_0": [1.0, 0.0, 0.0], "player_1": [0.0, 0.0, 1.0]}
    assert summary["populations"]["shared"]["meta_strategy"] == [0.5, 0.0, 0.5]
    return tmp_path / "run"


def _eval(run: Path, capsys: pytest.CaptureFixture[str], episodes: int = 200) -> dict:
    assert main(["eval", str(run), "--opponent", "random", "--episodes", str(episodes), "--json"]) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])["populations"]


def test_eval_draws_each_seat_from_its_own_meta_strategy(shared_run: Path, capsys) -> None:
    report = _eval(shared_run, capsys)["shared"]
    # Seat 0 always plays action 0 (return 0), seat 1 always action 2 (return 20). Playing
    # the population's mean mixture [.5, 0, .5] in both seats would give about 5.5.
    assert report["exact"] and report["episodes"] == 0  # a matrix game is evaluated exactly
    assert report["mean_return"] == 10.0


def test_eval_of_a_summary_without_seat_mixtures_plays_the_population_mixture(shared_run: Path, capsys) -> None:
    summary_file = shared_run / "summary.json"
    summary = json.loads(summary_file.read_text())
    del summary["meta_strategies"]  # as marl writes it: one mixture per population
    summary_file.write_text(json.dumps(summary))
    report = _eval(shared_run, capsys, episodes=2000)["shared"]
    # [.5, 0, .5] in both seats: (0.5 * 2 + 0.5 * 20) / 2 = 5.5; sd of the mean ~0.17.
    assert report["mean_return"] == pytest.approx(5.5, abs=0.7)


def test_an_opponent_that_is_neither_random_nor_a_run_says_what_is_accepted(run_inprocess, tmp_path: Path,
                                                                            capsys) -> None:
    run_inprocess(stopping={"max_iterations": 1})
    assert main(["eval", str(tmp_path / "run"), "--opponent", "rando"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("popmarl: error: --opponent rando: not 'random' and not a run directory"), err
    assert "(did you mean 'random'?)" in err and "another run's directory" in err, err
