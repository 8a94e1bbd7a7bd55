"""Idempotent writes of one popmarl run's content into one MLflow run.

Each method can be called again (after an outage, on resume, by ``sync-mlflow``) without
duplicating anything: params already there are kept, iterations already logged (the
steps of the ``iteration`` metric) are skipped, artifacts are overwritten in place and
frozen policy checkpoints already uploaded are not sent again.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from popmarl_mlflow.connection import RECORD_FILE
from popmarl_mlflow.flatten import MAX_TAG_VALUE, config_params, metric_values, mlflow_name, truncate

if TYPE_CHECKING:
    from mlflow import MlflowClient

#: popmarl's run status -> MLflow's.
RUN_STATUS = {"completed": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}
#: The metric whose steps say which iterations are logged; sent last in its batch.
MARKER = "iteration"
_BATCH = 1000  # MLflow's limit of metrics per log_batch request


class RunWriter:
    """Writes into the MLflow run ``run_id`` through ``client``."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def log_config(self, config: Mapping[str, Any]) -> int:
        """Log the flattened config as params; a value that differs from the param already
        logged (``stopping`` or ``trackers`` changed on resume) goes to the tag
        ``popmarl.config.<key>``. Returns the number of new params."""
        from mlflow.entities import Param

        existing = self.client.get_run(self.run_id).data.params
        params = config_params(config)
        new = {k: v for k, v in params.items() if k not in existing}
        changed = {f"popmarl.config.{k}": v for k, v in params.items() if k in existing and existing[k] != v}
        self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in new.items()])
        self.set_tags(changed)
        return len(new)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        batch = [RunTag(mlflow_name(k), truncate(str(v), MAX_TAG_VALUE)) for k, v in tags.items()]
        self.client.log_batch(self.run_id, tags=batch)

    def logged_iterations(self) -> set[int]:
        """The iterations whose metrics are in MLflow."""
        return {int(m.step) for m in self.client.get_metric_history(self.run_id, MARKER)}

    def log_iterations(self, lines: Iterable[Mapping[str, Any]], *, skip: Iterable[int] = ()) -> list[int]:
        """Log each metrics line (``step`` = its ``iteration``) not in ``skip``, whole
        iterations per request so an iteration is logged entirely or not at all.
        Returns the iterations logged."""
        from mlflow.entities import Metric

        done = set(skip)
        batch: list[Metric] = []
        logged: list[int] = []
        now = int(time.time() * 1000)
        for line in lines:
            step = line.get(MARKER)
            if not isinstance(step, int) or step in done:
                continue
            values = metric_values(line)
            values[MARKER] = values.pop(MARKER, float(step))  # the marker last
            points = [Metric(key, value, now, step) for key, value in values.items()]
            if batch and len(batch) + len(points) > _BATCH:
                self._send(batch)
                batch = []
            batch.extend(points)
            done.add(step)
            logged.append(step)
        self._send(batch)
        return logged

    def _send(self, metrics: Sequence[Any]) -> None:
        if metrics:
            self.client.log_batch(self.run_id, metrics=list(metrics))

    def log_artifacts(self, run_dir: str | Path, *, checkpoints: bool = True) -> int:
        """Upload the run directory's top-level files (config, summary, metrics, payoffs,
        plots, final policy...) and, with ``checkpoints``, the frozen policies under
        ``checkpoints/policies``. Returns the number of files sent."""
        root = Path(run_dir)
        sent = 0
        for path in sorted(root.iterdir()):
            if path.is_file() and not path.name.startswith(".") and path.name != RECORD_FILE:
                self.client.log_artifact(self.run_id, str(path))
                sent += 1
        policies = root / "checkpoints" / "policies"
        if checkpoints and policies.is_dir():
            for population in sorted(p for p in policies.iterdir() if p.is_dir()):
                sent += self._log_new_files(population, f"checkpoints/policies/{population.name}")
        return sent

    def _log_new_files(self, folder: Path, artifact_path: str) -> int:
        """Upload the files of ``folder`` not yet in ``artifact_path`` (same name and size)."""
        there = {Path(f.path).name: f.file_size for f in self.client.list_artifacts(self.run_id, artifact_path)}
        sent = 0
        for path in sorted(folder.iterdir()):
            if path.is_file() and not path.name.startswith(".") and there.get(path.name) != path.stat().st_size:
                self.client.log_artifact(self.run_id, str(path), artifact_path)
                sent += 1
        return sent

    def mark_running(self) -> None:
        self.client.update_run(self.run_id, status="RUNNING")

    def finish(self, summary: Mapping[str, Any]) -> None:
        """Tag the run's status and stop reason and end the MLflow run with that status."""
        status = str(summary.get("status", "failed"))
        self.set_tags({"popmarl.status": status, "popmarl.stop_reason": str(summary.get("stop_reason", ""))})
        self.client.set_terminated(self.run_id, status=RUN_STATUS.get(status, "FAILED"))
