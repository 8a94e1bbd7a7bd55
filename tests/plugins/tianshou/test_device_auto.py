"""``device: auto`` and ``acting_device: auto`` of dqn, ppo and a2c pick the faster
device, record the choice (log, metrics, trainer state) and keep it on resume.

CI has no GPU, so the choice among several candidates is run here on the CPU: an
:class:`~popmarl_torch.auto.AutoDevice` with the candidates ``["cpu", "cpu"]``
(two timings, one device) and a timer of our own (seconds by call order) takes the
place of :data:`~popmarl_torch.auto.AUTO`; torch and Tianshou run as they are.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tianshou_helpers import ALGORITHMS, Bandit, algorithm, metrics, run_psro

import popmarl
from popmarl.interfaces.algorithm import Algorithm, TrainerContext
from popmarl.errors import CheckpointError
from popmarl.interfaces.policy import Policy
from popmarl.data.episodes import Episode
from popmarl.data.policies import Weights
from popmarl.runs.rundir import RunDirectory
from popmarl.interfaces.trainer import Trainer, TrainerState
from popmarl_torch import auto as device_module
from popmarl_torch.auto import AutoDevice, DeviceChoice
from popmarl_torch.policies import TorchPolicy
from popmarl_torch.timing import Step, Timer, acting_workload, fastest, time_steps, update_workload

SMALL: dict[str, dict[str, Any]] = {
    "dqn": {"hidden": [16], "learning_starts": 16, "batch_size": 16, "buffer_size": 100, "target_update_freq": 5,
            "n_step": 2, "eps_decay_steps": 500},
    "ppo": {"hidden": [16], "batch_size": 16, "epochs": 2},
    "a2c": {"hidden": [16], "batch_size": 16},
}
AUTO = {"device": "auto", "acting_device": "auto"}
BANDIT = Bandit.make()
TRAINER = "trainer.json"


class FakeTimer:
    """A timer that runs each step once and says it took ``seconds[i]`` on its i-th
    call (cycling: one entry per candidate); ``calls`` counts its calls."""

    def __init__(self, *seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    def __call__(self, step: Step, device: torch.device) -> float:
        step()
        seconds = self.seconds[self.calls % len(self.seconds)]
        self.calls += 1
        return seconds


def refusing(step: Step, device: torch.device) -> float:
    raise AssertionError("timed, but nothing was to be timed")


@pytest.fixture
def use_auto(monkeypatch: pytest.MonkeyPatch):
    """``use_auto(candidates, timer)``: how ``auto`` is decided from now on in this test."""

    def install(candidates: list[str], timer: Timer) -> AutoDevice:
        auto = AutoDevice(candidates, timer)
        monkeypatch.setattr(device_module, "AUTO", auto)
        return auto

    return install


def bandit(policy: Policy, rng: np.random.Generator) -> list[Episode]:
    return BANDIT.episodes(policy, 40, rng)


def learner(algo: Algorithm, seed: int = 0, weights: Weights | None = None,
            state: TrainerState | None = None) -> tuple[TorchPolicy, Trainer]:
    policy = algo.make_policy(space=BANDIT.space, seed=seed)
    if weights is not None:
        policy.set_weights(weights)
    trainer = algo.make_trainer(policy=policy, space=BANDIT.space, seed=seed,
                                context=TrainerContext.alone(policy=policy, space=BANDIT.space))
    assert isinstance(policy, TorchPolicy) and trainer is not None
    if state is not None:
        trainer.load_state(state)
    return policy, trainer


def devices(state: TrainerState) -> dict[str, Any]:
    return json.loads(state[TRAINER])["devices"]  # type: ignore[no-any-return]


def weights_equal(a: Policy, b: Policy) -> bool:
    wa, wb = a.get_weights(), b.get_weights()
    return wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)


# -- the choice ----------------------------------------------------------------------------
def test_the_faster_candidate_is_kept() -> None:
    def nothing(device: torch.device) -> Step:
        return lambda: None

    def timer(seconds: dict[str, float]) -> Timer:
        return lambda step, device: seconds[device.type]

    slow_cpu = timer({"cpu": 3e-3, "meta": 1e-3})
    assert fastest(["cpu", "meta"], nothing, slow_cpu) == ("meta", (("cpu", 3e-3), ("meta", 1e-3)))
    assert fastest(["meta", "cpu"], nothing, slow_cpu) == ("meta", (("meta", 1e-3), ("cpu", 3e-3)))
    assert fastest(["cpu", "meta"], nothing, timer({"cpu": 1e-3, "meta": 3e-3}))[0] == "cpu"
    assert fastest(["meta", "cpu"], nothing, timer({"cpu": 1.0, "meta": 1.0}))[0] == "meta"  # equals: the first
    with pytest.raises(ValueError, match="no candidate"):
        fastest([], nothing, slow_cpu)


def test_auto_is_timed_only_where_there_is_a_choice_and_once_per_workload() -> None:
    def work(device: torch.device) -> Step:
        return lambda: None

    timer = FakeTimer(2.0, 1.0)
    auto = AutoDevice(["cpu", "cpu"], timer)
    assert auto.choose("cpu", work, key="k", rows=8) == DeviceChoice(spec="cpu", device="cpu")  # explicit
    alone = AutoDevice(["cpu"], timer).choose("auto", work, key="k", rows=8)  # a machine without a GPU
    assert alone == DeviceChoice(spec="auto", device="cpu") and timer.calls == 0
    assert "not timed" in alone.describe("device", "update step")
    choice = auto.choose("auto", work, key="k", rows=8)
    assert choice == DeviceChoice(spec="auto", device="cpu", rows=8, timings=(("cpu", 2.0), ("cpu", 1.0)))
    assert timer.calls == 2
    assert auto.choose("auto", work, key="k", rows=8) == choice and timer.calls == 2  # kept in this process
    auto.choose("auto", work, key="k", rows=16)  # another batch: timed again
    auto.choose("auto", work, key="other", rows=8)  # other networks too
    assert timer.calls == 6
    assert choice.describe("device", "update step") == (
        "device auto -> cpu (timed: cpu 2e+03 ms, cpu 1e+03 ms per update step of 8 rows)")
    assert DeviceChoice.from_json(json.loads(json.dumps(choice.to_json())), "x") == choice


@pytest.mark.parametrize("name", ALGORITHMS)
def test_the_real_timer_times_the_trainers_networks_quickly_and_moves_no_random_state(name: str, use_auto) -> None:
    """With the real timer and workloads (two CPU candidates): both devices timed, the
    decision in well under a second or two, torch's and numpy's generators untouched, and
    the learner trains exactly as with ``device: cpu``."""
    use_auto(["cpu", "cpu"], time_steps)
    learner(algorithm(name, **SMALL[name], **AUTO))[1].devices.decide()  # type: ignore[attr-defined]  # first calls in this process
    auto = use_auto(["cpu", "cpu"], time_steps)
    policy, trainer = learner(algorithm(name, **SMALL[name], **AUTO))
    cpu_policy, cpu = learner(algorithm(name, **SMALL[name], device="cpu"))
    torch_state, numpy_state = torch.random.get_rng_state(), np.random.get_state()
    start = time.perf_counter()
    trainer.devices.decide()  # type: ignore[attr-defined]
    assert time.perf_counter() - start < 3.0  # two shared cores here: generous
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], numpy_state[1])
    for choice in (trainer.devices.update, trainer.devices.acting):  # type: ignore[attr-defined]
        assert choice.device == "cpu" and [c for c, _ in choice.timings] == ["cpu", "cpu"]
        assert all(0 < seconds < 0.5 for _, seconds in choice.timings)
    assert len(auto.cache) == 2
    rng = np.random.default_rng(0)
    for _ in range(3):
        episodes = bandit(policy, rng)
        got, expected = trainer.update(episodes), cpu.update(episodes)
        assert {k: v for k, v in got.items() if not k.startswith(("device", "acting_device"))} == \
            {k: v for k, v in expected.items() if not k.startswith(("device", "acting_device"))}
        assert got["device/cpu"] == 1.0 and got["acting_device/cpu"] == 1.0 and "device_ms/cpu" in got
        assert weights_equal(policy, cpu_policy)


def test_the_workloads_run_the_networks_on_a_device() -> None:
    policy = algorithm("ppo", hidden=[32]).make_policy(space=BANDIT.space, seed=0)
    assert isinstance(policy, TorchPolicy)
    actor = policy.modules["actor"]
    before = [p.detach().clone() for p in actor.parameters()]
    for workload in (update_workload([actor], 64, no_grad_passes=2), acting_workload(actor, 64)):
        step = workload(torch.device("cpu"))
        step()
        assert time_steps(step, torch.device("cpu"), warmup=1, steps=3) > 0
    assert all(torch.equal(a, b) for a, b in zip(before, actor.parameters()))  # copies were trained


# -- recorded: log, metrics, trainer state --------------------------------------------------
@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_auto_without_a_gpu_is_the_cpu_untimed_and_recorded(name: str, use_auto, caplog) -> None:
    timer = FakeTimer(1.0)
    use_auto(["cpu"], timer)  # the candidates of a machine where torch sees no GPU
    caplog.set_level(logging.INFO, logger="popmarl_tianshou")
    policy, trainer = learner(algorithm(name, **SMALL[name], device="auto"))
    got = trainer.update(bandit(policy, np.random.default_rng(0)))
    assert got["device/cpu"] == 1.0 and got["acting_device/cpu"] == 1.0
    assert not [k for k in got if "_ms/" in k] and timer.calls == 0
    assert devices(trainer.state()) == {"device": {"spec": "auto", "device": "cpu", "rows": None, "timings": []},
                                        "acting_device": {"spec": "cpu", "device": "cpu", "rows": None, "timings": []}}
    lines = [r.getMessage() for r in caplog.records if r.name == "popmarl_tianshou"]
    assert lines == [f"{name} learner of population p (seed 0): device auto -> cpu "
                     "(the only candidate: torch sees no GPU, not timed)"]


def test_a_timed_choice_is_logged_and_reported_per_learner(use_auto, caplog) -> None:
    use_auto(["cpu", "cpu"], FakeTimer(2e-3, 1e-3))
    caplog.set_level(logging.INFO, logger="popmarl_tianshou")
    policy, trainer = learner(algorithm("a2c", **SMALL["a2c"], **AUTO), seed=3)
    got = trainer.update(bandit(policy, np.random.default_rng(0)))
    assert got["device/cpu"] == 1.0 and got["device_ms/cpu"] == 1.0 and got["acting_device_ms/cpu"] == 1.0
    lines = [r.getMessage() for r in caplog.records if r.name == "popmarl_tianshou"]
    assert lines == ["a2c learner of population p (seed 3): device auto -> cpu (timed: cpu 2 ms, cpu 1 ms per "
                     "update step of 16 rows)",
                     "a2c learner of population p (seed 3): acting_device auto -> cpu (timed: cpu 2 ms, cpu 1 ms "
                     "per batched forward pass of 40 rows)"]  # the round's 40 games


@pytest.mark.parametrize("name", ["dqn", "a2c"])
def test_a_run_with_device_auto_records_the_choice_in_its_metrics_and_checkpoint(tmp_path: Path, name: str) -> None:
    """This machine's own candidates (no GPU here: the CPU, untimed)."""
    summary, run_dir = run_psro(tmp_path, name, env={"name": "matrix", "params": {"game": "rps"}},
                                algorithm={"name": name, "params": {**SMALL[name], "device": "auto"}},
                                solver={"name": "uniform"}, stopping={"max_iterations": 1},
                                training={"max_env_steps": 600, "num_envs": 16, "init": "previous"})
    assert summary["status"] == "completed"
    expected = None if torch.cuda.is_available() else "cpu"
    line = metrics(run_dir)[-1]
    for population in ("player_0", "player_1"):
        chosen = [k.rsplit("/", 1)[1] for k in line if k.startswith(f"train/{population}/device/")]
        assert len(chosen) == 1 and chosen[0] == (expected or chosen[0])
        assert line[f"train/{population}/acting_device/cpu"] == 1.0
    run = RunDirectory(run_dir)
    state, _ = run.load_state()
    for key, learned in run.load_learners(state).items():
        record = devices(learned.trainer)
        assert record["device"]["spec"] == "auto" and record["device"]["device"] == (expected or chosen[0]), key
        assert record["acting_device"]["device"] == "cpu"


# -- kept on resume -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_restored_trainer_keeps_the_recorded_choice_without_timing(name: str, use_auto) -> None:
    """Checkpoint -> restore: the record is used even though the timer would now choose
    otherwise, nothing is timed, and the trainer continues bit-identically."""
    use_auto(["cpu", "cpu"], FakeTimer(2.0, 1.0))
    algo = algorithm(name, **SMALL[name], **AUTO)
    policy, trainer = learner(algo)
    rng = np.random.default_rng(0)
    for _ in range(3):
        assert "loss" in trainer.update(bandit(policy, rng))
    state = trainer.state()
    record = devices(state)
    assert record["device"] == {"spec": "auto", "device": "cpu", "rows": 16, "timings": [["cpu", 2.0], ["cpu", 1.0]]}
    assert record["acting_device"] == {"spec": "auto", "device": "cpu", "rows": 40,
                                       "timings": [["cpu", 2.0], ["cpu", 1.0]]}
    later = FakeTimer(1.0, 2.0)  # would now choose the first candidate
    use_auto(["cpu", "cpu"], later)
    resumed_policy, resumed = learner(algo, seed=7, weights=policy.get_weights(), state=state)
    for _ in range(3):
        episodes = bandit(policy, rng)
        metrics_now = trainer.update(episodes)
        assert resumed.update(episodes) == metrics_now
        assert weights_equal(resumed_policy, policy)
    assert later.calls == 0
    assert devices(resumed.state()) == record and resumed.state() == trainer.state()


@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_a_state_without_the_record_loads_and_decides_anew(name: str, use_auto) -> None:
    use_auto(["cpu", "cpu"], FakeTimer(2.0, 1.0))
    algo = algorithm(name, **SMALL[name], **AUTO)
    policy, trainer = learner(algo)
    rng = np.random.default_rng(0)
    trainer.update(bandit(policy, rng))
    counters = json.loads(trainer.state()[TRAINER])
    del counters["devices"]  # a checkpoint of an earlier version
    old = {**trainer.state(), TRAINER: json.dumps(counters).encode()}
    later = FakeTimer(1.0, 3.0)
    use_auto(["cpu", "cpu"], later)
    resumed_policy, resumed = learner(algo, seed=7, weights=policy.get_weights(), state=old)
    assert later.calls == 4  # device and acting_device, each on both candidates
    assert devices(resumed.state())["device"]["timings"] == [["cpu", 1.0], ["cpu", 3.0]]
    episodes = bandit(policy, rng)
    expected = {k: v for k, v in trainer.update(episodes).items() if "_ms/" not in k}
    assert {k: v for k, v in resumed.update(episodes).items() if "_ms/" not in k} == expected
    assert weights_equal(resumed_policy, policy)


def test_a_recorded_device_this_machine_lacks_is_decided_anew_and_a_damaged_record_refused(use_auto) -> None:
    use_auto(["cpu"], refusing)
    algo = algorithm("dqn", **SMALL["dqn"], **AUTO)
    policy, trainer = learner(algo)
    trainer.update(bandit(policy, np.random.default_rng(0)))
    counters = json.loads(trainer.state()[TRAINER])
    counters["devices"]["device"] = {"spec": "auto", "device": "cuda:7", "rows": 16,
                                     "timings": [["cpu", 2e-3], ["cuda:7", 1e-3]]}  # saved on a GPU machine
    gpu_state = {**trainer.state(), TRAINER: json.dumps(counters).encode()}
    _, resumed = learner(algo, weights=policy.get_weights(), state=gpu_state)
    assert devices(resumed.state())["device"] == {"spec": "auto", "device": "cpu", "rows": None, "timings": []}
    counters["devices"]["device"] = {"spec": "auto", "device": "cpu"}
    with pytest.raises(CheckpointError, match="devices.device is not a device choice"):
        learner(algo, state={**trainer.state(), TRAINER: json.dumps(counters).encode()})
    counters["devices"] = ["cpu"]
    with pytest.raises(CheckpointError, match="devices is not an object"):
        learner(algo, state={**trainer.state(), TRAINER: json.dumps(counters).encode()})


@pytest.mark.parametrize("name", ALGORITHMS)
def test_explicit_devices_are_never_timed(name: str, use_auto) -> None:
    use_auto(["cpu", "cpu"], refusing)
    policy, trainer = learner(algorithm(name, **SMALL[name], device="cpu", acting_device="cpu"))
    got = trainer.update(bandit(policy, np.random.default_rng(0)))
    assert got["device/cpu"] == 1.0 and not [k for k in got if "_ms/" in k]
    assert devices(trainer.state())["device"] == {"spec": "cpu", "device": "cpu", "rows": None, "timings": []}


def test_a_resumed_run_keeps_the_recorded_choice_and_continues_as_the_uninterrupted_run(tmp_path: Path,
                                                                                        use_auto) -> None:
    """PSRO whose learners carry on (``init: previous``, so their trainer states are in
    the checkpoint): one iteration, then resumed for a second with a timer that would
    now choose otherwise; nothing is timed after the resume, the metrics show the
    recorded timings, and the policies are those of a run that was not interrupted."""
    config: dict[str, Any] = dict(env={"name": "matrix", "params": {"game": "rps"}},
                                  algorithm={"name": "dqn", "params": {**SMALL["dqn"], **AUTO}},
                                  solver={"name": "uniform"}, seed=3,
                                  training={"max_env_steps": 600, "num_envs": 16, "init": "previous"})
    use_auto(["cpu", "cpu"], FakeTimer(2.0, 1.0))
    whole = run_psro(tmp_path, "whole", **config, stopping={"max_iterations": 2})[1]
    use_auto(["cpu", "cpu"], FakeTimer(2.0, 1.0))
    split = run_psro(tmp_path, "split", **config, stopping={"max_iterations": 1})[1]
    later = FakeTimer(1.0, 4.0)
    use_auto(["cpu", "cpu"], later)
    summary = popmarl.run(popmarl.load_config(str(split / "config.yaml"), ["stopping.max_iterations=2"]),
                          resume=str(split))
    assert summary["status"] == "completed" and summary["iterations"] == 2
    assert later.calls == 0
    line = metrics(split)[-1]
    assert line["iteration"] == 2
    assert line["train/player_0/device_ms/cpu"] == 1000.0  # the recorded second timing (the timer now: 4 s)
    for pid in ("player_0/2", "player_1/2"):
        a, b = RunDirectory(whole).load_policy(pid), RunDirectory(split).load_policy(pid)
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), pid


# -- a real GPU (skipped where torch sees none: CI; run on a GPU machine) --------------------
requires_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU")


@requires_gpu
def test_on_a_gpu_auto_times_both_and_picks_the_gpu_for_wide_networks() -> None:
    """The default networks: both candidates timed and recorded (which wins is close,
    not asserted); 1024x1024 at batch 1024: the GPU (measured 2-4x faster)."""
    _, small = learner(algorithm("dqn", device="auto"))
    small.devices.decide()  # type: ignore[attr-defined]
    timed = [c for c, _ in small.devices.update.timings]  # type: ignore[attr-defined]
    assert timed == ["cpu", f"cuda:{torch.cuda.current_device()}"]
    _, wide = learner(algorithm("dqn", hidden=[1024, 1024], batch_size=1024, device="auto"))
    wide.devices.decide()  # type: ignore[attr-defined]
    assert wide.devices.update.device.startswith("cuda"), wide.devices.update  # type: ignore[attr-defined]
