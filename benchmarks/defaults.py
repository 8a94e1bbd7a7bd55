"""Defaults that work (issue 15): PSRO with an algorithm's defaults on poker and board games.

Each check runs ``scenario: psro`` with ``algorithm: {name: dqn|ppo}``, ``solver: {name: nash}``
and stopping only (no ``training`` block, no algorithm params) and compares one figure with
its target:

- ``kuhn``: OpenSpiel Kuhn poker, 10 iterations: NashConv (the run summary's, OpenSpiel's
  NashConv of the aggregated meta-strategy) <= 0.1.
- ``leduc``: OpenSpiel Leduc poker, up to 30 minutes wall: NashConv <= 1.0; reports the
  iteration, wall s and env steps when first reached (CPU s is the whole run's).
- ``tictactoe`` / ``connect_four``: PettingZoo classic games, 10 iterations; the final
  meta-strategy against a uniformly random opponent (``popmarl eval``'s code, 1000 episodes
  per seat): loss rate <= 0.02 in every seat (the figure is the worst seat's).
- ``user_game``: a user's PettingZoo AEC game (tests/plugins/pettingzoo/user_nim.py, Nim
  with 11 tokens, by ``module:`` path), 6 iterations, judged the same way: each seat's win
  rate >= perfect play's win rate against random - 0.03 (the figure is the worst seat's
  margin, win - (perfect - 0.03)).

Wall and CPU time include training, evaluation and NashConv computations. ``--set``
overrides apply to every run (a ``training.`` key adds a training block)::

    python benchmarks/defaults.py                                  # all checks, dqn and ppo
    python benchmarks/defaults.py --checks kuhn user_game --algorithms dqn --seeds 0 1
    python benchmarks/defaults.py --checks tictactoe --set stopping.max_iterations=6 --json

Measured 2026-11-23 (2-core machine shared with other jobs, seed 0; defaults: 20,000 env
steps per best response, ``init: newest_weights``, dqn's opponent exploration 0.3, ppo's 0):

- kuhn: dqn NashConv 0.0 (first <= 0.1 at iteration 6, 41 s wall); ppo 0.061 (65 s) -- met;
- leduc: dqn <= 1.0 first at iteration 45 after 264 s wall (1.81M env steps) -- met;
- tictactoe: dqn loss vs random 0.000 (player_1) / 0.012 (player_2), 59 s -- met (also
  tests/plugins/pettingzoo/test_pz_defaults.py); ppo 0.137 / 0.384 -- not met;
- connect_four: dqn 0.165 / 0.264 (133 s) -- not met (the former defaults: 0.048 / 0.219);
- user_game (Nim 11): dqn win 1.000 / 0.968, ppo 1.000 / 0.952 (perfect 1.000 / 0.963)
  -- met.

ppo, 2026-11-24, after its warm start (a best response from the newest weights gets a
fresh actor output layer; seed 0, machine shared with another run):

- kuhn: NashConv 0.0013 (first <= 0.1 at iteration 6) -- met (was 0.061);
- leduc: <= 1.0 first at iteration 26 after 122 s wall (1.05M env steps) -- met (before:
  never within 30 minutes: 1.04 at best, at iteration 147 and 585 s, then 1.1-1.3; its
  best responses' policy entropy had fallen to ~1e-4; ``init: fresh``: 1.53 at best
  through 285 s);
- tictactoe: 0.059 / 0.382 -- not met (was 0.137 / 0.384);
- user_game: win 1.000 / 0.967 (perfect 1.000 / 0.963) -- met;
- connect_four dqn with 100,000 env steps per best response: 0.166 / 0.243, no better
  than 20,000 (its meta-strategy's policies each lose 12-34% against random).

2026-11-25: ppo takes 10 epochs per update (was 4) and asks for opponent exploration 0.3
like dqn, and no algorithm gets opponent exploration in a game with chance
(``Env.has_chance``: Kuhn, Leduc); seed 0, machine shared with another job:

- kuhn: dqn 0.0 (first <= 0.1 at iteration 6); ppo 0.0004 (iteration 6) -- met (with
  opponent exploration 0.3, ppo ended at 0.080, seeds 1 and 2 at 0.055 and 0.017);
- leduc: dqn <= 1.0 first at iteration 31 after 124 s (1.25M env steps; with exploration
  0.3: iteration 45, 264 s); ppo iteration 32, 117 s (1.29M; with 0.3: 52, 372 s) -- met;
- tictactoe: ppo 0.016 / 0.069; seeds 1 and 2: 0.019 / 0.105 and 0.007 / 0.126 -- not
  met (4 epochs with exploration: 0.018-0.042 / 0.235-0.272 over seeds 0-2; 10 epochs
  without: 0.052 / 0.379); variants at seed 0: 40,000 env steps per best response 0.007 /
  0.050 (109 s), exploration 0.5 0.010 / 0.088, minibatch 64 0.020 / 0.102, whole-batch
  minibatches 0.011 / 0.057, 6 epochs 0.026 / 0.180;
- user_game: ppo win 1.000 / 0.961 (perfect 1.000 / 0.963) -- met.

Before (``init: fresh``, no opponent exploration): kuhn dqn 0.0, ppo 0.0002; leduc dqn
<= 1.0 at iteration 45 (400 s, under heavier load); tictactoe dqn 0.019 / 0.240, ppo
0.088 / 0.498; connect_four dqn 0.048 / 0.219. The tic-tac-toe variants measured on the
way (dqn, player_1 / player_2 loss): opponent exploration 0.2 alone 0.013 / 0.119; with
100,000 steps per best response 0.004 / 0.010 (225 s); 100,000 steps without it 0.026 /
0.320; ``init: previous`` with 0.2: 0.003 / 0.007 (but Leduc NashConv stayed above 1.9
through iteration 17); ``newest_weights`` with 0.2: 0.000 / 0.023, with 0.3: 0.000 /
0.012. Opponent exploration 0.3 cost ppo on Kuhn (0.125 and 0.149 at iteration 10), so
ppo asks for none.

connect_four with dqn, 2026-11-25 (seed 0). 3-step returns made one best response
trained against random much better: at 200,000 env steps it lost 0.114 / 0.152 with the
defaults; with ``n_step: 3, lr: 3.0e-4, gamma: 0.95`` it lost 0.014 / 0.016, and on seed 1
0.016 / 0.050. They do not help the check, which is failed by the meta-game: the Nash of
the population keeps the initial uniform policy for one seat (weight 0.97), because each
deterministic best response is beaten outright by the other seat's later ones, and
uniform play loses less than that. Results:

- ``--set algorithm.params.n_step=3 --set algorithm.params.lr=3e-4``: 0.090 / 0.171;
- with ``eps_decay_steps=2000`` added: 0.038 / 0.542 (uniform weight 0.97 in the second
  seat);
- with ``training.max_env_steps=60000`` added: 0.053 / 0.108;
- 4 iterations of 200,000 steps with ``opponent_epsilon`` 0.5 (and ``self_play`` 0.5):
  0.452 / 0.047, uniform weight 0.97 in the first seat.

The same settings as defaults hurt elsewhere: tic-tac-toe's second seat 0.049 (``n_step``
3) and 0.041 (with lr 3e-4), against 0.012; Kuhn 0.056 and 0.167 at iteration 10,
against 0.0; Leduc reached NashConv 1.0 at iterations 47 and 53, against 31. They are
not the defaults. The tic-tac-toe ppo check, seed 0, re-measured the same day in a fresh
install: 0.007 / 0.153, also at b81551e, whose code gave the 0.016 / 0.069 above; the
runs are deterministic (twice the same figures), so something outside popmarl's code (a
library version, an environment variable) changed the outcome; not tracked down.

ppo on tic-tac-toe without the entropy bonus, 2026-11-25 (``--set
algorithm.params.ent_coef=0.0``; ppo's policies sample when evaluated, so a flatter
policy blunders more): seed 0 0.003 / 0.030, but seeds 1 and 2 0.027 / 0.134 and 0.009 /
0.117; ``ent_coef`` 0.003, seed 0: 0.008 / 0.144. Not the second seat's fix; left at 0.01.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import yaml  # noqa: E402

import popmarl  # noqa: E402
from popmarl.evaluate import evaluate_run, load_run, opponent_pools  # noqa: E402

USER_GAMES = Path(__file__).resolve().parents[1] / "tests" / "plugins" / "pettingzoo"
NIM_TOKENS = 11
EVAL_EPISODES = 1000



def _poker(game: str) -> dict[str, Any]:
    return {"name": "openspiel", "params": {"game": game, "observation": "info_state"}}


CHECKS: dict[str, dict[str, Any]] = {
    "kuhn": {"env": _poker("kuhn_poker"),
             "stopping": {"max_iterations": 10}, "target": 0.1},
    "leduc": {"env": _poker("leduc_poker"),
              "stopping": {"max_iterations": 1000, "max_wall_time_s": 1800, "target_nash_conv": 1.0},
              "target": 1.0},
    "tictactoe": {"env": {"name": "pettingzoo", "params": {"module": "pettingzoo.classic.tictactoe_v3"}},
                  "stopping": {"max_iterations": 10}, "target": 0.02},
    "connect_four": {"env": {"name": "pettingzoo", "params": {"module": "pettingzoo.classic.connect_four_v3"}},
                     "stopping": {"max_iterations": 10}, "target": 0.02},
    "user_game": {"env": {"name": "pettingzoo",
                          "params": {"module": "user_nim:Nim", "kwargs": {"tokens": NIM_TOKENS}}},
                  "stopping": {"max_iterations": 6}, "target": 0.0},
}


def run(check: str, algorithm: str, seed: int, overrides: list[str], out: Path) -> dict[str, Any]:
    """Run one check and return its row (figure, target, met, costs)."""
    spec = CHECKS[check]
    directory = out / f"{check}-{algorithm}-{seed}"
    path = out / f"{check}-{algorithm}-{seed}.yaml"
    path.write_text(yaml.safe_dump({
        "scenario": "psro", "seed": seed, "env": spec["env"], "algorithm": {"name": algorithm},
        "solver": {"name": "nash"}, "stopping": spec["stopping"], "trackers": ["jsonl"]}))
    config = popmarl.load_config(str(path), overrides)
    wall, cpu = time.perf_counter(), time.process_time()
    summary = popmarl.run(config, out=str(directory))
    rows = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
    row: dict[str, Any] = {"check": check, "algorithm": algorithm, "seed": seed, "target": spec["target"],
                           "iterations": summary["iterations"], "env_steps": summary["env_steps"]}
    if check in ("kuhn", "leduc"):
        row.update(_nash_conv(rows, summary, spec["target"]))
    else:
        row.update(_against_random(directory, seed, check))
    row["wall_s"], row["cpu_s"] = time.perf_counter() - wall, time.process_time() - cpu
    if check == "leduc" and row["reached_at"] is not None:
        row["wall_s"], row["env_steps"] = row["reached_s"], row["reached_env_steps"]
    return row


def _nash_conv(rows: list[dict[str, Any]], summary: dict[str, Any], target: float) -> dict[str, Any]:
    reached = next((r for r in rows if r.get("nash_conv") is not None and r["nash_conv"] <= target), None)
    return {"figure": summary["nash_conv"], "met": reached is not None,
            "curve": [r.get("nash_conv") for r in rows],
            "reached_at": None if reached is None else reached["iteration"],
            "reached_s": None if reached is None else reached["wall_time_s"],
            "reached_env_steps": None if reached is None else reached["env_steps"]}


def _against_random(directory: Path, seed: int, check: str) -> dict[str, Any]:
    """The final meta-strategy against a uniformly random opponent, seat by seat."""
    loaded = load_run(directory)
    report = evaluate_run(loaded, opponent_pools(loaded, "random"), episodes=EVAL_EPISODES, seed=seed + 1)
    seats = {name: {"win": r["win"], "loss": r["loss"]} for name, r in report.items()}
    if check != "user_game":
        worst = max(s["loss"] for s in seats.values())
        return {"figure": worst, "met": worst <= CHECKS[check]["target"], "seats": seats}
    from user_nim import win_rate_against_random

    for index, name in enumerate(seats):  # populations in seat order
        seats[name]["perfect"] = win_rate_against_random(NIM_TOKENS, index)
    margin = min(s["win"] - (s["perfect"] - 0.03) for s in seats.values())
    return {"figure": margin, "met": margin >= 0.0, "seats": seats}


def table(results: list[dict[str, Any]]) -> str:
    head = (f"{'check':<12} {'algo':<4} {'seed':>4} {'iters':>5} {'figure':>8} {'target':>7} {'met':>4} "
            f"{'wall s':>7} {'cpu s':>7} {'env steps':>10}  detail")
    lines = [head, "-" * len(head)]
    for r in results:
        figure = "-" if r["figure"] is None else f"{r['figure']:.4f}"
        if "seats" in r:
            detail = "  ".join(f"{k}: " + " ".join(f"{m} {v:.3f}" for m, v in s.items()) for k, s in r["seats"].items())
        else:
            detail = "not reached" if r["reached_at"] is None else f"first reached at iteration {r['reached_at']}"
        lines.append(f"{r['check']:<12} {r['algorithm']:<4} {r['seed']:>4} {r['iterations']:>5} {figure:>8} "
                     f"{r['target']:>7} {'yes' if r['met'] else 'NO':>4} {r['wall_s']:>7.0f} {r['cpu_s']:>7.0f} "
                     f"{r['env_steps']:>10}  {detail}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--checks", nargs="+", choices=list(CHECKS), default=list(CHECKS))
    parser.add_argument("--algorithms", nargs="+", choices=["dqn", "ppo"], default=["dqn", "ppo"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every run, e.g. stopping.max_iterations=6")
    parser.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object, last line")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sys.path.insert(0, str(USER_GAMES))  # module: user_nim:Nim
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        results = []
        for check in args.checks:
            for algorithm in args.algorithms:
                for seed in args.seeds:
                    results.append(run(check, algorithm, seed, args.overrides, out))
                    print(table(results[-1:]).splitlines()[2], flush=True)
        print()
        print(table(results))
    if args.json:
        print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
