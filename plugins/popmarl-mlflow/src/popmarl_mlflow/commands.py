"""Hook plugin: the ``popmarl sync-mlflow RUN_DIR`` subcommand.

Imports nothing heavy: MLflow is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from popmarl.api import UserError, hookimpl


def sync_command(args: argparse.Namespace) -> int:
    """Upload a run directory to MLflow; print one line saying what was sent."""
    from popmarl_mlflow.connection import display_uri
    from popmarl_mlflow.sync import sync

    try:
        report = sync(args.run_dir, tracking_uri=args.tracking_uri, experiment=args.experiment)
    except UserError:
        raise  # bad input: one line, exit status 2
    except Exception as exc:  # MLflow unreachable or failing: one line, exit status 1
        reason = " ".join(str(exc).split())
        print(f"popmarl: error: sync-mlflow {args.run_dir}: {type(exc).__name__}: {reason[:300]}", file=sys.stderr)
        return 1
    verb = "created" if report.run.created else "updated"
    where = report.run.url(report.tracking_uri) or display_uri(report.tracking_uri)
    print(f"sync-mlflow: {verb} MLflow run {report.run.run_id} (experiment {report.experiment!r}) at {where}: "
          f"{report.iterations} new iterations, {report.params} new params, {report.artifacts} files; "
          f"status {report.status or 'running'}")
    return 0


@hookimpl
def popmarl_add_commands(commands: Any) -> None:
    parser = commands.add_parser(
        "sync-mlflow", help="upload a run directory to MLflow (after an outage, or a run without the tracker)",
        description="Replay a run directory's config, metrics, tags and files into its MLflow run "
                    "(created if needed). Safe to repeat: nothing already there is sent twice.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the popmarl run directory")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="MLflow tracking URI (default: the run's mlflow tracker setting, else "
                             "sqlite:///<parent of RUN_DIR>/mlflow.db)")
    parser.add_argument("--experiment", metavar="NAME",
                        help="MLflow experiment (default: the run's mlflow tracker setting, else popmarl)")
    parser.set_defaults(handler=sync_command)
