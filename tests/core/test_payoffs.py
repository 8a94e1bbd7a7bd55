"""The payoff table (popmarl.gametheory.payoffs): grows one policy per population per iteration, only
missing entries are evaluated, and payoffs.npz round-trips without pickles."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import popmarl
from popmarl.builtin.local_backend import LocalBackend
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.errors import CheckpointError
from popmarl.gametheory.payoffs import PayoffTable

from testkit.run_files import read_metrics, read_npz


def test_empty_table_grows_and_reports_missing_entries() -> None:
    table = PayoffTable.empty(["a", "b"])
    assert table.shape == (0, 0) and table.values.shape == (2, 0, 0) and table.complete
    grown = table.grow([2, 1])
    assert grown.shape == (2, 1) and not grown.complete
    assert list(grown.missing()) == [(0, 0), (1, 0)]
    assert table.shape == (0, 0), "grow returns a new table"


def test_fill_sets_entries_and_grow_keeps_them() -> None:
    table = PayoffTable.empty(["a", "b"]).grow([1, 1]).fill([((0, 0), np.array([1.0, -1.0]))])
    assert table.complete
    bigger = table.grow([2, 2])
    assert bigger.values[:, 0, 0].tolist() == [1.0, -1.0]
    assert list(bigger.missing()) == [(0, 1), (1, 0), (1, 1)]
    filled = bigger.fill([((1, 1), np.array([2.0, 3.0]))])
    assert list(filled.missing()) == [(0, 1), (1, 0)]
    assert list(bigger.missing()) == [(0, 1), (1, 0), (1, 1)], "fill returns a new table"


@pytest.mark.parametrize("shape", [[1], [0, 0], [1, 1, 1]])
def test_grow_refuses_shrinking_or_changing_the_number_of_agents(shape: list[int]) -> None:
    table = PayoffTable.empty(["a", "b"]).grow([1, 1])
    with pytest.raises(ValueError, match="cannot grow"):
        table.grow(shape)


def test_three_agent_table() -> None:
    table = PayoffTable.empty(["a", "b", "c"]).grow([1, 1, 1]).fill([((0, 0, 0), np.array([1.0, 2.0, 3.0]))])
    grown = table.grow([2, 2, 2])
    assert len(list(grown.missing())) == 7
    assert grown.values.shape == (3, 2, 2, 2)


def test_save_and_load_round_trip_without_pickles(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    table = PayoffTable.empty(["player_0", "player_1"]).grow([3, 2])
    table = table.fill([(index, rng.normal(size=2)) for index in list(table.missing())[:5]])
    ids = [["player_0/0", "player_0/1", "player_0/2"], ["player_1/0", "player_1/1"]]
    path = tmp_path / "payoffs.npz"
    table.save(path, ids)
    loaded, loaded_ids = PayoffTable.load(path)
    assert loaded.agents == table.agents and loaded_ids == ids
    np.testing.assert_array_equal(loaded.values, table.values)
    np.testing.assert_array_equal(loaded.filled, table.filled)
    assert list(loaded.missing()) == [(2, 1)]
    arrays = read_npz(path)  # allow_pickle=False: an object array would raise
    assert all(a.dtype != object for a in arrays.values())
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == sorted(f"{k}.npy" for k in arrays)


def test_load_refuses_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "payoffs.npz"
    path.write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="not a readable payoff table"):
        PayoffTable.load(path)
    np.savez(path, payoffs=np.zeros((2, 2, 2)))  # no agents, no ids
    with pytest.raises(CheckpointError):
        PayoffTable.load(path)


def test_load_refuses_a_pickled_file(tmp_path: Path) -> None:
    path = tmp_path / "payoffs.npz"
    np.savez(path, payoffs=np.zeros((2, 1, 1)), filled=np.ones((1, 1), bool), agents=np.array(["a", "b"]),
             policy_ids_0=np.array([{"evil": 1}], dtype=object), policy_ids_1=np.array(["b/0"]))
    with pytest.raises(CheckpointError):
        PayoffTable.load(path)


# -- in a run -------------------------------------------------------------------------------

class CountingBackend(LocalBackend):
    """The local backend, recording the indices of every evaluate call."""

    calls: list[list[tuple[int, ...]]] = []

    def evaluate(self, tasks: Sequence[popmarl.EvalTask]) -> list[popmarl.EvalResult]:
        type(self).calls.append([t.index for t in tasks])
        return super().evaluate(tasks)


class CountingMatrixEnv(MatrixEnv):
    """The matrix env, counting the joint profiles it evaluates exactly."""

    profiles = 0

    def exact_returns(self, profiles):  # type: ignore[no-untyped-def]
        type(self).profiles += len(profiles)
        return super().exact_returns(profiles)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch):
    CountingBackend.calls = []
    CountingMatrixEnv.profiles = 0
    monkeypatch.setattr(popmarl, "backends", popmarl.backends.with_component("counting", CountingBackend))
    monkeypatch.setattr(popmarl, "envs", popmarl.envs.with_component("counting_matrix", CountingMatrixEnv))


def _assert_only_new_entries(calls: list[list[tuple[int, ...]]], n_agents: int, iterations: int) -> None:
    assert len(calls) == iterations + 1  # the initial table, then one call per iteration
    seen: set[tuple[int, ...]] = set()
    for k, indices in enumerate(calls):
        # Iteration k adds policy k to every pool: exactly the entries that involve it.
        assert all(max(index) == k for index in indices), (k, indices)
        assert len(indices) == (k + 1) ** n_agents - k ** n_agents
        assert seen.isdisjoint(indices), "an entry was evaluated twice"
        seen.update(indices)
    assert len(seen) == (iterations + 1) ** n_agents


def test_a_run_evaluates_only_the_missing_entries(counting, run_inprocess, tmp_path: Path) -> None:
    run_inprocess(env={"name": "counting_matrix"}, backend="counting", stopping={"max_iterations": 5})
    _assert_only_new_entries(CountingBackend.calls, n_agents=2, iterations=5)
    assert CountingMatrixEnv.profiles == 36
    assert [m["population_size/player_0"] for m in read_metrics(tmp_path / "run")] == [2, 3, 4, 5, 6]
    arrays = read_npz(tmp_path / "run" / "payoffs.npz")
    assert arrays["payoffs"].shape == (2, 6, 6) and arrays["filled"].all()
    assert arrays["policy_ids_0"].tolist() == [f"player_0/{i}" for i in range(6)]


def test_three_players_grow_one_policy_each(counting, run_inprocess, tmp_path: Path) -> None:
    run_inprocess(env={"name": "counting_matrix", "params": {"game": "random_general_sum", "players": 3, "size": 4}},
                  backend="counting", stopping={"max_iterations": 3})
    _assert_only_new_entries(CountingBackend.calls, n_agents=3, iterations=3)
    assert read_npz(tmp_path / "run" / "payoffs.npz")["payoffs"].shape == (3, 4, 4, 4)


def test_a_shared_population_fills_both_seats_from_one_pool(counting, run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(env={"name": "counting_matrix"}, backend="counting", agents={"mapping": "shared"},
                            stopping={"max_iterations": 4})
    _assert_only_new_entries(CountingBackend.calls, n_agents=2, iterations=4)
    assert list(summary["populations"]) == ["shared"]
    assert len(summary["populations"]["shared"]["policies"]) == 5
    arrays = read_npz(tmp_path / "run" / "payoffs.npz")
    assert arrays["policy_ids_0"].tolist() == arrays["policy_ids_1"].tolist() == [f"shared/{i}" for i in range(5)]


def test_the_saved_table_matches_the_game(run_inprocess, tmp_path: Path) -> None:
    """Every entry of payoffs.npz is the game's payoff of the two saved pure policies."""
    run_inprocess(env={"params": {"game": "random_general_sum", "size": 5, "seed": 3}}, stopping={"max_iterations": 4})
    run = tmp_path / "run"
    arrays = read_npz(run / "payoffs.npz")
    game = MatrixEnv(game="random_general_sum", size=5, seed=3).payoffs

    def probs(policy_id: str) -> np.ndarray:
        population, index = policy_id.rsplit("/", 1)
        return read_npz(run / "checkpoints" / "policies" / population / f"{index}.npz")["probs"]

    for i, row in enumerate(arrays["policy_ids_0"]):
        for j, col in enumerate(arrays["policy_ids_1"]):
            x, y = probs(str(row)), probs(str(col))
            expected = [x @ game[k] @ y for k in range(2)]
            np.testing.assert_allclose(arrays["payoffs"][:, i, j], expected, atol=1e-12)


def test_sampled_evaluation_of_pure_policies_equals_exact(run_inprocess, tmp_path: Path) -> None:
    exact = run_inprocess(out="exact", stopping={"max_iterations": 4})
    sampled = run_inprocess(out="sampled", evaluation={"exact": "never", "episodes_per_entry": 10},
                            stopping={"max_iterations": 4})
    a, b = read_npz(tmp_path / "exact" / "payoffs.npz"), read_npz(tmp_path / "sampled" / "payoffs.npz")
    np.testing.assert_allclose(a["payoffs"], b["payoffs"])  # pure strategies: every episode is the same
    assert exact["env_steps"] == 0
    # 25 entries x 10 episodes x 2 agents acting once per episode
    assert sampled["env_steps"] == 25 * 10 * 2


def test_npz_files_are_byte_for_byte_reproducible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same arrays give the same bytes, whenever written (no zip timestamps)."""
    import time

    table = PayoffTable.empty(["a", "b"]).grow([2, 2]).fill([((0, 1), np.array([0.5, -0.5]))])
    table.save(tmp_path / "one.npz", [["a/0", "a/1"], ["b/0", "b/1"]])
    later = time.time() + 3 * 86400
    monkeypatch.setattr(time, "time", lambda: later)
    table.save(tmp_path / "two.npz", [["a/0", "a/1"], ["b/0", "b/1"]])
    assert (tmp_path / "one.npz").read_bytes() == (tmp_path / "two.npz").read_bytes()
