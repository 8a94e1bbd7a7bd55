"""Best-response learning throughput, one core, in one process: ``dqn``, ``ppo`` and
``a2c`` (popmarl-tianshou) on Leduc poker and tic-tac-toe.

Per algorithm and game, env steps (every agent's decision is one step, as popmarl
counts them) per CPU second of this process:

* ``train``: the whole popmarl best-response loop — :func:`popmarl.engine.learner_loop.run_task`
  through the local backend's :class:`~popmarl.engine.executor.Executor` (acting, recording,
  batching, updating, publishing the snapshot), player_0's learner in its seat against
  player_1's initial (uniform) policy, with the budget and ``num_envs`` a ``psro`` run
  with no ``training`` block gets (built from the parsed default config), capped at
  ``--steps``;
* ``rollout``: evaluate-mode rollouts of fresh policies of the same algorithm and params
  on as many parallel games (:func:`popmarl.tools.bench.bench_rollout`);
* ``tianshou``: Tianshou 2.0's own pipeline on the same game through PettingZoo —
  ``Collector`` over ``DummyVectorEnv`` of ``PettingZooEnv`` (Leduc: OpenSpiel's
  ``leduc_poker`` via shimmy's ``OpenSpielCompatibilityV0``, with the info-state tensor
  popmarl's ``observation: info_state`` uses; tic-tac-toe: ``tictactoe_v3``), its
  ``OffPolicyTrainer`` (dqn) or ``OnPolicyTrainer`` (ppo, a2c), the learner as player_0
  in ``MultiAgentOff/OnPolicyAlgorithm`` next to Tianshou's masked random agent. The
  learner is Tianshou's DQN/PPO/A2C built by the plugin's own trainer (same modules,
  hyperparameters and masking); the Tianshou trainer collects ``episodes_per_update``
  episodes per update step, takes as many DQN gradient steps per env step as popmarl
  took in the same run (after the same ``learning_starts``), and ``epochs`` ×
  ``batch_size`` minibatches for PPO/A2C. Tianshou's collected steps are PettingZoo
  ``step`` calls, one per agent decision, so the counts match with no conversion.
  Tianshou's multi-agent buffer holds both seats' transitions (a DQN sample of
  ``batch_size`` rows has about half the learner's) and its next observation is the
  other seat's: its learning is not checked here, only its speed.

* ``floor``: what the loop would reach if learning cost only its arithmetic: acting at
  the rollout's speed plus the gradient steps the popmarl loop took, each timed as bare
  torch on random tensors of the same shapes (:func:`torch_floor`). ``floor/rollout`` is
  the most any implementation of these defaults could reach on this core.
* ``loss bound``: the most train/floor can reach while the loss stays Tianshou's (issue
  34, item 3): the floor's time over acting at the rollout's speed plus the CPU time the
  train loop spent inside Tianshou's ``_update_with_batch`` (:func:`tianshou_loss_clock`:
  per DQN gradient step, or per PPO/A2C update's epochs of minibatches: the policy's
  forward pass, the loss, backward and the optimizer step), as if nothing else cost
  anything. Where it is below the target, no change outside that method reaches it.

Ratios are train/rollout, train/floor and train/tianshou, against the others measured in
the same run, with their targets (issue 15: ppo, a2c train ≥ 0.5× rollout, dqn ≥ 0.25×,
all ≥ 5× Tianshou; issue 34: train ≥ 0.75× floor). dqn's replay ratio is gradient samples
(gradient steps × batch size) per env step. CPU time is the headline: other jobs on a
shared machine barely move it. With ``--runs N`` every setting is measured N times (run k
takes the settings in an order rotated by k, so slow phases of a shared machine spread
over all of them) and the table shows medians, train/floor with its lowest and highest;
``--json`` then holds the medians and, under each row's ``runs``, every run's rows.

With ``--device cuda`` Tianshou's side runs on the GPU too; its ``MultiAgentPolicy`` needs the
learner's acts as numpy there (:func:`_acts_to_numpy`).

    python benchmarks/learning.py [--algorithms dqn ppo a2c] [--games leduc tictactoe]
        [--steps 50000] [--runs 1] [--device cpu] [--profile] [--algorithm-param K=V ...]
        [--no-tianshou] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import logging
import os
import pstats
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core, before numpy and torch load their thread pools

import numpy as np  # noqa: E402
import torch  # noqa: E402

GAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "leduc": ("openspiel", {"game": "leduc_poker", "observation": "info_state"}),
    "tictactoe": ("pettingzoo", {"module": "pettingzoo.classic.tictactoe_v3"}),
}
ALGORITHMS = ("dqn", "ppo", "a2c")
#: Issue 15's targets: train/rollout at least this, and train/tianshou at least 5.
ROLLOUT_TARGET = {"dqn": 0.25, "ppo": 0.5, "a2c": 0.5}
TIANSHOU_TARGET = 5.0
#: Issue 34's target: the loop at least this share of its torch floor (median of 5 runs).
FLOOR_TARGET = 0.75


@attrs.frozen(kw_only=True)
class Setting:
    """One algorithm on one game, as a default ``psro`` run would train it."""

    algorithm: str
    params: Mapping[str, Any]
    game: str

    @property
    def env(self) -> tuple[str, dict[str, Any]]:
        return GAMES[self.game]

    def config(self) -> Any:
        """The parsed run config: ``psro`` with this env and algorithm, nothing else."""
        from popmarl.config.schema import validate

        env_name, env_params = self.env
        return validate({"env": {"name": env_name, "params": env_params},
                         "algorithm": {"name": self.algorithm, "params": dict(self.params)}}, source="benchmark")


def default_budget(config: Any, steps: int, algorithm: Any, env: Any) -> Any:
    """The ``TrainBudget`` a ``psro`` run builds from ``config.training`` for a learner of
    ``algorithm`` on ``env``, capped at ``steps``."""
    from popmarl.interfaces.algorithm import opponent_exploration

    return config.training.budget(opponent_exploration(algorithm, env), max_env_steps=steps)


@contextlib.contextmanager
def tianshou_loss_clock() -> Iterator[list[float]]:
    """Within the block, CPU seconds spent inside Tianshou's DQN, A2C and PPO
    ``_update_with_batch`` (the loss, its backward pass and the optimizer step) are summed
    into the yielded one-element list; the methods are restored after it."""
    from tianshou.algorithm import A2C, DQN, PPO

    spent = [0.0]
    originals = {cls: cls.__dict__["_update_with_batch"] for cls in (DQN, A2C, PPO)}

    def timed(original: Any) -> Any:
        def update_with_batch(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - start
        return update_with_batch

    for cls, original in originals.items():
        setattr(cls, "_update_with_batch", timed(original))
    try:
        yield spent
    finally:
        for cls, original in originals.items():
            setattr(cls, "_update_with_batch", original)


def popmarl_train(setting: Setting, steps: int, profile: bool) -> dict[str, Any]:
    """Time one best-response task of player_0 against player_1's initial policy."""
    from popmarl.interfaces.backend import Components, RunSetup
    from popmarl.config.schema import population_algorithms
    from popmarl.engine.executor import Executor
    from popmarl.data.population import AgentMapping, policy_id
    from popmarl.data.learners import LearnerSpec
    from popmarl.data.policies import PolicySpec
    from popmarl.data.meta_strategy import MetaStrategy
    from popmarl.data.tasks import TrainTask
    from popmarl.runs.runner import build, build_algorithms, policy_spaces

    config = setting.config()
    env = build("envs", config.env, "env.params")
    mapping = AgentMapping.resolve(config.agents.mapping, env.agents)
    spaces = policy_spaces(env, mapping)
    specs = population_algorithms(config, mapping.populations)
    algorithms = build_algorithms(specs)
    setup = RunSetup(env_name=config.env.name, env_params=dict(config.env.params),
                     algorithms={p: (s.name, dict(s.params)) for p, s in specs.items()}, mapping=mapping,
                     spaces=spaces, seed=config.seed, num_envs=config.evaluation.num_envs,
                     train_num_envs=config.training.num_envs, exact_evaluation=config.evaluation.exact)
    executor = Executor(setup, Components(env=env, algorithms=algorithms))
    for k, population in enumerate(mapping.populations):
        executor.add_policy(policy_id(population, 0), executor.populations[population].initial_policy(seed=k).get_weights())
    opponents = MetaStrategy.pure({agent: policy_id(mapping.population_of[agent], 0) for agent in env.agents})
    learner = mapping.populations[0]

    def task(key: str, budget_steps: int, seed: int) -> Any:
        spec = PolicySpec(policy_id=policy_id(learner, 1), population=learner, algorithm=setting.algorithm,
                          iteration=1)
        return TrainTask(learners=(LearnerSpec(key=key, population=learner, seats=mapping.agents_of(learner),
                                               one_seat=True, seed=seed, snapshot=spec),),
                         seed=seed, opponents=opponents, budget=default_budget(config, budget_steps, algorithms[learner], env))

    executor.train(task("warm-up", min(2_000, steps), 1))  # first calls, lazy imports
    profiler = cProfile.Profile() if profile else None
    with tianshou_loss_clock() as loss_cpu:
        cpu, wall = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        result = executor.train(task(learner, steps, 2))
        if profiler:
            profiler.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    metrics = dict(result.learner_metrics[learner])
    out: dict[str, Any] = {"train_steps_per_s": result.env_steps / cpu, "train_wall_steps_per_s": result.env_steps / wall,
                           "train_env_steps": result.env_steps, "num_envs": config.training.num_envs,
                           "episodes_per_update": config.training.episodes_per_update,
                           "tianshou_loss_cpu_s": loss_cpu[0]}
    algorithm_config = algorithms[learner].config
    out["gradient_steps"] = int(metrics.get("gradient_steps", 0))
    if hasattr(algorithm_config, "updates_per_step"):  # replay: dqn
        out["replay_ratio"] = metrics["gradient_steps"] * algorithm_config.batch_size / result.env_steps
        out["configured_updates_per_learner_step"] = algorithm_config.updates_per_step
        out["learning_starts"] = algorithm_config.learning_starts
    if profiler:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(15)
        out["profile"] = text.getvalue()
    return out


def popmarl_rollout(setting: Setting, steps: int, num_envs: int) -> dict[str, float]:
    """Evaluate-mode rollouts of fresh policies, per CPU second (the build is timed too,
    a few milliseconds; a first small call warms up)."""
    from popmarl.tools.bench import bench_rollout

    env_name, env_params = setting.env

    def bench(n: int) -> Any:
        return bench_rollout(env_name=env_name, env_params=env_params, algorithm_name=setting.algorithm,
                             algorithm_params=setting.params, num_envs=num_envs, steps=n, warmup_steps=0)

    bench(min(1_000, steps))
    cpu = time.process_time()
    result = bench(steps)
    cpu = time.process_time() - cpu
    return {"rollout_steps_per_s": result.env_steps / cpu, "rollout_wall_steps_per_s": result.steps_per_s}


def tianshou_env(game: str) -> Any:
    """A Tianshou ``PettingZooEnv`` of ``game``: flat float features and the legal-action
    mask in the observation dict (where Tianshou reads it)."""
    import importlib

    from gymnasium import spaces
    from pettingzoo.utils import BaseWrapper
    from tianshou.env import PettingZooEnv

    env_name, params = GAMES[game]
    if env_name == "openspiel":
        from shimmy import OpenSpielCompatibilityV0

        raw: Any = OpenSpielCompatibilityV0(game_name=params["game"])
        info_state = params.get("observation") == "info_state"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            raw = importlib.import_module(params["module"]).env()
        info_state = False

    class FlatMasked(BaseWrapper):  # type: ignore[type-arg]
        def observe(self, agent: str) -> dict[str, np.ndarray]:
            obs = super().observe(agent)
            if isinstance(obs, dict):
                obs, mask = obs["observation"], obs["action_mask"]
            else:  # shimmy keeps the mask in infos
                mask = self.infos[agent]["action_mask"]
            if info_state:  # popmarl's Leduc features; shimmy observes the smaller observation tensor
                obs = self.env.unwrapped.game_state.information_state_tensor(self.possible_agents.index(agent))
            return {"observation": np.asarray(obs, dtype=np.float32).ravel(), "action_mask": np.asarray(mask)}

        def observation_space(self, agent: str) -> spaces.Space:
            return spaces.Box(-np.inf, np.inf, shape=self.observe_dim, dtype=np.float32)

    wrapped = FlatMasked(raw)
    wrapped.reset(seed=0)
    wrapped.observe_dim = wrapped.observe(wrapped.agents[0])["observation"].shape
    return PettingZooEnv(wrapped)


def _acts_to_numpy(_module: Any, _args: Any, out: Any) -> Any:
    """The learner's actions as numpy: Tianshou 2.0.1's ``MultiAgentPolicy.forward``
    concatenates every agent's ``act`` with ``np.concatenate``, which fails on a GPU
    learner's CUDA tensor next to the random agent's numpy (its single-agent Collector
    converts them itself). Learning reads the logits or distributions, not ``act``."""
    if isinstance(out.act, torch.Tensor):
        out.act = out.act.cpu().numpy()
    return out


def tianshou_train(setting: Setting, steps: int, num_envs: int, episodes_per_update: int,
                   gradient_steps_per_env_step: float | None) -> dict[str, float]:
    """Tianshou's Collector and trainer on the same game and learner, ``steps`` env steps."""
    from tianshou.algorithm.algorithm_base import OnPolicyAlgorithm
    from tianshou.algorithm.algorithm_base import TrainingStats
    from tianshou.algorithm.multiagent.marl import MultiAgentOffPolicyAlgorithm, MultiAgentOnPolicyAlgorithm
    from tianshou.algorithm.random import MARLRandomDiscreteMaskedOffPolicyAlgorithm
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv
    from tianshou.trainer import OffPolicyTrainerParams, OnPolicyTrainerParams

    from popmarl.data.population import AgentMapping
    from popmarl.interfaces.algorithm import TrainerContext
    from popmarl.runs.runner import build, policy_spaces

    config = setting.config()
    env = build("envs", config.env, "env.params")
    space = policy_spaces(env, AgentMapping.resolve("per_player", env.agents))[env.agents[0]]
    algorithm = build("algorithms", config.algorithm, "algorithm.params")
    policy = algorithm.make_policy(space=space, seed=0)
    trainer = algorithm.make_trainer(policy=policy, space=space, seed=0,
                                     context=TrainerContext.alone(policy=policy, space=space))
    learner = trainer.algorithm  # Tianshou's DQN/PPO/A2C
    learner.policy.register_forward_hook(_acts_to_numpy)
    probe = tianshou_env(setting.game)
    envs = DummyVectorEnv([lambda: tianshou_env(setting.game) for _ in range(num_envs)])
    c = algorithm.config
    off_policy = not algorithm.on_policy
    if off_policy:
        opponent: Any = MARLRandomDiscreteMaskedOffPolicyAlgorithm(probe.action_space)
        both: Any = MultiAgentOffPolicyAlgorithm(algorithms=[learner, opponent], env=probe)
        buffer = VectorReplayBuffer(c.buffer_size, num_envs)
    else:
        class RandomOnPolicy(OnPolicyAlgorithm):  # type: ignore[type-arg]
            """Tianshou's masked random agent, on the on-policy side of the dispatcher."""

            def __init__(self) -> None:
                super().__init__(policy=MARLRandomDiscreteMaskedOffPolicyAlgorithm.Policy(probe.action_space))

            def _update_with_batch(self, batch: Any, batch_size: Any, repeat: int) -> TrainingStats:
                return TrainingStats()

        both = MultiAgentOnPolicyAlgorithm(algorithms=[learner, RandomOnPolicy()], env=probe)
        buffer = VectorReplayBuffer(max(steps, 20_000), num_envs)
    collector: Any = Collector(both, envs, buffer, exploration_noise=True)
    cpu, wall = time.process_time(), time.perf_counter()
    collector.reset()
    prefill = 0
    if off_policy:
        policy_net = learner.policy

        def epsilon(epoch: int, env_step: int) -> None:  # popmarl's linear decay, in learner decisions
            frac = min(env_step / 2 / c.eps_decay_steps, 1.0)
            policy_net.set_eps_training(c.eps_start + frac * (c.eps_end - c.eps_start))

        epsilon(0, 0)
        # popmarl updates once its buffer holds learning_starts learner transitions.
        # (Tianshou's Collector wants a multiple of num_envs.)
        prefill_steps = -(-min(2 * c.learning_starts, steps) // num_envs) * num_envs
        prefill = int(collector.collect(n_step=prefill_steps).n_collected_steps)
        # As many gradient steps per env step as popmarl took (its own default if none).
        ratio = gradient_steps_per_env_step or c.updates_per_step / 2
        params: Any = OffPolicyTrainerParams(
            training_collector=collector, max_epochs=1, epoch_num_steps=max(steps - prefill, 1),
            collection_step_num_env_steps=None, collection_step_num_episodes=episodes_per_update,
            batch_size=c.batch_size, update_step_num_gradient_steps_per_sample=ratio,
            training_fn=epsilon, test_collector=None, verbose=False, show_progress=False)
    else:
        params = OnPolicyTrainerParams(
            training_collector=collector, max_epochs=1, epoch_num_steps=steps, collection_step_num_env_steps=None,
            collection_step_num_episodes=episodes_per_update, batch_size=c.batch_size,
            update_step_num_repetitions=c.epochs, test_collector=None, verbose=False, show_progress=False)
    collected = prefill
    if steps > prefill:
        # Tianshou's off-policy update shows a progress bar whatever show_progress says.
        with contextlib.redirect_stderr(io.StringIO()):
            collected += int(both.run_training(params).train_step)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"tianshou_steps_per_s": collected / cpu, "tianshou_wall_steps_per_s": collected / wall,
            "tianshou_env_steps": collected}


def _cpu_ms(step: Any, repeats: int) -> float:
    """CPU milliseconds per call of ``step`` (after one warm-up call)."""
    step()
    cpu = time.process_time()
    for _ in range(repeats):
        step()
    return (time.process_time() - cpu) / repeats * 1e3


def torch_floor(setting: Setting, row: Mapping[str, Any], repeats: int = 200) -> dict[str, float]:
    """The learning loop's floor: acting at the rollout's speed plus the gradient steps
    the popmarl loop took, each as bare torch on random tensors (the plugin's networks,
    fused Adam, no buffers, batching, GAE or masks), on one core and on the CPU whatever
    ``device`` says.

    dqn: per gradient step of ``batch_size`` rows, a forward and backward pass of the
    Q-network and the double-DQN target's two no-grad passes. ppo and a2c: per minibatch,
    actor and critic forward and backward with the clipped (ppo) or plain (a2c) loss,
    entropy, gradient clipping and Adam; minibatches hold ``epochs`` × learner rows /
    gradient steps rows; learner rows are taken as the env steps over the number of seats
    (one learner seat of two here), and each update's no-grad passes (old log-probs,
    values of both observations) are added per row."""
    import copy

    from popmarl.data.population import AgentMapping
    from popmarl.runs.runner import build, policy_spaces
    from popmarl_torch.features import feature_dim
    from popmarl_torch.nets import CategoricalActor, QNet, ValueCritic

    config = setting.config()
    env = build("envs", config.env, "env.params")
    algorithm = build("algorithms", config.algorithm, "algorithm.params")
    c = algorithm.config
    space = policy_spaces(env, AgentMapping.resolve("per_player", env.agents))[env.agents[0]]
    obs_dim, n_actions = feature_dim(space.observation_space), space.action_space.n
    env_steps = row["train_env_steps"]
    generator = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    def actions(n: int) -> torch.Tensor:
        return torch.randint(0, n_actions, (n, 1), generator=generator)

    if setting.algorithm == "dqn":
        rows = c.batch_size
        online = QNet(obs_dim, n_actions, c.hidden).net
        lagged = copy.deepcopy(online)
        optim = torch.optim.Adam(online.parameters(), lr=c.lr, fused=True)
        obs, obs_next, act, rew = rand(rows, obs_dim), rand(rows, obs_dim), actions(rows), rand(rows)

        def step() -> None:
            with torch.no_grad():
                best = online(obs_next).argmax(1, keepdim=True)
                target = rew + c.gamma * lagged(obs_next).gather(1, best).squeeze(1)
            loss = (online(obs).gather(1, act).squeeze(1) - target).pow(2).mean()
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()

        learning_ms = row["gradient_steps"] * _cpu_ms(step, repeats)
    else:
        learner_rows = env_steps / len(env.agents)
        rows = max(1, round(c.epochs * learner_rows / max(row["gradient_steps"], 1)))
        actor, critic = CategoricalActor(obs_dim, n_actions, c.hidden).net, ValueCritic(obs_dim, c.hidden).net
        params = [*actor.parameters(), *critic.parameters()]
        optim = torch.optim.Adam(params, lr=c.lr, fused=True)
        obs, act, old_logp, advantage, ret = rand(rows, obs_dim), actions(rows), rand(rows), rand(rows), rand(rows)
        clipped = setting.algorithm == "ppo"

        def step() -> None:
            logp_all = torch.log_softmax(actor(obs), -1)
            logp = logp_all.gather(1, act).squeeze(1)
            adv = (advantage - advantage.mean()) / (advantage.std() + 1e-8) if clipped else advantage
            if clipped:
                ratio = (logp - old_logp).exp()
                actor_loss = -torch.min(ratio * adv, ratio.clamp(1 - c.clip, 1 + c.clip) * adv).mean()
            else:
                actor_loss = -(logp * adv).mean()
            value_loss = (ret - critic(obs).squeeze(-1)).pow(2).mean()
            entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = actor_loss + c.vf_coef * value_loss - c.ent_coef * entropy
            optim.zero_grad(set_to_none=True)
            loss.backward()
            if c.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, c.max_grad_norm)
            optim.step()

        def passes() -> None:  # per update row: old log-probs, values of obs and obs_next
            with torch.no_grad():
                actor(obs)
                critic(obs)
                critic(obs)

        learning_ms = row["gradient_steps"] * _cpu_ms(step, repeats) + learner_rows / rows * _cpu_ms(passes, repeats)
    # env_steps / (acting time + learning time), written so that with no learning it is the
    # rollout's rate itself (env_steps / (env_steps / rate) can round one ulp above it).
    floor = row["rollout_steps_per_s"] / (1.0 + learning_ms / 1e3 * row["rollout_steps_per_s"] / env_steps)
    return {"floor_steps_per_s": floor, "floor_over_rollout": floor / row["rollout_steps_per_s"],
            "floor_minibatch_rows": float(rows)}


def measure(setting: Setting, steps: int, profile: bool, tianshou: bool) -> dict[str, Any]:
    row = popmarl_train(setting, steps, profile)
    row.update(popmarl_rollout(setting, steps, row["num_envs"]))
    row["train_over_rollout"] = row["train_steps_per_s"] / row["rollout_steps_per_s"]
    row["rollout_target"] = ROLLOUT_TARGET.get(setting.algorithm)
    row.update(torch_floor(setting, row))
    row["train_over_floor"] = row["train_steps_per_s"] / row["floor_steps_per_s"]
    row["floor_target"] = FLOOR_TARGET
    steps = row["train_env_steps"]
    row["loss_bound"] = (steps / row["floor_steps_per_s"]) / (steps / row["rollout_steps_per_s"]
                                                              + row["tianshou_loss_cpu_s"])
    if tianshou:
        per_step = row["gradient_steps"] / row["train_env_steps"] if "replay_ratio" in row else None
        row.update(tianshou_train(setting, steps, row["num_envs"], row["episodes_per_update"], per_step))
        row["train_over_tianshou"] = row["train_steps_per_s"] / row["tianshou_steps_per_s"]
        row["tianshou_target"] = TIANSHOU_TARGET
    return row


def met(value: float | None, target: float | None) -> str:
    if value is None or target is None:
        return "-"
    return f"{value:.2f}x {'met' if value >= target else 'NOT met'} (>= {target:g})"


def medians(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One row of several runs' rows of a setting: the median of each number (the first
    run's value for the rest), and train/floor's lowest and highest."""
    out: dict[str, Any] = dict(rows[0])
    for key, value in rows[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(np.median([row[key] for row in rows]))
    ratios = [row["train_over_floor"] for row in rows]
    out["train_over_floor_range"] = [min(ratios), max(ratios)]
    return out


def print_table(results: Mapping[str, Mapping[str, Mapping[str, Any]]], runs: int = 1) -> None:
    head = (f"{'algorithm':9s} {'game':10s} {'train/s':>9s} {'rollout/s':>10s} {'tianshou/s':>11s} "
            f"{'train/rollout':>32s} {'floor/rollout':>14s} {'train/floor':>30s} {'loss bound':>11s} "
            f"{'train/tianshou':>30s}  replay ratio")
    print(head)
    print("-" * len(head))
    for name, games in results.items():
        for game, row in games.items():
            tianshou = row.get("tianshou_steps_per_s")
            replay = f"{row['replay_ratio']:.2f}" if "replay_ratio" in row else "-"
            low, high = row.get("train_over_floor_range", (None, None))
            spread = f" [{low:.2f}-{high:.2f}]" if runs > 1 else ""
            print(f"{name:9s} {game:10s} {row['train_steps_per_s']:9,.0f} {row['rollout_steps_per_s']:10,.0f} "
                  f"{(f'{tianshou:,.0f}' if tianshou else '-'):>11s} "
                  f"{met(row['train_over_rollout'], row['rollout_target']):>32s} "
                  f"{row['floor_over_rollout']:>13.2f}x "
                  f"{met(row['train_over_floor'], row['floor_target']) + spread:>30s} "
                  f"{row['loss_bound']:>10.2f}x "
                  f"{met(row.get('train_over_tianshou'), row.get('tianshou_target')):>30s}  {replay}")
    print("steps per CPU second of this process; replay ratio: dqn gradient samples per env step; floor: acting "
          "at the rollout's speed plus the same gradient steps as bare torch (torch_floor); loss bound: the most "
          "train/floor can be while Tianshou's _update_with_batch stays (floor over acting at the rollout's speed "
          "plus the time in it)"
          + (f"; medians of {runs} runs, train/floor's lowest-highest in brackets" if runs > 1 else ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=ALGORITHMS)
    parser.add_argument("--games", nargs="+", default=list(GAMES), choices=list(GAMES))
    parser.add_argument("--steps", type=int, default=50_000, help="env steps per measurement (default 50000)")
    parser.add_argument("--runs", type=int, default=1, help="measure every setting this many times; medians (default 1)")
    parser.add_argument("--device", default=None, help="passed as the algorithms' device param when given")
    parser.add_argument("--profile", action="store_true", help="cProfile each popmarl train loop (top 30 by cumulative time, then top 15 by own time)")
    parser.add_argument("--algorithm-param", action="append", default=[], metavar="K=V",
                        help="algorithm param for every algorithm (YAML value); repeatable")
    parser.add_argument("--no-tianshou", action="store_true", help="skip Tianshou's pipeline")
    parser.add_argument("--json", action="store_true", help="end with one JSON object of the figures")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps: must be at least 1")
    if args.runs < 1:
        parser.error("--runs: must be at least 1")
    from popmarl.tools.bench import parse_params
    from popmarl.errors import UserError

    try:
        params = parse_params(args.algorithm_param, "--algorithm-param")
    except UserError as exc:
        parser.error(str(exc))
    if args.device is not None:
        params["device"] = args.device
    torch.set_num_threads(1)
    logging.getLogger("tianshou").setLevel(logging.ERROR)
    settings = [(name, game) for name in args.algorithms for game in args.games]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {game: [] for game in args.games}
                                                        for name in args.algorithms}
    for k in range(args.runs):
        shift = k % len(settings)
        for name, game in settings[shift:] + settings[:shift]:
            try:
                row = measure(Setting(algorithm=name, params=params, game=game), args.steps, args.profile,
                              not args.no_tianshou)
            except UserError as exc:  # e.g. a param the algorithm does not take
                parser.error(str(exc))
            profile = row.pop("profile", None)
            if profile:
                print(f"== profile: {name} on {game} (popmarl train loop, top 30 by cumulative time, then top 15 by own time)")
                print(profile)
            runs[name][game].append(row)
    results = {name: {game: rows[0] if args.runs == 1 else {**medians(rows), "runs": rows}
                      for game, rows in games.items()} for name, games in runs.items()}
    print_table(results, args.runs)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
