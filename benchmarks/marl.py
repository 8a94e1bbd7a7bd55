"""Cooperative MARL at equal env steps and seeds: independent PPO, ``mappo``, ``vdn``,
``qmix`` and independent ``dqn`` on mpe2 ``simple_spread_v3`` (3 agents) and
``simple_speaker_listener_v4`` (``per_player``: its agents' spaces differ), and ``mappo``
and ``masac`` on spread with continuous actions (``spread_box``: ``continuous_actions``,
each action five thrusts in [0, 1]), against uniformly random play.

Each (task, algorithm, seed) is one ``marl`` run of ``--env-steps`` env steps in
``--iterations`` iterations (``ppo`` with the tuned recipe of
``examples/marl_simple_spread_ppo.yaml``, the others with their defaults); its final
policies are evaluated greedily/stochastically as popmarl evaluates them
(``evaluation.episodes_per_entry`` games). Printed per row, mean ± standard error over the
seeds: the return per agent (popmarl's ``mean_return``: each agent's own reward summed
over the episode, averaged over agents) and team-summed (the sum over agents), both step
conventions — env steps as popmarl counts them (agent decisions) and env timesteps (what
MAPPO and EPyMARL count: decisions / agents in these simultaneous games) — the episode
length in timesteps, mpe2's ``local_ratio`` (spread's weight of each agent's own
collision penalty against the shared coverage reward) and the wall time. Then the
done-when comparisons: each margin over its standard error (the two rows' SEMs combined).
Published figures' conventions are printed beside as context: they differ in reward
accounting, episode length and budget, so they are not targets.

    nice python benchmarks/marl.py [--env-steps 100000] [--seeds 3] [--first-seed 0] [--iterations 2]
        [--tasks spread,speaker_listener,spread_box] [--algorithms ppo,mappo,vdn,qmix,dqn,masac]
        [--param ALGORITHM:KEY=VALUE ...] [--jobs 1] [--json]

``--param`` changes one algorithm's params for every task (a YAML value, over the recipe or
defaults below; repeatable), e.g. ``--param ppo:clip=0.1 --param mappo:clip=0.1``: each
run's config is checked before any runs, and a bad one stops the script with one line.
``--first-seed``: the seeds are ``first_seed .. first_seed + seeds - 1`` (random play's too).

``--jobs``: runs played at once, each in its own process (each run is seeded and
single-threaded, so its result does not depend on this; its wall time does). Evaluation
is noisy: on speaker-listener one run's team return moved by 5 between 100 and 1,000
evaluation games (``vdn``, seed 0, 300k env steps: -35.0 / -30.1), so compare with
``--eval-episodes 1000``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

import popmarl

TASKS: dict[str, dict[str, Any]] = {
    "spread": {"module": "mpe2.simple_spread_v3", "kwargs": {"N": 3, "max_cycles": 25, "local_ratio": 0.5},
               "mapping": "shared", "agents": 3},
    "speaker_listener": {"module": "mpe2.simple_speaker_listener_v4", "kwargs": {"max_cycles": 25},
                         "mapping": "per_player", "agents": 2},
    "spread_box": {"module": "mpe2.simple_spread_v3",
                   "kwargs": {"N": 3, "max_cycles": 25, "local_ratio": 0.5, "continuous_actions": True},
                   "mapping": "shared", "agents": 3},
}
#: ``ppo``: the tuned recipe of examples/marl_simple_spread_ppo.yaml; the rest: defaults.
PARAMS: dict[str, dict[str, Any]] = {
    "ppo": {"lr": 3.0e-3, "hidden": [64, 64], "gamma": 0.95, "gae_lambda": 0.95, "ent_coef": 0.01,
            "batch_size": 256, "epochs": 6, "device": "cpu"},
    "dqn": {"device": "cpu"},
    "mappo": {}, "vdn": {}, "qmix": {}, "masac": {},
}
PUBLISHED = [
    "MAPPO (Yu et al. 2022, marlbenchmark/on-policy): rewards summed over agents and the sum given to every "
    "agent; 25-step episodes; 20M env timesteps on spread",
    "EPyMARL (Papoudakis et al. 2021): team return divided by the number of agents; 25-step episodes",
    "BenchMARL (Bettini et al. 2024): 100-step episodes (VMAS/MPE), return averaged over agents",
]


def run_config(task: str, algorithm: str, params: dict[str, Any], seed: int, env_steps: int, iterations: int,
               episodes: int) -> Any:
    """The parsed ``marl`` config of one run (raises popmarl's ``ConfigError`` on a bad param)."""
    spec = TASKS[task]
    return popmarl.validate({
        "scenario": "marl", "seed": seed, "agents": {"mapping": spec["mapping"]},
        "env": {"name": "pettingzoo", "params": {"module": spec["module"], "kwargs": spec["kwargs"]}},
        "algorithm": {"name": algorithm, "params": params},
        "training": {"max_env_steps": env_steps // iterations, "episodes_per_update": 16, "num_envs": 16},
        "stopping": {"max_iterations": iterations},
        "evaluation": {"episodes_per_entry": episodes}, "trackers": []})


def run_one(task: str, config: Any) -> dict[str, Any]:
    """One marl run of ``config`` (from :func:`run_config`); its seed, final evaluation,
    steps and time."""
    spec = TASKS[task]
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        summary = popmarl.run(config, out=str(Path(out) / "run"))
        lines = [json.loads(x) for x in (Path(out) / "run" / "metrics.jsonl").read_text().splitlines()]
    seconds = time.monotonic() - start
    last = lines[-1]
    populations = list(summary["populations"])
    seats = {p: (spec["agents"] if spec["mapping"] == "shared" else 1) for p in populations}
    per_agent = sum(last[f"mean_return/{p}"] * seats[p] for p in populations) / spec["agents"]
    steps = int(last["env_steps"])
    length = last["iteration_env_steps"] / spec["agents"] / max(last["episodes"], 1)
    return {"seed": config.seed, "per_agent": per_agent, "team": per_agent * spec["agents"], "env_steps": steps,
            "timesteps": steps / spec["agents"], "episode_length": length,
            "seconds": seconds}


def runs_on(task: str, algorithm: str) -> bool:
    """Whether ``algorithm`` plays ``task``: the discrete-action learners (``ppo`` here is
    popmarl-tianshou's discrete recipe, ``vdn``, ``qmix``, ``dqn``) skip ``spread_box``
    and ``masac`` (Box actions only) skips the discrete tasks; ``mappo`` plays all."""
    box = "continuous_actions" in TASKS[task]["kwargs"]
    return algorithm == "mappo" or (algorithm == "masac") == box


def random_play(task: str, seeds: range, episodes: int) -> dict[str, Any]:
    """Uniformly random actions in mpe2 itself: per-agent and team-summed return."""
    import importlib

    spec = TASKS[task]
    module = importlib.import_module(spec["module"])
    teams = []
    for seed in seeds:
        env = module.parallel_env(**spec["kwargs"])
        totals = []
        for episode in range(episodes):
            env.reset(seed=seed * 100_003 + episode)
            for k, agent in enumerate(env.possible_agents):
                env.action_space(agent).seed(seed * 100_003 + episode * 7 + k)
            total = 0.0
            while env.agents:
                _, rewards, _, _, _ = env.step({a: env.action_space(a).sample() for a in env.agents})
                total += float(sum(rewards.values()))
            totals.append(total)
        env.close()
        teams.append(float(np.mean(totals)))
    n = spec["agents"]
    length = spec["kwargs"]["max_cycles"]
    return {"per_agent": [t / n for t in teams], "team": teams, "env_steps": 0, "timesteps": 0,
            "episode_length": length, "seconds": 0.0}


def mean_sem(values: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan"))


def margin(rows: dict[tuple[str, str], dict[str, Any]], task: str, better: str, worse: str) -> str:
    """``better`` minus ``worse`` (team-summed) in standard errors of the difference."""
    if (task, better) not in rows or (task, worse) not in rows:
        return f"{task}: {better} vs {worse}: not measured"
    a, sa = mean_sem(rows[(task, better)]["team"])
    b, sb = mean_sem(rows[(task, worse)]["team"])
    se = math.sqrt(sa * sa + sb * sb)
    ratio = (a - b) / se if se > 0 else float("inf")
    verdict = "by more than 2 SE" if ratio > 2 else "NOT by 2 SE"
    return f"{task}: {better} {a:.2f} vs {worse} {b:.2f}: difference {a - b:+.2f} = {ratio:+.1f} SE ({verdict})"


def algorithm_params(items: list[str], algorithms: list[str]) -> dict[str, dict[str, Any]]:
    """Each algorithm's params: :data:`PARAMS` with ``--param ALGORITHM:KEY=VALUE`` over them
    (raises popmarl's ``ConfigError`` naming the item where one is malformed)."""
    from popmarl.tools.bench import parse_params
    from popmarl.errors import ConfigError

    params = {algorithm: dict(PARAMS[algorithm]) for algorithm in algorithms}
    for item in items:
        algorithm, sep, pair = item.partition(":")
        if not sep or algorithm not in params:
            raise ConfigError(f"--param: expected ALGORITHM:KEY=VALUE with ALGORITHM one of "
                              f"{', '.join(algorithms)}, got {item!r}")
        params[algorithm].update(parse_params([pair], f"--param {algorithm}"))
    return params


def gap_share(rows: dict[tuple[str, str], dict[str, Any]], task: str, algorithm: str, reference: str) -> str:
    """How much of the gap from random play to ``reference`` ``algorithm`` closes
    (team-summed means), and whether it is at least half."""
    if not all((task, a) in rows for a in (algorithm, reference, "random")):
        return f"{task}: {algorithm} vs {reference}'s gap over random: not measured"
    a, r, b = (statistics.fmean(rows[(task, x)]["team"]) for x in (algorithm, reference, "random"))
    share = (a - b) / (r - b) if r != b else float("nan")
    verdict = "at least half" if share >= 0.5 else "NOT half"
    return (f"{task}: {algorithm} - random = {a - b:+.2f}, {reference} - random = {r - b:+.2f}: "
            f"{share:.2f} of {reference}'s gap ({verdict})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-steps", type=int, default=100_000, help="per run, in agent decisions")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--tasks", default="spread,speaker_listener")
    parser.add_argument("--algorithms", default="ppo,mappo,vdn,qmix,dqn",
                        help=f"of {','.join(PARAMS)} (masac: Box actions only, so spread_box only)")
    parser.add_argument("--param", action="append", default=[], metavar="ALGORITHM:KEY=VALUE",
                        help="an algorithm param (YAML value) over its recipe or defaults; repeatable")
    parser.add_argument("--jobs", type=int, default=1, help="runs played at once (processes)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args(argv)
    from popmarl.errors import UserError

    rows: dict[tuple[str, str], dict[str, Any]] = {}
    tasks, algorithms = args.tasks.split(","), args.algorithms.split(",")
    for name, given, allowed in (("--tasks", tasks, list(TASKS)), ("--algorithms", algorithms, list(PARAMS))):
        unknown = [x for x in given if x not in allowed]
        if unknown:
            parser.error(f"{name}: unknown {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    if args.seeds < 1:
        parser.error("--seeds: must be at least 1")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(task, algorithm, seed) for task in tasks for algorithm in algorithms for seed in seeds
            if runs_on(task, algorithm)]
    try:
        params = algorithm_params(args.param, algorithms)
        configs = [run_config(task, algorithm, params[algorithm], seed, args.env_steps, args.iterations,
                              args.eval_episodes) for task, algorithm, seed in jobs]
    except UserError as exc:
        parser.error(str(exc))
    print("params: " + "; ".join(f"{a} {json.dumps(params[a])}" for a in algorithms) + f"; seeds {list(seeds)}",
          flush=True)
    randoms = {task: random_play(task, seeds, args.eval_episodes) for task in tasks}
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(run_one, job[0], config) for job, config in zip(jobs, configs)]
        for task in tasks:
            rows[(task, "random")] = randoms[task]
            for algorithm in algorithms:
                if not runs_on(task, algorithm):
                    continue
                runs = [f.result() for job, f in zip(jobs, futures) if job[:2] == (task, algorithm)]
                rows[(task, algorithm)] = {key: [r[key] for r in runs] for key in runs[0]}
                print(f"... {task} {algorithm}: team returns by seed "
                      f"{[round(t, 2) for t in rows[(task, algorithm)]['team']]}", flush=True)
    header = (f"{'task':18} {'algorithm':9} {'mapping':10} {'env steps':>10} {'timesteps':>10} {'ep len':>6} "
              f"{'local_ratio':>11} {'return/agent':>16} {'team return':>17} {'wall s':>7}")
    print(header)
    for (task, algorithm), row in rows.items():
        spec = TASKS[task]
        pa, pa_se = mean_sem(row["per_agent"])
        team, team_se = mean_sem(row["team"])
        ratio = spec["kwargs"].get("local_ratio")
        mapping = spec["mapping"] if algorithm != "random" else "-"
        print(f"{task:18} {algorithm:9} {mapping:10} {int(np.mean(row['env_steps'])):>10} "
              f"{int(np.mean(row['timesteps'])):>10} {np.mean(row['episode_length']):>6.1f} "
              f"{'-' if ratio is None else ratio:>11} {pa:>9.2f} ± {pa_se:<4.2f} {team:>10.2f} ± {team_se:<4.2f} "
              f"{np.mean(row['seconds']):>7.0f}")
    print(f"(mean ± SEM over {args.seeds} seeds; {args.eval_episodes} evaluation games per run)")
    print("done-when comparisons (team-summed return):")
    print("  " + margin(rows, "spread", "mappo", "ppo"))
    for algorithm in ("qmix", "vdn"):
        for other in ("random", "dqn"):
            print("  " + margin(rows, "speaker_listener", algorithm, other))
    print("  " + margin(rows, "spread_box", "masac", "random"))
    print("  " + gap_share(rows, "spread_box", "masac", "mappo"))
    print("published figures' conventions (context, not targets):")
    for line in PUBLISHED:
        print(f"  {line}")
    if args.json:
        print(json.dumps({**{f"{t}/{a}": r for (t, a), r in rows.items()}, "params": params, "seeds": list(seeds)}))


if __name__ == "__main__":
    main()
