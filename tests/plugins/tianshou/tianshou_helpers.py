"""Helpers of the tianshou plugin tests: small games, training loops, PSRO runs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import yaml

import popmarl
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.interfaces.algorithm import Algorithm, PolicySpace, TrainerContext
from popmarl.interfaces.env import Env, Step, VectorEnv
from popmarl.interfaces.policy import Policy
from popmarl.engine.learners import Learners
from popmarl.data.episodes import Episode, Observations
from popmarl.data.learners import LearnerSpec
from popmarl.data.policies import PolicySpec
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.engine.rollout import RolloutWorker
from popmarl.interfaces.spaces import Box, Discrete
from popmarl.engine.learner_loop import run_task

ALGORITHMS = ("dqn", "ppo", "a2c")
ACTOR_CRITIC = ("ppo", "a2c")

requires_openspiel = pytest.mark.skipif("openspiel" not in popmarl.envs.names(),
                                        reason="env 'openspiel' (plugin popmarl-openspiel) is not installed")
requires_nash = pytest.mark.skipif("nash" not in popmarl.solvers.names(),
                                   reason="solver 'nash' (plugin popmarl-solvers) is not installed")


def algorithm(name: str, **params: Any) -> Algorithm:
    return popmarl.algorithms.load(name)(**params)


def space(observation: Box | Discrete, action: Box | Discrete) -> PolicySpace:
    return PolicySpace(population="p", agents=("a",), observation_space=observation, action_space=action)


# -- random masked episodes (equality tests of batched preprocessing) ----------------------
MASKED_OBS, MASKED_ACTIONS = 6, 4
MASKED_SPACE = space(Box(shape=(MASKED_OBS,), low=-1.0, high=1.0), Discrete(n=MASKED_ACTIONS))


def masked_episodes(n: int, rng: np.random.Generator) -> list[Episode]:
    """Random data on :data:`MASKED_SPACE`: episodes of 1-6 decisions with random
    features, legal actions (at least one) and rewards; a third are truncated (with an
    observation and mask at the cut)."""
    out = []
    for _ in range(n):
        steps = int(rng.integers(1, 7))
        masks = rng.random((steps, MASKED_ACTIONS)) < 0.6
        masks[np.arange(steps), rng.integers(MASKED_ACTIONS, size=steps)] = True
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        rewards = rng.normal(size=steps).astype(np.float32)
        truncated = bool(rng.random() < 1 / 3)
        final_mask = rng.random(MASKED_ACTIONS) < 0.5 if truncated else None  # may allow no action
        out.append(Episode(agent="a", obs=rng.uniform(-1, 1, (steps, MASKED_OBS)).astype(np.float32), actions=actions,
                           rewards=rewards, masks=masks, terminated=not truncated, truncated=truncated,
                           episode_return=float(rewards.sum()),
                           final_obs=rng.uniform(-1, 1, MASKED_OBS).astype(np.float32) if truncated else None,
                           final_mask=final_mask))
    return out


# -- PSRO runs ------------------------------------------------------------------------------
def run_psro(tmp_path: Path, name: str, **config: Any) -> tuple[dict[str, Any], Path]:
    """Write ``config`` (with no trackers unless given) as YAML, load and run it."""
    config.setdefault("trackers", [])
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    run_dir = tmp_path / name
    summary = popmarl.run(popmarl.load_config(str(path)), out=str(run_dir))
    return summary, run_dir


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


# -- a masked contextual bandit (trainer-level learning) -------------------------------------
@attrs.frozen
class Bandit:
    """``contexts`` one-hot observations, reward ``table[context, action]``, a random set
    of at least two legal actions per decision."""

    table: np.ndarray

    @classmethod
    def make(cls, contexts: int = 4, actions: int = 5, seed: int = 0) -> Bandit:
        return cls(np.random.default_rng(seed).uniform(0, 1, (contexts, actions)))

    @property
    def space(self) -> PolicySpace:
        contexts, actions = self.table.shape
        return space(Box(shape=(contexts,), low=0.0, high=1.0), Discrete(n=actions))

    def decisions(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, Observations]:
        contexts, actions = self.table.shape
        context = rng.integers(contexts, size=n)
        mask = rng.random((n, actions)) < 0.5
        mask[np.arange(n), rng.integers(actions, size=n)] = True
        mask[np.arange(n), (context + 1) % actions] = True
        return context, Observations(obs=np.eye(contexts, dtype=np.float32)[context], mask=mask)

    def episodes(self, policy: Policy, n: int, rng: np.random.Generator) -> list[Episode]:
        context, batch = self.decisions(n, rng)
        actions = policy.act(batch, explore=True, rng=rng)
        rewards = self.table[context, actions]
        return [Episode(agent="a", obs=batch.obs[i:i + 1], actions=actions[i:i + 1],
                        rewards=rewards[i:i + 1].astype(np.float32), masks=batch.mask[i:i + 1],
                        terminated=True, truncated=False, episode_return=float(rewards[i])) for i in range(n)]

    def value(self, probs: np.ndarray, context: np.ndarray) -> float:
        """Mean expected reward of action probabilities ``probs`` in ``context``."""
        return float(np.mean(np.sum(probs * self.table[context], axis=1)))


# -- a continuous bandit (Box actions) -------------------------------------------------------
TARGETS = np.array([-0.6, -0.2, 0.2, 0.6])


def box_episodes(policy: Policy, n: int, rng: np.random.Generator, *, explore: bool = True) -> list[Episode]:
    """One-step episodes: context ``c`` (one-hot), reward ``-(a - TARGETS[c])**2``."""
    context = rng.integers(len(TARGETS), size=n)
    obs = np.eye(len(TARGETS), dtype=np.float32)[context]
    actions = policy.act(Observations(obs=obs), explore=explore, rng=rng)
    rewards = -(actions.reshape(n) - TARGETS[context]) ** 2
    return [Episode(agent="a", obs=obs[i:i + 1], actions=actions[i:i + 1], rewards=rewards[i:i + 1].astype(np.float32),
                    masks=None, terminated=True, truncated=False, episode_return=float(rewards[i])) for i in range(n)]


BOX_SPACE = space(Box(shape=(len(TARGETS),), low=0.0, high=1.0), Box(shape=(1,), low=-1.0, high=1.0))


def train_loop(algo: Algorithm, policy_space: PolicySpace, collect: Callable[[Policy, int, np.random.Generator], list[Episode]],
               *, rounds: int, per_round: int, seed: int = 0) -> Policy:
    """What the rollout engine does, by hand: an actor copy pulls the learner's weights,
    collects, and the trainer updates the learner."""
    rng = np.random.default_rng(seed)
    learner = algo.make_policy(space=policy_space, seed=seed)
    actor = algo.make_policy(space=policy_space, seed=seed)
    trainer = algo.make_trainer(policy=learner, space=policy_space, seed=seed,
                                context=TrainerContext.alone(policy=learner, space=policy_space))
    assert trainer is not None
    for _ in range(rounds):
        actor.set_weights(learner.get_weights())
        trainer.update(collect(actor, per_round, rng))
    return learner


# -- training against fixed opponents with the rollout engine --------------------------------
def train_against(env: Env, algo: Algorithm, seat: str, opponents: Mapping[str, Sequence[tuple[Policy, float]]],
                  *, steps: int, seed: int = 0, num_envs: int = 32, episodes_per_update: int = 32) -> Policy:
    """Train a fresh policy of ``algo`` in ``seat`` against fixed opponent mixtures (the
    budget's batches as these tests were tuned with, not the defaults)."""
    policy_space = PolicySpace(population=seat, agents=(seat,), observation_space=env.observation_space(seat),
                               action_space=env.action_space(seat))
    lookup: dict[str, Policy] = {}
    seats = {}
    for agent in env.agents:
        mix = opponents.get(agent, [])
        ids = tuple(f"{agent}/{k}" for k in range(len(mix)))
        lookup.update(zip(ids, (p for p, _ in mix)))
        if ids:
            seats[agent] = (ids, [w for _, w in mix])
    snapshot = PolicySpec(policy_id=f"{seat}/new", population=seat, algorithm="test", iteration=1)
    task = TrainTask(learners=(LearnerSpec(key=seat, population=seat, seats=(seat,), seed=seed, snapshot=snapshot),),
                     seed=seed, opponents=MetaStrategy.independent(seats),
                     budget=TrainBudget(max_env_steps=steps, episodes_per_update=episodes_per_update))
    learners = Learners({seat: PopulationAlgorithm(space=policy_space, algorithm=algo, env=env)})
    (frozen,) = run_task(task, learners=learners, rollout=RolloutWorker(env=env, num_envs=num_envs),
                         policy_of=lookup.__getitem__).policies
    policy = algo.make_policy(space=policy_space, seed=0)
    policy.set_weights(frozen.weights)
    return policy


# -- a simultaneous one-shot game with Box actions (sampled evaluation) -----------------------
@attrs.frozen(kw_only=True)
class BoxGameConfig:
    """Each player is paid ``-(a - target)**2`` for its own scalar action."""

    targets: list[float] = attrs.field(factory=lambda: [0.5, -0.5])


class _BoxVector(VectorEnv):
    def __init__(self, env: BoxGame, num_envs: int) -> None:
        self.env = env
        self.num_envs = num_envs
        self._ids = np.arange(num_envs)
        self._obs = np.ones((num_envs, 1), np.float32)

    def _decisions(self, rewards: np.ndarray | None = None) -> Step:
        n = len(self.env.agents)
        decisions = {a: (self._ids, Observations(obs=self._obs, agent=a)) for a in self.env.agents}
        if rewards is None:
            return Step(decisions=decisions, rewards=np.zeros((self.num_envs, n)), finished=np.zeros(0, int),
                        returns=np.zeros((0, n)), truncated=np.zeros(0, bool))
        return Step(decisions=decisions, rewards=rewards, finished=self._ids, returns=rewards,
                    truncated=np.zeros(self.num_envs, bool))

    def reset(self) -> Step:
        return self._decisions()

    def step(self, actions: Mapping[str, np.ndarray]) -> Step:
        targets = self.env.config.targets
        rewards = np.stack([-(np.asarray(actions[a]).reshape(self.num_envs) - t) ** 2
                            for a, t in zip(self.env.agents, targets)], axis=1)
        return self._decisions(rewards)


class BoxGame(Env):
    """Two players, one simultaneous continuous move (for the rollout engine with Box
    actions and sampled payoff evaluation)."""

    Config = BoxGameConfig

    @property
    def agents(self) -> tuple[str, ...]:
        return ("player_0", "player_1")

    def observation_space(self, agent: str) -> Box:
        return Box(shape=(1,), low=1.0, high=1.0)

    def action_space(self, agent: str) -> Box:
        return Box(shape=(1,), low=-1.0, high=1.0)

    def vector(self, *, num_envs: int, seed: int) -> VectorEnv:
        return _BoxVector(self, num_envs)
