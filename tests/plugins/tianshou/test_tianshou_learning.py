"""Learning: every algorithm clearly beats random on small games; PSRO with ``dqn`` and
``nash`` drives Kuhn poker's NashConv well below the uniform policy's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from tianshou_helpers import (
    ACTOR_CRITIC, ALGORITHMS, BOX_SPACE, TARGETS, Bandit, algorithm, box_episodes, metrics, requires_nash,
    requires_openspiel, run_psro, train_against, train_loop,
)

import popmarl
from popmarl.builtin.matrix_env import MixedStrategyPolicy
from popmarl.builtin.random_policy import UniformRandomPolicy
from popmarl.interfaces.policy import masked_uniform
from popmarl.data.episodes import Observations

UNIFORM_KUHN_NASH_CONV = 0.9167
EXAMPLE_KUHN = Path(__file__).resolve().parents[3] / "examples" / "psro_kuhn_dqn.yaml"

#: Small budgets that learn the bandit in a few seconds.
BANDIT_PARAMS = {
    "dqn": {"hidden": [32], "learning_starts": 64, "batch_size": 64, "eps_decay_steps": 1500, "lr": 3e-3},
    "ppo": {"hidden": [32], "lr": 3e-3, "batch_size": 64},
    "a2c": {"hidden": [32], "lr": 1e-2, "epochs": 2},
}


@pytest.mark.parametrize("name", ALGORITHMS)
def test_masked_contextual_bandit(name):
    bandit = Bandit.make()
    policy = train_loop(algorithm(name, **BANDIT_PARAMS[name]), bandit.space, bandit.episodes, rounds=40,
                        per_round=64)
    context, batch = bandit.decisions(2000, np.random.default_rng(99))
    probs = policy.probabilities(batch)
    assert np.all(probs[~batch.mask] == 0.0)
    legal_table = np.where(batch.mask, bandit.table[context], -np.inf)
    best = float(np.mean(legal_table.max(axis=1)))
    random = bandit.value(masked_uniform(batch.mask, len(batch), batch.mask.shape[1]), context)
    learned = bandit.value(probs, context)
    # Clearly better than random: most of the way from random to optimal.
    assert learned > random + 0.7 * (best - random), (learned, random, best)


@pytest.mark.parametrize("name", ACTOR_CRITIC)
def test_continuous_bandit_with_gaussian_actions(name):
    algo = algorithm(name, hidden=[32], lr=3e-3, ent_coef=0.0, deterministic_eval=True)
    policy = train_loop(algo, BOX_SPACE, box_episodes, rounds=60, per_round=64)
    rng = np.random.default_rng(7)
    learned = np.mean([e.episode_return for e in box_episodes(policy, 2000, rng, explore=False)])
    random = -(1 / 3 + np.mean(TARGETS**2))  # uniform actions on [-1, 1]
    assert learned > -0.05 > random, (learned, random)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_rollout_training_finds_the_best_response_in_a_matrix_game(name):
    """Against rock 70% / scissors 30% in rock-paper-scissors, paper (+0.4) beats a
    uniform player (0); trained through the rollout engine and the agent loop."""
    env = popmarl.envs.load("matrix")(game="rps")
    opponent = MixedStrategyPolicy(np.array([0.7, 0.0, 0.3]))
    params = {"learning_starts": 200} if name == "dqn" else {"lr": 3e-3}
    policy = train_against(env, algorithm(name, hidden=[32], **params), "player_0", {"player_1": [(opponent, 1.0)]},
                           steps=6000)
    probs = policy.probabilities(Observations(obs=np.ones((1, 1), np.float32)))[0]
    value = float(probs @ env.payoffs[0] @ opponent.probs)
    assert value > 0.3, probs


@requires_openspiel
def test_dqn_finds_the_exact_best_response_in_kuhn_poker():
    """Against a fixed mixture (uniform random and two arbitrary deterministic
    policies), the default DQN's greedy policy is an exact best response: every
    information state's decision is right, through the rollout engine's sampling."""
    env = popmarl.envs.load("openspiel")(game="kuhn_poker")
    dqn = algorithm("dqn")
    opponent_space = popmarl.PolicySpace(population="player_1", agents=("player_1",),
                                         observation_space=env.observation_space("player_1"),
                                         action_space=env.action_space("player_1"))
    mixture = [(UniformRandomPolicy(2), 0.5), (dqn.make_policy(space=opponent_space, seed=100), 0.3),
               (dqn.make_policy(space=opponent_space, seed=101), 0.2)]
    policy = train_against(env, dqn, "player_0", {"player_1": mixture}, steps=12_000)
    value = sum(w * env.exact_returns([{"player_0": policy, "player_1": p}])[0][0] for p, w in mixture)
    _, best = env.exact.best_response(0, {"player_1": mixture})
    assert value == pytest.approx(best, abs=1e-9)


@requires_openspiel
@requires_nash
def test_psro_dqn_nash_on_kuhn_poker_reduces_nash_conv(tmp_path: Path):
    """Default ``dqn`` with ``nash``, short budgets: three iterations more than halve the
    uniform policy's NashConv (exact-oracle PSRO is at 0.18 after three)."""
    summary, run_dir = run_psro(
        tmp_path, "kuhn", env={"name": "openspiel", "params": {"game": "kuhn_poker"}}, algorithm={"name": "dqn"},
        solver={"name": "nash"}, stopping={"max_iterations": 3}, training={"max_env_steps": 8_000},
    )
    assert summary["status"] == "completed"
    history = [m["nash_conv"] for m in metrics(run_dir)]
    assert summary["nash_conv"] == history[-1] < 0.5 * UNIFORM_KUHN_NASH_CONV, history


@pytest.mark.slow
@requires_openspiel
@requires_nash
def test_psro_dqn_nash_on_kuhn_poker_reaches_a_tenth(tmp_path: Path):
    """The benchmark's recipe (examples/psro_kuhn_dqn.yaml): NashConv <= 0.1 within 12
    iterations."""
    config = yaml.safe_load(EXAMPLE_KUHN.read_text())
    config["trackers"] = []
    summary, run_dir = run_psro(tmp_path, "kuhn", **config)
    history = [m["nash_conv"] for m in metrics(run_dir)]
    assert summary["nash_conv"] <= 0.1 and summary["iterations"] <= 12, history
