"""``popmarl show``: a run's status, summary, payoff table and meta-strategies, and its files.

Its progress: NashConv where the env computes it; else what the console prints for the
last committed iteration (``progress``: labelled figures, each with the iteration it was
measured at) and, where ``popmarl exploit`` wrote ``exploit.json`` into the run
directory, its approximate NashConv (``exploit``).

A run that is going or was killed is shown from its last committed checkpoint, its status
saying which (``running, iteration 12``; ``interrupted at iteration 5: continue with
--resume``). ``--json`` prints one JSON object instead; ``--follow`` prints again each time
the run commits an iteration, until it ends (or Ctrl-C): it polls the checkpoint's state
file and the run's process, and reads the run's files only when they changed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from popmarl.errors import UserError

#: Longer meta-strategies are shown by their support and largest weights.
_FULL_MIXTURE = 12
#: Seconds between two looks at a followed run (``--interval``).
DEFAULT_INTERVAL_S = 2.0


def add_show_arguments(show: argparse.ArgumentParser) -> None:
    """``show``'s arguments."""
    show.add_argument("dir", help="a run directory (finished, going, or killed)")
    show.add_argument("--json", action="store_true", help="print one JSON object (with --follow: one per line)")
    show.add_argument("--follow", action="store_true",
                      help="print again whenever the run commits an iteration, until it ends (or Ctrl-C)")
    show.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, metavar="S",
                      help=f"with --follow: seconds between two looks at the run (default {DEFAULT_INTERVAL_S:g})")


def _format_mixture(policies: list[str], mixture: list[float]) -> str:
    """The whole mixture when short; else its support size and its largest weights."""
    if len(mixture) <= _FULL_MIXTURE or len(policies) != len(mixture):
        return "[" + " ".join(f"{p:.3f}" for p in mixture) + "]"
    ranked = sorted(range(len(mixture)), key=lambda i: -mixture[i])
    support = sum(1 for p in mixture if p > 0.0)
    largest = ", ".join(f"{policies[i]} {mixture[i]:.3f}" for i in ranked[:_FULL_MIXTURE // 2] if mixture[i] > 0.0)
    return f"support {support}; largest: {largest}"


def show_command(args: argparse.Namespace) -> int:
    """Print the run in ``args.dir`` (once, or following it with ``--follow``)."""
    if not args.interval > 0:
        raise UserError(f"--interval: must be a positive number of seconds, got {args.interval}")
    if args.follow:
        return _follow(args.dir, as_json=args.json, interval=args.interval)
    _print(args.dir, as_json=args.json, files=True)
    return 0


def _print(path: str, *, as_json: bool, files: bool) -> Any:
    """Print the run once (with its payoff table and files: ``files``); return its view."""
    # The verb's libraries load when it runs, not with the command line.
    from popmarl.tools.run_view import view_run

    view = view_run(path)
    if as_json:
        print(json.dumps(view.to_json()), flush=True)
        return view
    figures = view.figures
    print(f"{'run':<16}{view.path}")
    print(f"{'status':<16}{view.status.describe()}")
    print(f"{'scenario':<16}{view.scenario}")
    exact = figures.get("nash_conv") is not None
    for key in ("iterations", "nash_conv", "exploitability", "env_steps", "wall_time_s"):
        if exact or key not in ("nash_conv", "exploitability"):  # NashConv where the env computes it
            print(f"{key:<16}{figures.get(key)}")
    if view.exploit is not None:
        print(f"{'exploit':<16}{_format_exploit(view.exploit)}")
    if view.progress and not exact:
        print(f"{'progress':<16}" + "; ".join(map(str, view.progress)))
    if figures.get("exact_best_responses") or figures.get("exact_entries"):  # work that took no env steps
        print(f"{'exact':<16}{figures.get('exact_best_responses', 0)} best responses, "
              f"{figures.get('exact_entries', 0)} payoff entries")
    for key in ("mean_returns", "win_rates", "initial_returns"):  # a marl run's progress
        if isinstance(figures.get(key), dict):
            print(f"{key:<15} " + ", ".join(f"{p} {_number(v)}" for p, v in figures[key].items()))
    for population, info in view.populations.items():
        policies, mixture = info.get("policies", []), info.get("meta_strategy")
        shown = "not known yet" if mixture is None else _format_mixture(policies, mixture)
        print(f"population {population}: {len(policies)} policies; meta-strategy {shown}")
    if files:
        _print_files(view.path)
    sys.stdout.flush()
    return view


def _print_files(path: Any) -> None:
    """The payoff table, then every file of the run directory."""
    from popmarl.gametheory.payoffs import PayoffTable
    from popmarl.runs.rundir import RunDirectory

    run = RunDirectory(path)
    if run.payoffs_file.exists():
        table, ids = PayoffTable.load(run.payoffs_file)
        print(_format_table(table, ids))
    for entry in sorted(run.path.iterdir()):
        if entry.name.startswith("."):  # e.g. an atomic write's temporary file
            continue
        kind = "directory" if entry.is_dir() else "plot" if entry.suffix in (".png", ".svg") else "file"
        print(f"{kind:<11}{entry}{os.sep if entry.is_dir() else ''}")


def _follow(path: str, *, as_json: bool, interval: float) -> int:
    """Print the run, then again whenever its state file, summary or process file changes,
    until it stops going (or Ctrl-C); exit status 0 either way."""
    from popmarl.runs.process_file import PROCESS_FILE, is_alive, read_record
    from popmarl.runs.rundir import RunDirectory

    run = RunDirectory(path)
    watched = (run.state_file, run.summary_file, run.path / PROCESS_FILE)
    try:
        stamp = _stamp(watched)
        view = _print(path, as_json=as_json, files=not as_json)
        while view.status.state in ("running", "unknown"):
            time.sleep(interval)
            now = _stamp(watched)
            record = read_record(run.path) if view.status.state == "running" else None
            gone = view.status.state == "running" and (record is None or is_alive(record) is False)
            if now != stamp or gone:
                stamp = now
                if not as_json:
                    print()
                view = _print(path, as_json=as_json, files=False)
    except KeyboardInterrupt:
        return 0
    return 0


def _stamp(paths: tuple[Any, ...]) -> tuple[tuple[int, int] | None, ...]:
    """Each file's (inode, modification time), or None where it is missing: an atomic
    replace changes the inode, a write the time."""
    stamps: list[tuple[int, int] | None] = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            stamps.append(None)
            continue
        stamps.append((stat.st_ino, stat.st_mtime_ns))
    return tuple(stamps)


def _format_exploit(exploit: Any) -> str:
    """``popmarl exploit``'s headline: its approximate NashConv (or CCE gap), lower bound
    and 95% half-width, the iteration it exploited and its file."""
    kind = str(exploit.get("kind", "nash_conv"))
    cells = [f"approx {kind} {_number(exploit.get('value'))}"]
    details = [f"{name} {_number(exploit.get(key))}" for name, key in (("lower bound", "lower_bound"), ("ci95", "ci95"))
               if exploit.get(key) is not None]
    if exploit.get("iteration") is not None:
        details.append(f"iteration {exploit['iteration']}")
    return " ".join(cells) + f" ({', '.join([*details, str(exploit.get('file'))])})"


def _number(value: Any) -> str:
    return "None" if value is None else f"{value:.4f}"


def _format_table(table: Any, ids: list[list[str]], limit: int = 12) -> str:
    """Agent 0's payoffs (rows: its policies; columns: agent 1's) for two-agent tables."""
    if len(table.agents) != 2:
        return f"payoff table: {len(table.agents)} agents, shape {table.shape} (see payoffs.npz)"
    rows, cols = ids[0][:limit], ids[1][:limit]
    width = max(8, *(len(c) for c in cols))
    lines = [f"payoffs of {table.agents[0]} (rows) vs {table.agents[1]} (columns)" +
             (f", first {limit}" if len(ids[0]) > limit or len(ids[1]) > limit else "")]
    lines.append(" " * width + "".join(c.rjust(width + 1) for c in cols))
    for i, r in enumerate(rows):
        lines.append(r.ljust(width) + "".join(f"{table.values[0, i, j]:{width + 1}.4f}" for j in range(len(cols))))
    return "\n".join(lines)
