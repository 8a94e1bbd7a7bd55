"""``popmarl plugins [--check]``: every installed component and hook plugin, one row each.

The listing reads entry points only and imports no component. ``--check`` imports each
one in child interpreters (:mod:`popmarl.plugins.check`) and judges the API version its
top-level package declares (:func:`popmarl.plugins.api_version.verdict`): the check column
says ``ok``, ``ok (note)`` (e.g. no API version declared) or ``FAILED: <one line>``, and the
command exits 1 when any failed.
"""

from __future__ import annotations

import argparse
from importlib import metadata

import popmarl
from popmarl.plugins.api_version import verdict
from popmarl.plugins.check import Checked, Target, check
from popmarl.plugins.hooks import PLUGIN_GROUP
from popmarl.plugins.registry import KINDS

#: One row: kind, name, distribution, version, and what to import to check it (None: a
#: component registered in this process, which needs no import).
Row = tuple[str, str, str, str, "Target | None"]


def plugins_command(args: argparse.Namespace) -> int:
    """List (and with ``args.check``, check) every component and hook plugin."""
    listed: list[Row] = []
    for kind in KINDS:
        for name, entry in getattr(popmarl, kind).entries.items():
            target = Target(group=f"popmarl.{kind}", name=name, value=entry.target) if entry.entry_point else None
            listed.append((kind[:-1], name, entry.distribution, entry.version, target))
    for ep in metadata.entry_points(group=PLUGIN_GROUP):
        listed.append(("hooks", ep.name, ep.dist.name if ep.dist else "?", ep.dist.version if ep.dist else "?",
                       Target(group=PLUGIN_GROUP, name=ep.name, value=ep.value)))
    found: dict[Target, Checked] = {}
    if args.check:
        by_distribution: dict[str, list[Target]] = {}
        for _, _, distribution, _, target in listed:
            if target is not None:
                by_distribution.setdefault(distribution, []).append(target)
        found = check(by_distribution)
    rows = [(kind, name, distribution, version,
             "" if not args.check else check_cell(found.get(target) if target else None, distribution, version))
            for kind, name, distribution, version, target in listed]
    widths = [max(len(r[i]) for r in rows + [("kind", "name", "distribution", "version", "")]) for i in range(4)]
    header = ("kind", "name", "distribution", "version", "check" if args.check else "")
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths)) + ("  " + row[4] if row[4] else ""))
    return 1 if any(cell.startswith("FAILED") for *_, cell in rows) else 0


def check_cell(checked: Checked | None, distribution: str, version: str) -> str:
    """The check column of one row: its import error, else its API version's verdict
    (None: registered in this process, nothing imported, ok)."""
    if checked is None:
        return "ok"
    if checked.problem is not None:
        return f"FAILED: {checked.problem}"
    judged = verdict(checked.api, distribution=distribution, version=version)
    if not judged.ok:
        return f"FAILED: {judged.text}"
    return f"ok ({judged.text})" if judged.text else "ok"
