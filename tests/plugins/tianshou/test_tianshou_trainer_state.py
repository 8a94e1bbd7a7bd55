"""Trainer state: a trainer rebuilt from a policy's weights and its predecessor's
``state()`` continues bit-identically; the state is made of safe files only, and a
damaged or mismatched one is a one-line CheckpointError."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from tianshou_helpers import BOX_SPACE, Bandit, algorithm, box_episodes, requires_openspiel

import popmarl
from popmarl.interfaces.algorithm import Algorithm, PolicySpace, TrainerContext
from popmarl.builtin.random_policy import UniformRandomPolicy
from popmarl.errors import CheckpointError
from popmarl.interfaces.policy import Policy
from popmarl.data.episodes import Episode
from popmarl.data.policies import Weights
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.interfaces.trainer import Trainer, TrainerState
from popmarl.api import npz_bytes
from popmarl_torch.state import torch_bytes

#: Small configs whose first updates already train (the DQN buffer wraps around).
PARAMS: dict[str, dict[str, Any]] = {
    "dqn": {"hidden": [16], "learning_starts": 16, "batch_size": 16, "buffer_size": 100, "target_update_freq": 5,
            "n_step": 2, "eps_decay_steps": 500},
    "ppo": {"hidden": [16], "batch_size": 16, "epochs": 2},
    "a2c": {"hidden": [16], "batch_size": 16},
}
Collect = Callable[[Policy, np.random.Generator], list[Episode]]
BANDIT = Bandit.make()


def bandit(policy: Policy, rng: np.random.Generator) -> list[Episode]:
    return BANDIT.episodes(policy, 40, rng)


def box(policy: Policy, rng: np.random.Generator) -> list[Episode]:
    return box_episodes(policy, 40, rng)


def kuhn_collect() -> tuple[PolicySpace, Collect]:
    """Two-decision Kuhn poker episodes of player_0 against a uniform player_1,
    through the rollout engine."""
    env = popmarl.envs.load("openspiel")(game="kuhn_poker")
    worker = RolloutWorker(env=env, num_envs=8)
    space = PolicySpace(population="player_0", agents=("player_0",), observation_space=env.observation_space("player_0"),
                        action_space=env.action_space("player_0"))

    def collect(policy: Policy, rng: np.random.Generator) -> list[Episode]:
        played = worker.explore(learners=[Seating(policy=policy, seats=("player_0",))],
                                opponents=OpponentDraw({"player_1": ([UniformRandomPolicy(2)], np.ones(1))}),
                                max_episodes=30, max_steps=None, seed=int(rng.integers(2**31)))
        return played.episodes[0]

    return space, collect


def rebuilt(algo: Algorithm, space: PolicySpace, weights: Weights,
            state: TrainerState | None) -> tuple[Policy, Trainer]:
    """A new learner (another seed) with ``weights``, and ``state`` loaded unless None."""
    policy = algo.make_policy(space=space, seed=7)
    policy.set_weights(weights)
    trainer = algo.make_trainer(policy=policy, space=space, seed=7,
                                context=TrainerContext.alone(policy=policy, space=space))
    assert trainer is not None
    if state is not None:
        trainer.load_state(state)
    return policy, trainer


def decoded(state: TrainerState) -> dict[str, Any]:
    """Every file read back with a safe loader only (no code can run)."""
    out: dict[str, Any] = {}
    for name, data in state.items():
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", name), name
        assert isinstance(data, bytes), name
        if name.endswith(".pt"):
            out[name] = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        elif name.endswith(".npz"):
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                out[name] = {key: npz[key] for key in npz.files}
        else:
            assert name.endswith(".json"), name
            out[name] = json.loads(data)
    return out


def same(a: Any, b: Any) -> bool:
    """Exact equality of nested containers of tensors, arrays and scalars."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def weights_equal(a: Policy, b: Policy) -> bool:
    wa, wb = a.get_weights(), b.get_weights()
    return wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)


def check_resume(name: str, space: PolicySpace, collect: Collect) -> None:
    """Train 3 rounds, rebuild from weights + state, then feed original, rebuilt and a
    rebuilt-without-state trainer the same 3 further rounds."""
    algo = algorithm(name, **PARAMS[name])
    rng = np.random.default_rng(0)
    policy = algo.make_policy(space=space, seed=0)
    trainer = algo.make_trainer(policy=policy, space=space, seed=0,
                                context=TrainerContext.alone(policy=policy, space=space))
    assert trainer is not None
    for _ in range(3):
        assert "loss" in trainer.update(collect(policy, rng))  # it trains from the start
    state = trainer.state()
    resumed_policy, resumed = rebuilt(algo, space, policy.get_weights(), state)
    assert same(decoded(resumed.state()), decoded(state))
    fresh_policy, fresh = rebuilt(algo, space, policy.get_weights(), None)
    diverged = False
    for _ in range(3):
        episodes = collect(policy, rng)
        metrics = trainer.update(episodes)
        assert resumed.update(episodes) == metrics
        assert weights_equal(resumed_policy, policy)
        diverged |= fresh.update(episodes) != metrics or not weights_equal(fresh_policy, policy)
    assert diverged, "a trainer without the state behaved the same: the test could not fail"
    assert same(decoded(resumed.state()), decoded(trainer.state()))


@pytest.mark.parametrize("name", ["dqn", "ppo", "a2c"])
def test_a_rebuilt_trainer_continues_bit_identically(name: str) -> None:
    check_resume(name, BANDIT.space, bandit)


@pytest.mark.parametrize("name", ["ppo", "a2c"])
def test_a_rebuilt_gaussian_trainer_continues_bit_identically(name: str) -> None:
    check_resume(name, BOX_SPACE, box)


@requires_openspiel
@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_a_rebuilt_trainer_continues_bit_identically_on_kuhn_poker(name: str) -> None:
    check_resume(name, *kuhn_collect())


def trained(name: str, rounds: int = 2, **params: Any) -> tuple[Algorithm, Policy, TrainerState]:
    algo = algorithm(name, **{**PARAMS[name], **params})
    rng = np.random.default_rng(0)
    policy = algo.make_policy(space=BANDIT.space, seed=0)
    trainer = algo.make_trainer(policy=policy, space=BANDIT.space, seed=0,
                                context=TrainerContext.alone(policy=policy, space=BANDIT.space))
    assert trainer is not None
    for _ in range(rounds):
        trainer.update(bandit(policy, rng))
    return algo, policy, trainer.state()


def test_state_files() -> None:
    """What each trainer saves; the DQN buffer file holds only the filled rows."""
    _, _, dqn = trained("dqn", rounds=1)
    assert sorted(dqn) == ["buffer.npz", "optim.pt", "target.pt", "trainer.json"]
    files = decoded(dqn)
    assert {key: value.shape[0] for key, value in files["buffer.npz"].items()} == {
        key: 40 for key in ("obs.obs", "obs.mask", "obs_next.obs", "obs_next.mask", "act", "rew", "terminated",
                            "truncated", "done")}
    assert files["trainer.json"]["decisions"] == 40 and files["trainer.json"]["buffer"]["size"] == 40
    _, _, empty = trained("dqn", rounds=0)  # nothing collected yet: no buffer file
    assert sorted(empty) == ["optim.pt", "target.pt", "trainer.json"]
    _, _, no_target = trained("dqn", rounds=1, target_update_freq=0)
    assert "target.pt" not in no_target
    for name in ("ppo", "a2c"):
        _, _, state = trained(name)
        assert sorted(state) == ["critic.pt", "optim.pt", "trainer.json"]
        assert decoded(state)["trainer.json"]["kind"] == name


def load_error(name: str, state: TrainerState, **params: Any) -> str:
    algo = algorithm(name, **{**PARAMS[name], **params})
    policy = algo.make_policy(space=BANDIT.space, seed=0)
    trainer = algo.make_trainer(policy=policy, space=BANDIT.space, seed=0,
                                context=TrainerContext.alone(policy=policy, space=BANDIT.space))
    assert trainer is not None
    with pytest.raises(CheckpointError) as info:
        trainer.load_state(state)
    message = str(info.value)
    assert "\n" not in message
    return message


class NotAllowed:
    """A live object: a state that pickles one must not load."""


@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_a_damaged_state_is_a_checkpoint_error(name: str) -> None:
    _, _, state = trained(name)
    assert "optim.pt" in load_error(name, {k: v for k, v in state.items() if k != "optim.pt"})
    assert "missing" in load_error(name, {k: v for k, v in state.items() if k != "optim.pt"})
    assert "optim.pt" in load_error(name, {**state, "optim.pt": state["optim.pt"][:100]})
    assert "not valid JSON" in load_error(name, {**state, "trainer.json": b"{"})
    network = "target.pt" if name == "dqn" else "critic.pt"
    # A pickled object (here a class, through torch.save) is refused by weights_only.
    assert network in load_error(name, {**state, network: torch_bytes({"x": NotAllowed()})})
    counters = json.loads(state["trainer.json"])
    del counters["gradient_steps"]
    assert "missing gradient_steps" in load_error(name, {**state, "trainer.json": json.dumps(counters).encode()})


def test_a_damaged_replay_buffer_is_a_checkpoint_error() -> None:
    _, _, state = trained("dqn")
    objects = npz_bytes({"act": np.array([NotAllowed()], dtype=object)})
    assert "buffer.npz: not a readable .npz file" in load_error("dqn", {**state, "buffer.npz": objects})
    arrays = decoded(state)["buffer.npz"]
    short = npz_bytes({**arrays, "rew": arrays["rew"][:-1]})
    assert "buffer.npz: rew has shape (79,), expected (80,)" in load_error("dqn", {**state, "buffer.npz": short})
    missing = npz_bytes({k: v for k, v in arrays.items() if k != "obs_next.mask"})
    assert "buffer.npz: holds" in load_error("dqn", {**state, "buffer.npz": missing})


def test_a_state_of_another_config_is_a_checkpoint_error() -> None:
    _, _, dqn = trained("dqn")
    message = load_error("dqn", dqn, buffer_size=200)
    assert message == ("trainer state trainer.json: the replay buffer holds up to 100 transitions, "
                       "this config's buffer_size is 200")
    assert "target.pt" in load_error("dqn", dqn, hidden=[8]) and "another config" in load_error("dqn", dqn, hidden=[8])
    _, _, ppo = trained("ppo")
    assert "holds a 'ppo' trainer state" in load_error("a2c", ppo)
    assert "expected 'dqn'" in load_error("dqn", ppo)
    assert "critic.pt" in load_error("ppo", ppo, hidden=[16, 16])
