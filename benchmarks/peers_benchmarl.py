"""popmarl next to BenchMARL 1.5.2 on PettingZoo MPE ``simple_spread`` (3 agents, 25
cycles, ``local_ratio`` 0.5), discrete and continuous actions: BenchMARL's MAPPO, IPPO and
QMIX (discrete only) against popmarl's ``mappo``, ``ppo`` (independent PPO, one policy
shared by the seats, ``benchmarks/marl.py``'s recipe) and ``qmix``, at equal env timesteps
(one step of the game, every agent acting once: popmarl counts ``agents`` env steps per
timestep, BenchMARL one frame) and equal seeds, in two settings:

- ``defaults``: each side with its own defaults (BenchMARL: its ``base_experiment.yaml``
  and algorithm yaml, 256×256 tanh MLPs, lr 5e-5, 6,000-frame batches; evaluation with
  deterministic actions, its default).
- ``matched``: BenchMARL configured to popmarl's hyperparameters as far as its config
  allows (``--show-mapping`` prints it): lr, γ, λ, clip, entropy, 64×64 tanh, round size
  (16 games of 25 steps = 400 frames, 16 envs), epochs × minibatches as
  ``on_policy_n_minibatch_iters`` of ``on_policy_minibatch_size`` frames, gradient-norm
  clip, critic loss and weight (IPPO: from ``ppo``'s recipe, relu MLPs); QMIX: lr, γ,
  batch, buffer, ε schedule, τ, updates per frame, random warm-up; evaluation stochastic
  for the PPOs, as popmarl's.

popmarl's side is the same in both settings (its defaults; ``ppo``: marl.py's spread recipe),
so it runs once per seed. Left unmatched (one side has no such knob): popmarl ``mappo``
trains every seat on the team's summed reward and PopArt-normalises its critic, BenchMARL's
MAPPO each agent on its own reward without value normalisation; BenchMARL's continuous
actor is a tanh-squashed Normal in the Box, popmarl's an unsquashed Gaussian clipped by the
env; popmarl's ``qmix`` gives its Q network the seat's id and its mixer a layer-normalised
state, starts learning with ε-greedy play where BenchMARL's warm-up plays at random, and
takes double-Q targets; Adam's ε.

Return per agent, both sides the same convention: each agent's own reward summed over
the episode, averaged over the agents (popmarl's ``mean_return``; BenchMARL's
``episode_reward`` of its logger), over ``--eval-episodes`` games of the final policies.
CPU seconds: user + system time of each run's own process (``getrusage`` of the child:
imports, training, evaluation), every run single-threaded (``OMP_NUM_THREADS=1``,
``torch.set_num_threads(1)``), one run at a time.

BenchMARL's pins differ from popmarl's (torchrl 0.14, PettingZoo 1.27 with ``mpe2``), so it
runs in its own virtual environment, made by ``--setup`` (or on first use) at ``--venv``:
``benchmarl==1.5.2 torchrl==0.11.1 tensordict==0.11.0 pettingzoo[mpe]==1.24.3`` and
torch 2.13 CPU (``--torch``: a wheel path or requirement; torchrl 0.11.1's C++ extension,
built for an earlier torch, does not load and torchrl falls back to Python: it serves
prioritized replay only, which no run here uses). Before any run the script checks
that PettingZoo 1.24.3's MPE and mpe2 give the same per-agent rewards on a fixed, seeded
action sequence (discrete and continuous) and prints the largest difference; if they differ
it stops (``--allow-mpe-mismatch`` runs anyway, each side on its own package). A BenchMARL
run whose policy diverges (PettingZoo refuses its NaN actions) is recorded as diverged, with
its timesteps and CPU seconds until then. With ``--json`` each run prints a JSON line as it
ends, so runs split over several invocations (``--first-seed``, ``--sides``) or stopped
early are joined by ``--merge LOG...``. Not part of CI; figures in docs/benchmarks.md::

    nice -n 10 python benchmarks/peers_benchmarl.py [--setup] [--venv DIR] [--torch WHEEL]
        [--timesteps 102000] [--seeds 3] [--first-seed 0] [--eval-episodes 200]
        [--actions discrete,continuous] [--algorithms mappo,ippo,qmix]
        [--settings matched,defaults] [--sides popmarl,benchmarl] [--param ALGORITHM:KEY=VALUE ...]
        [--json] [--show-mapping]
    python benchmarks/peers_benchmarl.py --merge LOG [LOG ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VENV = Path.home() / ".cache" / "popmarl" / "benchmarl-venv"
TORCH_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
PINS = ["benchmarl==1.5.2", "torchrl==0.11.1", "tensordict==0.11.0", "pettingzoo[mpe]==1.24.3"]
SPREAD = {"N": 3, "max_cycles": 25, "local_ratio": 0.5}
AGENTS, CYCLES, GAMES = 3, 25, 16  # popmarl's round: 16 games (benchmarks/marl.py), 400 timesteps
ROUND = GAMES * CYCLES
#: popmarl's algorithm next to each BenchMARL one (its params: marl.py's PARAMS).
POPMARL = {"mappo": "mappo", "ippo": "ppo", "qmix": "qmix"}


def matched(algorithm: str, params: dict[str, Any]) -> dict[str, Any]:
    """BenchMARL experiment/algorithm/model settings that mirror popmarl's algorithm of
    ``params`` (see docstring)."""
    from popmarl_tianshou.ppo import PPOConfig
    from popmarl_torchrl.mappo import MAPPOConfig
    from popmarl_torchrl.value_mixing import QMIXConfig

    if algorithm == "qmix":
        q = QMIXConfig(**params)
        return {"experiment": {"lr": q.lr, "gamma": q.gamma, "off_policy_collected_frames_per_batch": ROUND,
                               "off_policy_n_envs_per_worker": GAMES, "off_policy_train_batch_size": q.batch_size,
                               "off_policy_n_optimizer_steps": round(ROUND * q.updates_per_step),
                               "off_policy_memory_size": q.buffer_size,
                               "off_policy_init_random_frames": q.learning_starts,
                               "exploration_eps_init": q.eps_start, "exploration_eps_end": q.eps_end,
                               "exploration_anneal_frames": q.eps_decay_steps, "polyak_tau": q.target_tau,
                               "clip_grad_val": q.max_grad_norm, "evaluation_deterministic_actions": True},
                "algorithm": {"mixing_embed_dim": q.mixing_embed_dim, "loss_function": q.loss},
                "model": {"num_cells": list(q.hidden), "activation": "relu"}}
    c: MAPPOConfig | PPOConfig
    if algorithm == "mappo":
        c = MAPPOConfig(**params)
        minibatch, activation, loss = ROUND // c.minibatches, c.activation, {"loss_critic_type": c.critic_loss}
    else:  # popmarl ppo (tianshou): minibatches of batch_size agent rows, relu MLPs, L2 value loss
        c = ppo = PPOConfig(**params)
        minibatch, activation, loss = round((ppo.batch_size or AGENTS * ROUND) / AGENTS), "relu", {}
    return {"experiment": {"lr": c.lr, "gamma": c.gamma, "on_policy_collected_frames_per_batch": ROUND,
                           "on_policy_n_envs_per_worker": GAMES, "on_policy_minibatch_size": minibatch,
                           "on_policy_n_minibatch_iters": round(c.epochs * ROUND / minibatch),
                           "clip_grad_val": c.max_grad_norm, "evaluation_deterministic_actions": False},
            "algorithm": {"clip_epsilon": c.clip, "entropy_coef": c.ent_coef, "lmbda": c.gae_lambda,
                          "critic_coef": c.vf_coef, **loss},
            "model": {"num_cells": list(c.hidden), "activation": activation}}


# --- runs inside BenchMARL's venv (no popmarl there) --------------------------------------


def benchmarl_worker(job: dict[str, Any]) -> dict[str, Any]:
    """One BenchMARL run of ``job`` (its yaml defaults with ``job['settings']`` over them);
    its final policy's return per agent over ``job['episodes']`` games and its frames."""
    import torch
    from benchmarl.algorithms import IppoConfig, MappoConfig, QmixConfig
    from benchmarl.environments import PettingZooTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    torch.set_num_threads(1)
    settings = job["settings"]
    experiment = ExperimentConfig.get_from_yaml()
    experiment.max_n_frames = job["timesteps"]
    experiment.prefer_continuous_actions = job["actions"] == "continuous"
    experiment.evaluation, experiment.render, experiment.loggers, experiment.create_json = False, False, [], False
    experiment.checkpoint_interval, experiment.checkpoint_at_end = 0, False
    for key, value in settings.get("experiment", {}).items():
        setattr(experiment, key, value)
    algorithm = {"mappo": MappoConfig, "ippo": IppoConfig, "qmix": QmixConfig}[job["algorithm"]].get_from_yaml()
    for key, value in settings.get("algorithm", {}).items():
        setattr(algorithm, key, value)
    model = MlpConfig.get_from_yaml()
    if "model" in settings:
        model.num_cells = settings["model"]["num_cells"]
        model.activation_class = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[settings["model"]["activation"]]
    task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
    task.config.update(job["env"])
    with tempfile.TemporaryDirectory() as folder:
        experiment.save_folder = folder
        run = Experiment(task=task, algorithm_config=algorithm, model_config=model, critic_model_config=model,
                         seed=job["seed"], config=experiment)
        try:
            run.run()
        except AssertionError as exc:  # PettingZoo refuses the NaN actions of a diverged policy
            return {"per_agent": math.nan, "frames": run.total_frames, "error": str(exc)}
        returns = []
        deterministic = experiment.evaluation_deterministic_actions
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC if deterministic
                                                   else ExplorationType.RANDOM):
            for _ in range(job["episodes"]):
                td = run.test_env.rollout(max_steps=run.max_steps, policy=run.policy, break_when_any_done=True)
                per_group = [td.get(("next", group, "reward")).sum(0).mean().item() for group in run.group_map]
                returns.append(sum(per_group) / len(per_group))
    return {"per_agent": statistics.fmean(returns), "frames": run.total_frames}


def mpe_worker(job: dict[str, Any]) -> dict[str, Any]:
    """Per-step, per-agent rewards of a fixed action sequence in ``job['module']``."""
    import importlib

    import numpy as np

    env = importlib.import_module(job["module"]).parallel_env(**job["env"], continuous_actions=job["continuous"])
    rewards = []
    actions: dict[str, Any]
    for episode in range(job["episodes"]):
        env.reset(seed=1000 + episode)
        rng = np.random.default_rng(episode)
        while env.agents:
            if job["continuous"]:
                actions = {a: rng.random(5).astype(np.float32) for a in env.agents}
            else:
                actions = {a: int(rng.integers(5)) for a in env.agents}
            _, reward, _, _, _ = env.step(actions)
            rewards.append([float(reward[a]) for a in env.possible_agents])
    return {"rewards": rewards}


# --- runs in popmarl's venv ---------------------------------------------------------------


def popmarl_worker(job: dict[str, Any]) -> dict[str, Any]:
    """One popmarl ``marl`` run of ``job`` (benchmarks/marl.py's config, one iteration); its
    final evaluation's return per agent and its timesteps."""
    import marl  # benchmarks/marl.py
    import torch

    torch.set_num_threads(1)
    task = f"spread_{job['actions']}"
    marl.TASKS[task] = {"module": "mpe2.simple_spread_v3", "mapping": "shared", "agents": AGENTS,
                        "kwargs": {**job["env"], "continuous_actions": job["actions"] == "continuous"}}
    algorithm = POPMARL[job["algorithm"]]
    params = dict(job["params"])
    config = marl.run_config(task, algorithm, params, job["seed"], job["timesteps"] * AGENTS, 1, job["episodes"])
    row = marl.run_one(task, config)
    return {"per_agent": row["per_agent"], "frames": row["timesteps"]}


WORKERS = {"benchmarl": benchmarl_worker, "mpe": mpe_worker, "popmarl": popmarl_worker}


def child(python: str, worker: str, job: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Run one worker in its own process; its JSON answer and CPU seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(HERE)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([python, str(Path(__file__).resolve()), "--worker", worker, json.dumps(job)],
                          capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{worker} run {job} failed:\n{done.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout.strip().splitlines()[-1]), cpu


def setup(venv: Path, torch_spec: str) -> str:
    """BenchMARL's venv (made when missing); its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making {venv}: {torch_spec} {' '.join(PINS)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", torch_spec, *PINS], check=True)
    return str(python)


def mpe_check(python: str, episodes: int = 4) -> float:
    """Largest per-step, per-agent reward difference of PettingZoo 1.24.3's MPE and mpe2."""
    worst = 0.0
    for continuous in (False, True):
        job = {"env": SPREAD, "continuous": continuous, "episodes": episodes}
        theirs, _ = child(python, "mpe", {**job, "module": "pettingzoo.mpe.simple_spread_v3"})
        ours, _ = child(sys.executable, "mpe", {**job, "module": "mpe2.simple_spread_v3"})
        a, b = theirs["rewards"], ours["rewards"]
        diff = math.inf if len(a) != len(b) else max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
        print(f"MPE check ({'continuous' if continuous else 'discrete'}, {episodes} seeded games of fixed random "
              f"actions, {len(a)} steps): max |reward difference| pettingzoo 1.24.3 vs mpe2 = {diff:.3g}", flush=True)
        worst = max(worst, diff)
    return worst


def mean_sem(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (NaN for one value)."""
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "JOB"), help=argparse.SUPPRESS)
    parser.add_argument("--setup", action="store_true", help="make BenchMARL's venv and stop")
    parser.add_argument("--venv", type=Path, default=VENV, help=f"BenchMARL's venv (default {VENV})")
    parser.add_argument("--torch", default=str(TORCH_WHEEL) if TORCH_WHEEL.exists() else "torch==2.13.0",
                        help="torch for the venv: a wheel path or requirement")
    parser.add_argument("--timesteps", type=int, default=102_000, help="per run, env timesteps (BenchMARL frames)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=200)
    choices = {"actions": "discrete,continuous", "algorithms": ",".join(POPMARL), "settings": "matched,defaults",
               "sides": "popmarl,benchmarl"}
    for name, default in choices.items():
        parser.add_argument(f"--{name}", default=default, help=f"a comma-separated subset of {default}")
    parser.add_argument("--param", action="append", default=[], metavar="ALGORITHM:KEY=VALUE",
                        help="a popmarl algorithm's param (mappo, ppo, qmix; a YAML value) over marl.py's; the "
                             "matched BenchMARL runs take it too where it maps (e.g. mappo:lr=0.001); repeatable")
    parser.add_argument("--allow-mpe-mismatch", action="store_true")
    parser.add_argument("--show-mapping", action="store_true", help="print the matched BenchMARL settings")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="LOG", help="one table of earlier --json logs")
    args = parser.parse_args(argv)
    if args.merge:
        merge(args)
        return
    if args.worker:
        print(json.dumps(WORKERS[args.worker[0]](json.loads(args.worker[1]))))
        return
    sys.path.insert(0, str(HERE))
    python = setup(args.venv, args.torch)
    if args.setup:
        return
    lists = {name: getattr(args, name).split(",") for name in choices}
    for name, given in lists.items():
        unknown = [x for x in given if x not in choices[name].split(",")]
        if unknown:
            parser.error(f"--{name}: unknown {', '.join(unknown)}; allowed: {choices[name]}")
    if args.seeds < 1 or args.timesteps % (6000 if "defaults" in lists["settings"] else ROUND):
        parser.error(f"--seeds: at least 1; --timesteps: a multiple of popmarl's {ROUND}-timestep round "
                     "(with defaults: of BenchMARL's 6000-frame batch)")
    import marl  # benchmarks/marl.py; imports popmarl

    from popmarl.errors import ConfigError
    try:
        params = marl.algorithm_params(args.param, [POPMARL[a] for a in lists["algorithms"]])
    except ConfigError as exc:
        parser.error(str(exc))
    if args.param:
        print(f"popmarl params: {json.dumps(params)}", flush=True)
    mapping = {a: matched(a, params[POPMARL[a]]) for a in lists["algorithms"]}
    for algorithm, settings in mapping.items() if args.show_mapping else ():
        print(f"matched {algorithm}: {json.dumps(settings)}")
    if mpe_check(python) > 1e-6 and not args.allow_mpe_mismatch:
        sys.exit("the two MPE packages differ (see above); --allow-mpe-mismatch runs each side on its own")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    rows: dict[str, dict[str, list[float]]] = {}
    popmarl_runs: dict[tuple[str, str, int], tuple[dict[str, Any], float]] = {}
    for setting, algorithm, actions, side, seed in itertools.product(
            lists["settings"], lists["algorithms"], lists["actions"], lists["sides"], seeds):
        if algorithm == "qmix" and actions == "continuous":
            continue
        key = f"{actions}/{algorithm}/{setting}/{side}"
        job = {"algorithm": algorithm, "actions": actions, "seed": seed, "env": SPREAD, "timesteps": args.timesteps,
               "episodes": args.eval_episodes, "settings": mapping[algorithm] if setting == "matched" else {},
               "params": params[POPMARL[algorithm]]}
        if side == "popmarl":  # one config in both settings: run once, reuse
            if (algorithm, actions, seed) not in popmarl_runs:
                popmarl_runs[(algorithm, actions, seed)] = child(sys.executable, "popmarl", job)
            result, cpu = popmarl_runs[(algorithm, actions, seed)]
        else:
            result, cpu = child(python, "benchmarl", job)
        row = rows.setdefault(key, {"per_agent": [], "cpu_s": [], "frames": [], "seeds": []})
        for name, value in zip(row, (result["per_agent"], cpu, result["frames"], seed)):
            row[name].append(value)
        failed = f" (failed: {result['error']})" if "error" in result else ""
        print(f"... {key} seed {seed}: return/agent {result['per_agent']:.2f}, {cpu:.0f} CPU-s, "
              f"{result['frames']:.0f} timesteps{failed}", flush=True)
        if args.json:  # a stopped run's log still merges (--merge)
            print(json.dumps({"run": key, "seed": seed, "per_agent": result["per_agent"], "cpu_s": cpu,
                              "frames": result["frames"]}), flush=True)
    report(rows, args, seeds)


def merge(args: argparse.Namespace) -> None:
    """One report of the runs in several logs printed with ``--json`` (a stopped one's runs so
    far; a later log's run of the same row and seed replaces an earlier one). popmarl's side is
    one config in both settings, so a setting measured on BenchMARL's side only takes
    popmarl's runs of the other."""
    runs: dict[tuple[str, int], tuple[float, float, float]] = {}
    for log in args.merge:
        for run in [json.loads(line) for line in log.read_text().splitlines() if line.startswith('{"run"')]:
            runs[(run["run"], int(run["seed"]))] = (run["per_agent"], run["cpu_s"], run["frames"])
    for key, seed in list(runs):
        actions, algorithm, setting, side = key.split("/")
        other = f"{actions}/{algorithm}/{'defaults' if setting == 'matched' else 'matched'}/popmarl"
        if side == "benchmarl" and (other, seed) in runs:
            runs.setdefault((f"{actions}/{algorithm}/{setting}/popmarl", seed), runs[(other, seed)])
    rows: dict[str, dict[str, list[float]]] = {}
    for (key, seed), (per_agent, cpu, frames) in sorted(runs.items()):
        row = rows.setdefault(key, {"per_agent": [], "cpu_s": [], "frames": [], "seeds": []})
        for name, value in (("per_agent", per_agent), ("cpu_s", cpu), ("frames", frames), ("seeds", seed)):
            row[name].append(value)
    args.actions = ",".join(dict.fromkeys(key.split("/")[0] for key in rows))
    report(rows, args, sorted({seed for _, seed in runs}))


def report(rows: dict[str, dict[str, list[float]]], args: argparse.Namespace, seeds: list[int]) -> None:
    print(f"{'actions':10} {'algorithm':9} {'setting':8} {'side':9} {'seeds':>5} {'timesteps':>9} "
          f"{'return/agent':>15} {'CPU-s':>7} {'CPU ratio':>9}")
    order = {name: i for i, name in enumerate(("discrete", "continuous", "mappo", "ippo", "qmix", "matched",
                                                "defaults", "popmarl", "benchmarl"))}
    for key in sorted(rows, key=lambda k: [order[part] for part in k.split("/")]):
        row = rows[key]
        actions, algorithm, setting, side = key.split("/")
        failed = sum(math.isnan(x) for x in row["per_agent"])
        mean, se = mean_sem([x for x in row["per_agent"] if not math.isnan(x)] or [math.nan])
        cpu = statistics.fmean(row["cpu_s"])
        peer = rows.get(f"{actions}/{algorithm}/{setting}/benchmarl")
        vs = f"{cpu / statistics.fmean(peer['cpu_s']):.3f}" if side == "popmarl" and peer and not any(
            math.isnan(x) for x in peer["per_agent"]) else "-"
        print(f"{actions:10} {algorithm:9} {setting:8} {side:9} {len(row['seeds']):>5} "
              f"{statistics.fmean(row['frames']):>9.0f} "
              f"{mean:>7.2f} ± {se:<5.2f} {cpu:>7.0f} {vs:>9}"
              + (f"  ({failed} of {len(row['seeds'])} diverged: NaN actions; CPU-s until then)" if failed else ""))
    print(f"(mean ± SE over seeds {seeds}; return per agent: each agent's own reward summed over the episode, "
          f"averaged over agents, {args.eval_episodes} games; CPU-s: the run's process, one thread; "
          f"ratio: popmarl / BenchMARL; popmarl algorithms: {POPMARL})")
    for actions in args.actions.split(","):
        ours, theirs = rows.get(f"{actions}/mappo/matched/popmarl"), rows.get(f"{actions}/mappo/matched/benchmarl")
        if not ours or not theirs:
            print(f"done-when ({actions}): matched mappo not measured on both sides")
            continue
        if any(math.isnan(x) for x in theirs["per_agent"]):
            print(f"done-when ({actions}, matched): BenchMARL MAPPO diverged (NaN actions) in "
                  f"{sum(math.isnan(x) for x in theirs['per_agent'])} of {len(theirs['per_agent'])} seeds")
            continue
        (a, sa), (b, sb) = mean_sem(ours["per_agent"]), mean_sem(theirs["per_agent"])
        se = math.sqrt(sa * sa + sb * sb) if math.isfinite(sa) and math.isfinite(sb) else 0.0
        ratio = statistics.fmean(ours["cpu_s"]) / statistics.fmean(theirs["cpu_s"])
        reach = a >= b - se
        verdict = "MET" if reach and ratio <= 1 / 3 else "NOT met"
        print(f"done-when ({actions}, matched): popmarl mappo {a:.2f} vs BenchMARL MAPPO {b:.2f}: difference "
              f"{a - b:+.2f}, SE of the difference {se:.2f} ({'reaches' if reach else 'below'} within 1 SE); "
              f"CPU ratio {ratio:.3f} (≤ 1/3: {'yes' if ratio <= 1 / 3 else 'no'}): {verdict}")
    if args.json:
        print(json.dumps({"rows": rows, "seeds": seeds, "timesteps": args.timesteps,
                          "eval_episodes": args.eval_episodes}))


if __name__ == "__main__":
    main()
