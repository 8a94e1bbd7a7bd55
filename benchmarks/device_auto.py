"""Whether ``device: auto`` picks the faster device: ``dqn``, ``ppo`` and ``a2c`` on Leduc
poker, with their default networks and with wide ones (1024x1024 layers, batch 1024).

Per algorithm and network: the device ``auto`` chose and its timings of each candidate
(the trainer's own timing, read from the process's decisions, ``popmarl_torch.auto.AUTO``),
then env steps per wall second of a best-response training of ``--steps`` env steps
(:func:`learning.popmarl_train`: player_0's learner against player_1's uniform policy,
the budget a default ``psro`` run gets, capped) with ``device`` given explicitly as each
candidate, and whether ``auto`` chose the one that trained faster (or within 10% of it:
a tie). ``acting_device`` stays
at its default (``cpu``). Where torch sees no GPU, ``auto`` is the CPU untimed and only
the CPU row is trained. CPU threads: the algorithms' ``torch_threads`` (1 by default, as
in a run; ``--threads N`` sets it).

    python benchmarks/device_auto.py [--steps 10000] [--algorithms dqn ppo a2c] [--threads N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learning  # noqa: E402
import torch  # noqa: E402

WIDE = {"hidden": [1024, 1024], "batch_size": 1024}


def train_wall(algorithm: str, params: dict[str, Any], steps: int) -> float:
    """Env steps per wall second of a best-response training with ``params``."""
    setting = learning.Setting(algorithm=algorithm, params=params, game="leduc")
    return float(learning.popmarl_train(setting, steps, profile=False)["train_wall_steps_per_s"])


def auto_choice(algorithm: str, params: dict[str, Any]) -> Any:
    """The update-device decision ``auto`` makes for a learner of ``params`` (a short
    training decides it; the decision is read from the process's cache)."""
    from popmarl_torch.auto import AUTO

    AUTO.cache.clear()
    learning.popmarl_train(learning.Setting(algorithm=algorithm, params={**params, "device": "auto"}, game="leduc"),
                           2_000, profile=False)
    updates = [choice for (key, _rows, _candidates), choice in AUTO.cache.items() if key[0] == "update"]
    return updates[-1] if updates else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algorithms", nargs="+", default=list(learning.ALGORITHMS), choices=learning.ALGORITHMS)
    parser.add_argument("--steps", type=int, default=10_000, help="env steps per timed training (default 10000)")
    parser.add_argument("--threads", type=int, default=1, help="the algorithms' torch_threads (default 1)")
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available()
    candidates = ["cpu"] + ([f"cuda:{torch.cuda.current_device()}"] if gpu else [])
    print(f"# device: auto on Leduc, {args.steps} env steps per training; torch {torch.__version__}, "
          f"{args.threads} CPU thread(s), GPU: {torch.cuda.get_device_name() if gpu else 'none'}")
    timed_head = " ".join(f"{'auto ms ' + c:>16}" for c in candidates)
    trained_head = " ".join(f"{'steps/s ' + c:>16}" for c in candidates)
    print(f"{'algorithm':<9} {'network':<22} {'auto ->':<8} {timed_head} {trained_head} {'auto faster?':>12}")
    wrong = 0
    for algorithm in args.algorithms:
        for label, wide in (("default", {}), ("1024x1024, batch 1024", WIDE)):
            params = {**wide, "torch_threads": args.threads}
            choice = auto_choice(algorithm, params)
            timings = dict(choice.timings) if choice is not None else {}
            chosen = choice.device if choice is not None else "cpu"
            timed = " ".join(f"{timings[c] * 1e3:>16.3f}" if c in timings else f"{'-':>16}" for c in candidates)
            speeds = {c: train_wall(algorithm, {**params, "device": c}, args.steps) for c in candidates}
            best = max(speeds, key=lambda c: speeds[c])
            right = chosen == best or speeds[chosen] >= 0.9 * speeds[best]  # within 10%: a tie
            wrong += not right
            trained = " ".join(f"{speeds[c]:>16,.0f}" for c in candidates)
            print(f"{algorithm:<9} {label:<22} {chosen:<8} {timed} {trained} {'yes' if right else 'NO':>12}", flush=True)
    print(f"# auto chose a device at least 0.9x as fast as the faster in {'every' if not wrong else 'not every'} row")
    return 0


if __name__ == "__main__":
    start = time.perf_counter()
    code = main()
    print(f"# {time.perf_counter() - start:.0f} s")
    sys.exit(code)
