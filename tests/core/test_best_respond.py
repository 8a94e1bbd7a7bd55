"""Exact oracles answer, they don't train: ``Backend.best_respond`` asks a population's
algorithm for its best response with no learner, and PSRO asks it for every population
whose algorithm answers exactly (those that decline train instead)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import popmarl
from popmarl.builtin.exact_matrix_br import ExactMatrixBR
from popmarl.builtin.local_backend import LocalBackend
from popmarl.data.learners import LearnerSpec
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.policies import PolicySpec
from popmarl.data.tasks import (
    BestResponseResult,
    BestResponseTask,
    TrainResult,
    TrainTask,
)

from test_eval_tasks import mixture, rps_backend


def snapshot(population: str, index: int) -> PolicySpec:
    return PolicySpec(policy_id=f"{population}/{index}", population=population, algorithm="exact_matrix_br",
                      iteration=1)


def test_best_respond_answers_each_task_with_no_learner() -> None:
    backend = rps_backend()
    # Every seat's meta-strategy (the responder's own seat is ignored), as PSRO gives them.
    meta = MetaStrategy.merged(mixture("player_0", {2: 0.8, 3: 0.2}), mixture("player_1", {0: 1.0}))
    answers = backend.best_respond([
        BestResponseTask(population="player_0", seed=0, snapshot=snapshot("player_0", 9), opponents=meta),
        BestResponseTask(population="player_1", seed=0, snapshot=snapshot("player_1", 9), opponents=meta),
    ])
    assert [a.policy.spec.policy_id for a in answers if a.policy] == ["player_0/9", "player_1/9"]
    assert [a.policy.weights["probs"].tolist() for a in answers if a.policy] == [[0, 1, 0], [1, 0, 0]]
    assert backend._executor.learners.held == {}  # nothing was trained or kept


class Declining(ExactMatrixBR):
    """``exact_matrix_br`` that has no answer (test only)."""

    def best_response(self, problem):  # type: ignore[no-untyped-def]
        return None


def test_a_declined_question_has_no_policy() -> None:
    backend = rps_backend()
    backend._executor.populations["player_0"].algorithm = Declining()
    (result,) = backend.best_respond([BestResponseTask(population="player_0", seed=0,
                                                       snapshot=snapshot("player_0", 9),
                                                       opponents=MetaStrategy.merged(
                                                           mixture("player_0", {0: 1.0}),
                                                           mixture("player_1", {0: 1.0})))])
    assert result.policy is None


class Recording(ExactMatrixBR):
    """``exact_matrix_br`` that notes each problem it is asked (test only)."""

    asked: list[int] = []

    def best_response(self, problem):  # type: ignore[no-untyped-def]
        type(self).asked.append(problem.seed)
        return super().best_response(problem)


def test_a_train_task_trains_and_never_asks_an_exact_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact answers are asked with ``best_respond`` only: a train task starts the learner
    it names, which for an oracle that does not learn keeps its policy as made and plays
    no games (PSRO sends such a task only for an oracle that declined)."""
    monkeypatch.setattr(Recording, "asked", [])
    backend = rps_backend()
    backend._executor.populations["player_0"].algorithm = Recording()
    spec = LearnerSpec(key="player_0", population="player_0", seats=("player_0",), seed=3,
                       snapshot=snapshot("player_0", 9))
    meta = MetaStrategy.merged(mixture("player_0", {0: 1.0}), mixture("player_1", {1: 1.0}))
    (result,) = backend.train([TrainTask(learners=(spec,), seed=3, opponents=meta, return_state=True)])
    assert Recording.asked == []
    assert result.policies[0].weights["probs"].tolist() == [1, 0, 0]  # make_policy's: no answer, no training
    assert not result.states["player_0"].trainer and result.env_steps == 0
    backend.best_respond([BestResponseTask(population="player_0", seed=5, snapshot=snapshot("player_0", 10),
                                           opponents=meta)])
    assert Recording.asked == [5]


class CountingCalls(LocalBackend):
    """The local backend, counting train and best-response tasks per call (test only)."""

    trains: list[int] = []
    questions: list[int] = []

    def train(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        type(self).trains.append(len(tasks))
        return super().train(tasks)

    def best_respond(self, tasks: Sequence[BestResponseTask]) -> list[BestResponseResult]:
        type(self).questions.append(len(tasks))
        return super().best_respond(tasks)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CountingCalls, "trains", [])
    monkeypatch.setattr(CountingCalls, "questions", [])
    monkeypatch.setattr(popmarl, "backends", popmarl.backends.with_component("counting_calls", CountingCalls))
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("declining", Declining))


def test_psro_asks_exact_oracles_and_trains_nothing(counting: None, run_inprocess, tmp_path: Path) -> None:
    summary = run_inprocess(backend={"name": "counting_calls"}, stopping={"max_iterations": 3})
    assert CountingCalls.questions == [2, 2, 2] and CountingCalls.trains == []
    # One answer per population and iteration joined the pools, and no game was played for them.
    assert [len(p["policies"]) for p in summary["populations"].values()] == [4, 4] and summary["env_steps"] == 0
    metrics = [line for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all('"train/player_0/train_time_s"' in line for line in metrics)


def test_psro_trains_the_populations_whose_oracle_declines(counting: None, run_inprocess) -> None:
    run_inprocess(backend={"name": "counting_calls"}, agents={"mapping": "per_player"},
                  algorithm={"name": None, "player_0": "exact_matrix_br", "player_1": "declining"},
                  stopping={"max_iterations": 2})
    assert CountingCalls.questions == [2, 2] and CountingCalls.trains == [1, 1]
