"""What learners get from PettingZoo envs: the observation at a cut (truncated episodes
bootstrap from it, in PSRO oracles and in ``marl`` co-learning alike) and Box actions
with per-entry bounds (the env gets them clipped, episodes keep the policy's sample)."""

from __future__ import annotations

import sys
import types
from typing import Any

import gymnasium.spaces as gs
import numpy as np
import popmarl
import pytest
from popmarl.interfaces.algorithm import PolicySpace
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.engine.learners import Learners
from popmarl.data.episodes import Episode
from popmarl.data.seeds import seed32
from popmarl.data.learners import LearnerInit, LearnerSpec
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.interfaces.spaces import Box
from popmarl.engine.learner_loop import run_task
from popmarl_pettingzoo import PettingZooEnv

from pz_guards import random_actions

pytest.importorskip("mpe2")
pytest.importorskip("popmarl_tianshou")
from popmarl_tianshou.batching import transitions  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")


def _expected_final(twin: Any, api: str, obs: dict[str, Any], env: PettingZooEnv) -> dict[str, np.ndarray]:
    if api == "parallel":
        return {a: np.asarray(o, np.float32).reshape(-1) for a, o in obs.items()}
    seen = {}
    for agent in twin.agents:
        raw = twin.observe(agent)
        seen[agent] = np.asarray(raw["observation"] if isinstance(raw, dict) else raw, np.float32).reshape(-1)
    return seen


@pytest.mark.parametrize(("module", "api", "kwargs", "max_steps"), [
    ("mpe2.simple_spread_v3", "parallel", {"N": 2, "max_cycles": 3}, None),
    ("mpe2.simple_spread_v3", "aec", {"N": 2, "max_cycles": 3}, None),
    ("mpe2.simple_spread_v3", "parallel", {"N": 2, "max_cycles": 25}, 2),
    ("pettingzoo.classic.tictactoe_v3", "aec", {}, 3),
])
def test_a_cut_off_game_reports_each_agents_observation_at_the_cut(module: str, api: str, kwargs: dict[str, Any],
                                                                    max_steps: int | None) -> None:
    """Checked against a twin of the env stepped with the same actions."""
    env = PettingZooEnv(module=module, api=api, kwargs=kwargs, max_steps=max_steps)
    vec = env.vector(num_envs=1, seed=7)
    factory = getattr(__import__(module, fromlist=["env"]), "parallel_env" if api == "parallel" else "env")
    twin = factory(**kwargs)
    reset = twin.reset(seed=seed32(7))  # what the vector seeds its copy 0 with
    twin_obs = reset[0] if api == "parallel" else None
    rng = np.random.default_rng(0)
    step = vec.reset()
    cuts = 0
    for _ in range(20):
        actions = random_actions(env, step, rng)
        if api == "parallel":
            twin_obs = twin.step({a: int(v[0]) for a, v in actions.items()})[0]
        else:
            (agent, chosen), = actions.items()
            assert twin.agent_selection == agent
            twin.step(int(chosen[0]))
        step = vec.step(actions)
        if not len(step.finished):
            continue
        assert step.truncated.tolist() == [True]
        expected = _expected_final(twin, api, twin_obs, env)
        assert sorted(step.final) == sorted(expected) and expected
        for agent, (ids, batch) in step.final.items():
            assert ids.tolist() == [0] and batch.agent == agent
            np.testing.assert_array_equal(batch.obs[0], expected[agent])
            if module.startswith("pettingzoo.classic"):
                assert batch.mask is not None
                np.testing.assert_array_equal(batch.mask[0], twin.observe(agent)["action_mask"].astype(bool))
        cuts += 1
        twin_obs = twin.reset()[0] if api == "parallel" else twin.reset()
    assert cuts >= 2


def test_a_terminated_game_reports_no_final_observation() -> None:
    env = PettingZooEnv(module="pettingzoo.classic.tictactoe_v3")
    vec = env.vector(num_envs=4, seed=0)
    rng = np.random.default_rng(0)
    step = vec.reset()
    ended = 0
    for _ in range(40):
        step = vec.step(random_actions(env, step, rng))
        ended += len(step.finished)
        assert not step.truncated.any() and step.final == {}
    assert ended > 4


def _spread() -> PettingZooEnv:
    return PettingZooEnv(module="mpe2.simple_spread_v3", kwargs={"N": 2, "max_cycles": 4})


def _ppo_space(env: PettingZooEnv, agents: tuple[str, ...], population: str = "p") -> PolicySpace:
    return PolicySpace(population=population, agents=agents, observation_space=env.observation_space(agents[0]),
                       action_space=env.action_space(agents[0]))


def _check_bootstrapped(episodes: list[Episode], space: PolicySpace, length: int) -> None:
    """Every MPE episode is cut by its time limit: truncated, with the observation at the
    cut, which becomes the last transition's ``obs_next``."""
    assert episodes
    for episode in episodes:
        assert episode.truncated and not episode.terminated and len(episode.actions) == length
        assert episode.final_obs is not None and episode.final_obs.shape == episode.obs.shape[1:]
        assert not np.array_equal(episode.final_obs, episode.obs[-1])
    batch = transitions(episodes, space)
    last = np.cumsum([len(e.actions) for e in episodes]) - 1
    assert batch.truncated[last].all() and not batch.terminated.any() and batch.done.sum() == len(episodes)
    np.testing.assert_array_equal(batch.obs_next.obs[last], np.stack([e.final_obs for e in episodes]))


def test_mpe_oracle_episodes_bootstrap_from_the_observation_at_the_cut() -> None:
    env = _spread()
    space = _ppo_space(env, ("agent_0",))
    ppo = popmarl.algorithms.load("ppo")()
    learner = ppo.make_policy(space=space, seed=0)
    opponents = OpponentDraw({a: ([ppo.make_policy(space=space, seed=1)], np.ones(1)) for a in env.agents})
    played = RolloutWorker(env=env, num_envs=3).explore(
        learners=[Seating(policy=learner, seats=("agent_0",))], opponents=opponents, max_episodes=6, max_steps=None,
        seed=0)
    _check_bootstrapped(played.episodes[0], space, 4)


def test_marl_co_learning_episodes_bootstrap_from_the_observation_at_the_cut() -> None:
    """Two learners co-learning in the same games (a train task of several learners, as
    ``marl`` gives): each updates on its own seat's episodes, cut by the time limit."""
    env = _spread()
    ppo = popmarl.algorithms.load("ppo")(batch_size=16, epochs=1)
    spaces = {a: _ppo_space(env, (a,), a) for a in env.agents}
    learners = Learners({a: PopulationAlgorithm(space=spaces[a], algorithm=ppo, env=env) for a in env.agents})
    initial = {f"{a}/0": ppo.initial_policy(space=spaces[a], seed=k) for k, a in enumerate(env.agents)}
    seen: dict[str, list[Episode]] = {a: [] for a in env.agents}
    for agent in env.agents:  # start each learner, then record what its trainer is given
        learner = learners.prepare(LearnerSpec(key=agent, population=agent, seats=(agent,), seed=0,
                                               init=LearnerInit.start_from(f"{agent}/0")), initial.__getitem__)
        assert learner.trainer is not None
        update = learner.trainer.update
        learner.trainer.update = (  # type: ignore[method-assign]
            lambda episodes, update=update, agent=agent: (seen[agent].extend(episodes), update(episodes))[1])
    task = TrainTask(learners=tuple(LearnerSpec(key=a, population=a, seats=(a,), seed=0,
                                                init=LearnerInit(kind="continue")) for a in env.agents),
                     seed=0, budget=TrainBudget(max_episodes=4, episodes_per_update=4))
    result = run_task(task, learners=learners, rollout=RolloutWorker(env=env, num_envs=3),
                      policy_of=initial.__getitem__)
    assert result.episodes == 4
    for agent in env.agents:
        assert {e.agent for e in seen[agent]} == {agent} and len(seen[agent]) == 4
        _check_bootstrapped(seen[agent], spaces[agent], 4)


# -- Box actions with per-entry bounds -------------------------------------------------------
LOW, HIGH = np.array([0.0, -1.0], np.float32), np.array([1.0, 5.0], np.float32)


class _Dial:
    """A two-agent Parallel env with Box(low=[0, -1], high=[1, 5]) actions; it refuses an
    action outside them and keeps every action it applies, in ``applied``."""

    metadata = {"name": "dial_v0"}
    applied: dict[str, list[np.ndarray]] = {}

    def __init__(self) -> None:
        self.possible_agents = ["a", "b"]
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> gs.Box:
        return gs.Box(-1.0, 1.0, (1,), np.float32)

    def action_space(self, agent: str) -> gs.Box:
        return gs.Box(low=LOW, high=HIGH, dtype=np.float32)

    def reset(self, seed: int | None = None, options: Any = None) -> Any:
        self.agents, self.t = list(self.possible_agents), 0
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, np.ndarray]) -> Any:
        for agent, action in actions.items():
            assert self.action_space(agent).contains(action), (agent, action)
            _Dial.applied.setdefault(agent, []).append(np.array(action))
        self.t += 1
        cut = self.t >= 2
        obs = {a: np.full(1, self.t / 2, np.float32) for a in self.agents}
        flags = {a: cut for a in self.agents}
        result = obs, {a: 0.0 for a in self.agents}, {a: False for a in self.agents}, flags, {a: {} for a in self.agents}
        if cut:
            self.agents = []
        return result

    def close(self) -> None:
        pass


@pytest.fixture
def dial(monkeypatch: pytest.MonkeyPatch) -> PettingZooEnv:
    from pettingzoo.utils.env import ParallelEnv

    cls = type("Dial", (_Dial, ParallelEnv), {})
    monkeypatch.setattr(_Dial, "applied", {})
    monkeypatch.setitem(sys.modules, "pz_dial", types.SimpleNamespace(parallel_env=cls))
    return PettingZooEnv(module="pz_dial")


def test_box_actions_keep_each_entrys_bounds(dial: PettingZooEnv) -> None:
    assert dial.action_space("a") == Box(shape=(2,), low=[0.0, -1.0], high=[1.0, 5.0])
    space = _ppo_space(dial, ("a",))
    draws = popmarl.algorithms.load("ppo")().initial_policy(space=space, seed=0).act(
        popmarl.Observations(obs=np.zeros((2000, 1), np.float32)), explore=True, rng=np.random.default_rng(0))
    assert draws[:, 0].min() >= 0 and draws[:, 0].max() <= 1 and draws[:, 1].min() >= -1 and draws[:, 1].max() <= 5
    assert draws[:, 1].max() > 4 and draws[:, 1].min() < 0  # uniform over each entry's own range


def test_box_episodes_keep_the_gaussian_sample_and_the_env_gets_it_clipped(dial: PettingZooEnv) -> None:
    space = _ppo_space(dial, ("a",))
    ppo = popmarl.algorithms.load("ppo")(log_std_init=2.0)  # std 7.4: most samples past a bound
    learner = ppo.make_policy(space=space, seed=0)
    opponents = OpponentDraw({a: ([ppo.make_policy(space=space, seed=1)], np.ones(1)) for a in dial.agents})
    (episodes,) = RolloutWorker(env=dial, num_envs=4).explore(
        learners=[Seating(policy=learner, seats=("a",))], opponents=opponents, max_episodes=20, max_steps=None,
        seed=0).episodes
    recorded = np.concatenate([e.actions for e in episodes])
    assert len(recorded) == 40 and recorded.dtype == np.float32
    # The policy's own samples (PPO trains on their log-probabilities), past every bound.
    assert (recorded[:, 0] > 5).any() and (recorded[:, 1] < -1).any()
    applied = np.stack(_Dial.applied["a"])
    assert applied[:, 0].min() >= 0 and applied[:, 0].max() <= 1 and applied[:, 1].min() >= -1
    assert applied[:, 1].max() <= 5 and (applied[:, 0] == 1).any()  # each entry clipped to its own bounds
    applied_rows = {tuple(row) for row in applied.tolist()}
    assert all(tuple(row) in applied_rows for row in np.clip(recorded, LOW, HIGH).tolist())
