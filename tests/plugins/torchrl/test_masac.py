"""``masac``: squashed actions inside the Box and a deterministic evaluation, one-line
errors for actions it cannot squash, a trainer that resumes bit-identically, and a team
of two firms of a Cournot duopoly learning to share the monopoly quantity on their summed
profit (what a centralized team critic can find and independent best responses cannot)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import popmarl
from popmarl.api import Box, ConfigError, Discrete, Observations, PolicySpace
from popmarl.data.learners import LearnerInit, LearnerSpec
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.engine.learner_loop import run_task
from popmarl.engine.learners import Learners
from popmarl.engine.rollout import RolloutWorker
from popmarl.errors import CheckpointError
from popmarl.interfaces.env import Env
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.runs.rundir import RunDirectory
from popmarl_pettingzoo.env import PettingZooEnv
from popmarl_torch.squashed import from_box, to_box
from testkit.cournot import Cournot, CournotConfig
from testkit.team_configs import SPREAD, box, marl_config

pytest.importorskip("mpe2")
pytestmark = [pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")]

BOX = Box(shape=(2,), low=[0.0, -3.0], high=[9.0, 1.0])
#: Small, fast settings of the trainer's update paths.
SMALL: dict[str, Any] = {"hidden": [16], "critic_hidden": [32], "batch_size": 32, "learning_starts": 50,
                         "buffer_size": 150, "updates_per_step": 0.25}


def _space(action: Box | Discrete, agents: tuple[str, ...] = ("a",)) -> PolicySpace:
    return PolicySpace(population="p", agents=agents, observation_space=Box(shape=(1,), low=1.0, high=1.0),
                       action_space=action)


def _masac(**params: Any) -> Any:
    return popmarl.algorithms.load("masac")(**params)


def test_actions_are_squashed_into_the_box_and_evaluation_is_deterministic() -> None:
    policy = _masac(hidden=[8], agent_id=True).make_policy(space=_space(BOX, ("a", "b")), seed=0)
    rng = np.random.default_rng(0)
    batch = Observations(obs=np.ones((500, 1), np.float32), agent="b")
    explored = policy.act(batch, explore=True, rng=rng)
    assert explored.shape == (500, 2) and explored.dtype == np.float32
    assert np.all(BOX.clip(explored) == explored)  # the engine's clip changes nothing
    assert explored.std(axis=0).min() > 0.3  # a fresh actor explores the whole Box
    # However far its mean, the squashed action stays inside.
    for module in policy.actor.net.modules():
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.constant_(module.weight, 50.0)
    far = policy.act(batch, explore=True, rng=rng)
    assert np.all(BOX.clip(far) == far) and np.allclose(far, BOX.high)
    policy = _masac(hidden=[8]).make_policy(space=_space(BOX), seed=0)
    greedy = policy.act(Observations(obs=np.ones((50, 1), np.float32)), explore=False, rng=rng)
    again = policy.act(Observations(obs=np.ones((50, 1), np.float32)), explore=False, rng=np.random.default_rng(9))
    assert np.all(greedy == greedy[0]) and np.array_equal(greedy, again)  # tanh(mean), whatever the generator
    np.testing.assert_allclose(greedy[0], (BOX.low + BOX.high) / 2, atol=0.1)  # a fresh mean is near 0
    squashed = np.array([[-1.0, 1.0], [0.0, 0.5]])
    np.testing.assert_allclose(from_box(to_box(squashed, BOX), BOX), squashed)


def test_discrete_or_unbounded_actions_are_a_one_line_config_error(tmp_path: Path) -> None:
    masac = _masac()
    with pytest.raises(ConfigError, match=r"^algorithm masac: population p's actions .* need finite bounds "
                                          r"\(masac squashes its actions into them\); use mappo"):
        masac.make_policy(space=_space(Box(shape=(1,), low=0.0)), seed=0)
    config = {"scenario": "marl", "seed": 0, "env": SPREAD, "agents": {"mapping": "shared"},
              "algorithm": {"name": "masac"}, "trackers": []}
    with pytest.raises(ConfigError) as caught:
        popmarl.run(popmarl.validate(config), out=tmp_path / "run")
    message = str(caught.value)
    assert "\n" not in message and not (tmp_path / "run").exists()
    assert message.startswith("algorithm masac: population shared needs Box actions, got Discrete(")
    assert message.endswith("use mappo (discrete or Box actions) or vdn/qmix (discrete)")
    with pytest.raises(ConfigError, match=r"^algorithm\.params\.reward: "):
        popmarl.validate({**config, "algorithm": {"name": "masac", "params": {"reward": "mine"}}})


def _team(env: Env, **params: Any) -> Learners:
    algorithm = _masac(**{**SMALL, **params})
    return Learners({seat: PopulationAlgorithm(space=PolicySpace(population=seat, agents=(seat,),
                                                                 observation_space=env.observation_space(seat),
                                                                 action_space=env.action_space(seat)),
                                               algorithm=algorithm, env=env, algorithm_name="masac")
                     for seat in env.agents})


def _task(env: Env, init: LearnerInit, seed: int) -> TrainTask:
    spec = LearnerSpec(key="team", population=env.agents[0], seats=env.agents, seed=11, init=init)
    return TrainTask(learners=(spec,), seed=seed, budget=TrainBudget(max_episodes=4, episodes_per_update=2),
                     return_state=True)


def _weights(learners: Learners) -> dict[str, np.ndarray]:
    return {f"{p}:{k}": v for p, w in learners.held["team"].weights().items() for k, v in w.items()}


@pytest.mark.parametrize("reward", ["team", "own"])
def test_a_rebuilt_masac_trainer_continues_bit_identically(reward: str) -> None:
    """Critics, targets, α, the three Adams, the buffer (wrapping around) and both
    generators are restored: the copy and the original end with equal weights and state."""
    env = PettingZooEnv(config=PettingZooEnv.Config(module="mpe2.simple_spread_v3",
                                                    kwargs={"N": 2, "max_cycles": 25, "continuous_actions": True}))
    worker = RolloutWorker(env=env, num_envs=4)
    original = _team(env, reward=reward)
    first = run_task(_task(env, LearnerInit(), 1), learners=original, rollout=worker, policy_of={}.__getitem__)
    state = first.states["team"]
    assert set(state.trainer) == {"trainer.json", "trainer.pt", "random.pt", "buffer.npz"}
    assert all(k.startswith("actor.") for w in (state.weights, *state.members.values()) for k in w)
    assert original.held["team"].trainer.gradient_steps > 0
    copy = _team(env, reward=reward)
    run_task(_task(env, LearnerInit.restore(state), 2), learners=copy, rollout=worker, policy_of={}.__getitem__)
    run_task(_task(env, LearnerInit(kind="continue"), 2), learners=original, rollout=worker, policy_of={}.__getitem__)
    mine, theirs = _weights(copy), _weights(original)
    assert sorted(mine) == sorted(theirs) and all(np.array_equal(mine[k], theirs[k]) for k in mine)
    assert copy.held["team"].state().trainer == original.held["team"].state().trainer
    with pytest.raises(CheckpointError, match=r"^trainer state buffer.npz: .* does not fit this config's buffer"):
        _team(env, buffer_size=50, reward=reward).rebuild(state, seats=env.agents)


@pytest.fixture
def cournot(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Registers the test env ``cournot`` for one test."""
    monkeypatch.setattr(popmarl, "envs", popmarl.envs.with_component("cournot", Cournot))
    yield "cournot"


def test_a_team_of_firms_learns_the_monopoly_quantity(cournot: str, tmp_path: Path) -> None:
    """On the firms' summed profit the team's best total quantity is the monopoly's,
    ``(a - c) / 2b`` = 4.5 (profit 20.25, above the 18 of the Nash equilibrium's 3 + 3,
    which independent learners approach); a fresh actor plays the Box's middle, 4.5 each
    (profit 0). How the team splits the total is its own affair. Stopped by env steps."""
    config = {"scenario": "marl", "seed": 0, "env": {"name": cournot}, "agents": {"mapping": "per_player"},
              "algorithm": {"name": "masac", "params": {"hidden": [32, 32], "critic_hidden": [64, 64],
                                                        "batch_size": 64, "learning_starts": 100,
                                                        "updates_per_step": 1.0}},
              "stopping": {"max_iterations": 3},
              "training": {"max_env_steps": 600, "episodes_per_update": 50, "num_envs": 50},
              "evaluation": {"episodes_per_entry": 4}, "trackers": []}
    summary = popmarl.run(popmarl.validate(config), out=tmp_path / "run")
    c = CournotConfig()
    params = config["algorithm"]["params"]
    quantities = []
    for population, info in summary["populations"].items():
        policy = _masac(**params).make_policy(space=PolicySpace(
            population=population, agents=(population,), observation_space=Box(shape=(1,), low=1.0, high=1.0),
            action_space=Box(shape=(1,), low=0.0, high=c.q_max)), seed=0)
        policy.set_weights(RunDirectory(tmp_path / "run").load_policy(info["policies"][-1]))
        quantities.append(float(policy.act(Observations(obs=np.ones((1, 1), np.float32)), explore=False,
                                           rng=np.random.default_rng(0))[0, 0]))
    total = sum(quantities)
    profit = total * (c.a - c.b * total - c.c)
    # Seed 0 ends at a total of 4.96, profit 20.04.
    assert abs(total - 4.5) < 0.75 and profit > 19.5, (quantities, profit)



def test_two_runs_of_one_seed_are_identical(tmp_path: Path) -> None:
    """Every weight comes from the run's seed (the critics' too, the second of which
    SACLoss draws itself): a second run in the same process, whose global torch generator
    has moved on, ends with the same policies."""
    config = marl_config("masac", box(SPREAD), "shared", iterations=1)
    for name in ("a", "b"):
        popmarl.run(popmarl.validate(config), out=tmp_path / name)
    first, second = (RunDirectory(tmp_path / name).load_policy("shared/1") for name in ("a", "b"))
    assert first.keys() == second.keys() and all(np.array_equal(first[k], second[k]) for k in first)


def test_the_critics_take_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``critic_model``: the twin critics are the model's encoder over the state (spread's
    54 entries) with every seat's action (3 × 5) as extra columns, and a value head; a
    model that cannot read the state is refused when the run is checked."""
    mlp = {"name": "mlp", "params": {"hidden": [8], "activation": "tanh"}}
    popmarl.run(popmarl.validate(marl_config("masac", box(SPREAD), "shared", iterations=1, critic_model=mlp)),
                out=tmp_path / "run")
    assert "masac (shared): actor mlp [16], critic mlp [8] tanh" in capsys.readouterr().out
    saved = torch.load(tmp_path / "run" / "checkpoints" / "learners-000001" / "shared" / "trainer" / "trainer.pt",
                       weights_only=True)["loss"]
    assert tuple(saved["qvalue_network_params.module.mlp.0.weight"].shape) == (2, 8, 54 + 3 * 5)
    cnn = {"name": "cnn", "params": {"channels": [4]}}
    with pytest.raises(ConfigError, match=r"algorithm masac: critic_model: model cnn: needs image observations"):
        popmarl.run(popmarl.validate(marl_config("masac", box(SPREAD), "shared", critic_model=cnn)),
                    out=tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
