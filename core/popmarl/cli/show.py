"""``popmarl show``: a run's summary, payoff table and meta-strategies, and its files."""

from __future__ import annotations

import argparse
import os
from typing import Any

from popmarl.errors import UserError


#: Longer meta-strategies are shown by their support and largest weights.
_FULL_MIXTURE = 12


def _format_mixture(policies: list[str], mixture: list[float]) -> str:
    """The whole mixture when short; else its support size and its largest weights."""
    if len(mixture) <= _FULL_MIXTURE or len(policies) != len(mixture):
        return "[" + " ".join(f"{p:.3f}" for p in mixture) + "]"
    ranked = sorted(range(len(mixture)), key=lambda i: -mixture[i])
    support = sum(1 for p in mixture if p > 0.0)
    largest = ", ".join(f"{policies[i]} {mixture[i]:.3f}" for i in ranked[:_FULL_MIXTURE // 2] if mixture[i] > 0.0)
    return f"support {support}; largest: {largest}"


def show_command(args: argparse.Namespace) -> int:
    """Print the summary, payoff table and meta-strategies of the run in ``args.dir``."""
    # The verb's libraries load when it runs, not with the command line.
    from popmarl.gametheory.payoffs import PayoffTable
    from popmarl.runs.rundir import RunDirectory

    run = RunDirectory(args.dir)
    if not run.path.is_dir():
        raise UserError(f"{run.path}: no such run directory")
    summary = run.read_summary()
    print(f"{'run':<16}{run.path}")
    for key in ("scenario", "status", "iterations", "nash_conv", "exploitability", "env_steps", "wall_time_s"):
        print(f"{key:<16}{summary.get(key)}")
    if summary.get("exact_best_responses") or summary.get("exact_entries"):  # work that took no env steps
        print(f"{'exact':<16}{summary.get('exact_best_responses', 0)} best responses, "
              f"{summary.get('exact_entries', 0)} payoff entries")
    for key in ("mean_returns", "win_rates", "initial_returns"):  # a marl run's progress
        if isinstance(summary.get(key), dict):
            print(f"{key:<15} " + ", ".join(f"{p} {_number(v)}" for p, v in summary[key].items()))
    for population, info in summary.get("populations", {}).items():
        policies, mixture = info.get("policies", []), info.get("meta_strategy", [])
        print(f"population {population}: {len(policies)} policies; meta-strategy {_format_mixture(policies, mixture)}")
    if run.payoffs_file.exists():
        table, ids = PayoffTable.load(run.payoffs_file)
        print(_format_table(table, ids))
    for entry in sorted(run.path.iterdir()):
        if entry.name.startswith("."):  # e.g. an atomic write's temporary file
            continue
        kind = "directory" if entry.is_dir() else "plot" if entry.suffix in (".png", ".svg") else "file"
        print(f"{kind:<11}{entry}{os.sep if entry.is_dir() else ''}")
    return 0


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
