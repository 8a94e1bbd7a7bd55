"""Replay a run directory into MLflow: config, tags, every iteration of ``metrics.jsonl``,
artifacts and the final status. What ``popmarl sync-mlflow`` and the tracker's catch-up do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from popmarl.api import UserError, read_json_lines
from popmarl_mlflow.connection import DEFAULT_EXPERIMENT, HttpLimits, OpenedRun, limited, open_run, refused_store, resolve_tracking_uri
from popmarl_mlflow.writer import RunWriter

TRACKER_NAME = "mlflow"


def read_metrics(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The lines of ``metrics.jsonl`` (one per completed iteration); a torn last line is
    left out."""
    return read_json_lines(Path(run_dir) / "metrics.jsonl")


def read_config(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The run's resolved ``config.yaml``."""
    import yaml

    path = Path(run_dir) / "config.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UserError(f"{path}: missing or unreadable ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a popmarl config (not a mapping)")
    return data


def read_summary(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``summary.json``, or None while the run has not ended."""
    try:
        data = json.loads((Path(run_dir) / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def plugin_tags() -> dict[str, str]:
    """``popmarl.<kind>.<name>`` -> ``"<distribution> <version>"`` for every installed
    component, and ``popmarl.plugins.<name>`` for every hook plugin."""
    import popmarl
    from popmarl.api import KINDS

    tags = {}
    for kind in KINDS:
        for name, entry in getattr(popmarl, kind).entries.items():
            tags[f"popmarl.{kind}.{name}"] = f"{entry.distribution} {entry.version}".strip()
    for ep in metadata.entry_points(group="popmarl.plugins"):
        dist = ep.dist
        tags[f"popmarl.plugins.{ep.name}"] = f"{dist.name} {dist.version}" if dist else "?"
    return tags


def run_tags(run_dir: str | os.PathLike[str], config: Mapping[str, Any]) -> dict[str, str]:
    """The tags of a run: seed, scenario, run directory and the installed plugins."""
    import popmarl

    scenario = config.get("scenario")
    return {
        "popmarl.seed": str(config.get("seed")),
        "popmarl.scenario": str(scenario.get("name") if isinstance(scenario, Mapping) else scenario),
        "popmarl.run_dir": str(Path(run_dir).resolve()),
        "popmarl.version": popmarl.__version__,
        **plugin_tags(),
    }


def catch_up(writer: RunWriter, run_dir: str | os.PathLike[str]) -> tuple[set[int], list[int]]:
    """Log the iterations of ``metrics.jsonl`` that MLflow lacks; return every iteration
    now logged, and the ones just logged."""
    logged = writer.logged_iterations()
    new = writer.log_iterations(read_metrics(run_dir), skip=logged)
    return logged | set(new), new


def tracker_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The params of the run's ``mlflow`` tracker, or ``{}`` when it had none."""
    for tracker in config.get("trackers") or ():
        if isinstance(tracker, Mapping) and tracker.get("name") == TRACKER_NAME:
            return dict(tracker.get("params") or {})
    return {}


@attrs.frozen(kw_only=True)
class SyncReport:
    """What :func:`sync` did."""

    tracking_uri: str
    experiment: str
    run: OpenedRun
    params: int
    iterations: int
    artifacts: int
    status: str | None


def sync(run_dir: str | os.PathLike[str], *, tracking_uri: str | None = None, experiment: str | None = None,
         limits: HttpLimits | None = None) -> SyncReport:
    """Upload everything in ``run_dir`` to its MLflow run (created if needed). Unset
    arguments come from the run's ``mlflow`` tracker params, else the defaults."""
    path = Path(run_dir)
    if not path.is_dir():
        raise UserError(f"{path}: no such run directory")
    config = read_config(path)
    params = tracker_params(config)
    given = tracking_uri or params.get("tracking_uri")
    problem = refused_store(given)
    if problem is not None:
        where = "--tracking-uri" if tracking_uri else f"{path / 'config.yaml'}: the mlflow tracker's tracking_uri"
        raise UserError(f"sync-mlflow {where}: {problem}; pass --tracking-uri sqlite:///PATH.db or a server")
    uri = resolve_tracking_uri(given, path)
    name = experiment or params.get("experiment") or DEFAULT_EXPERIMENT
    if limits is None:
        limits = HttpLimits(timeout_s=int(params.get("http_timeout_s", 10)),
                            retries=int(params.get("http_retries", 2)))
    with limited(limits):
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        opened = open_run(client, run_dir=path, uri=uri, experiment=name, run_name=params.get("run_name"))
        writer = RunWriter(client, opened.run_id)
        new_params = writer.log_config(config)
        writer.set_tags(run_tags(path, config))
        _, logged = catch_up(writer, path)
        artifacts = writer.log_artifacts(path, checkpoints=bool(params.get("log_checkpoints", True)))
        summary = read_summary(path)
        if summary is not None:
            writer.finish(summary)
    return SyncReport(tracking_uri=uri, experiment=name, run=opened, params=new_params, iterations=len(logged),
                      artifacts=artifacts, status=None if summary is None else summary.get("status"))
