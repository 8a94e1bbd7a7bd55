"""The run directory and its checkpoints.

Layout: ``config.yaml``, ``summary.json``, ``metrics.jsonl``, ``payoffs.npz``,
``checkpoints/``, and ``log.txt`` where the run raised Python warnings. A checkpoint is
committed by atomically replacing ``checkpoints/state.json``; everything it references
(frozen policies, the iteration's arrays) is written before it, so a kill at any point
leaves the last commit intact.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from popmarl.config.loading import differences
from popmarl.data.atomic import json_default, write_bytes, write_json, write_npz, write_text
from popmarl.errors import CheckpointError, ConfigError, ResumeError, UserError
from popmarl.runs.interrupts import uninterrupted
from popmarl.data.learners import LearnerState
from popmarl.data.policies import Weights
from popmarl.runs.warning_log import LOG_FILE

_FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
RUN_FILES = ("config.yaml", "summary.json", "metrics.jsonl", "payoffs.npz", "checkpoints")
FORMAT = 1


def _readable_json(value: Any, indent: str = "") -> str:
    """JSON indented like ``json.dumps(indent=2)``, but a list of plain values on one line."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = ",\n".join(f"{inner}{json.dumps(k)}: {_readable_json(v, inner)}" for k, v in value.items())
        return "{\n" + items + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(inner + _readable_json(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value)


class RunDirectory:
    """Reads and writes one run's directory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    config_file = property(lambda self: self.path / "config.yaml")
    summary_file = property(lambda self: self.path / "summary.json")
    metrics_file = property(lambda self: self.path / "metrics.jsonl")
    payoffs_file = property(lambda self: self.path / "payoffs.npz")
    checkpoints = property(lambda self: self.path / "checkpoints")
    state_file = property(lambda self: self.path / "checkpoints" / "state.json")
    #: Python warnings raised during the run (:mod:`popmarl.runs.warning_log`); only there if any were.
    log_file = property(lambda self: self.path / LOG_FILE)

    @classmethod
    def check_new(cls, path: str | os.PathLike[str]) -> RunDirectory:
        """Refuse a directory that is a file or already holds a run (nothing is written).
        The messages name the command line's flags and ``popmarl.run``'s keywords alike."""
        run = cls(path)
        if run.path.exists() and not run.path.is_dir():
            raise UserError(f"--out / out= {run.path}: exists and is not a directory")
        if run.path.is_dir() and any((run.path / name).exists() for name in RUN_FILES):
            raise UserError(f"--out / out= {run.path}: already holds a run; continue it with --resume {run.path} "
                            f"(popmarl.run(config, resume={str(run.path)!r})), or choose another directory")
        return run

    def create(self, config_yaml: str) -> None:
        """Make the directory and write the resolved config (first, so a kill before it is
        complete leaves a directory ``--out`` accepts again)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--out / out= {self.path}: cannot create ({exc.strerror})") from None
        write_text(self.config_file, config_yaml)
        (self.checkpoints / "policies").mkdir(parents=True, exist_ok=True)

    #: The top-level keys a resumed run may change (said on stdout when it does).
    RESUME_MAY_CHANGE = ("stopping", "trackers")

    def read_config(self) -> dict[str, Any]:
        """The run's saved (resolved) ``config.yaml``; a ResumeError if this is no run."""
        if not self.path.is_dir():
            raise ResumeError(f"--resume {self.path}: no such run directory")
        if not self.config_file.is_file():
            raise ResumeError(f"--resume {self.path}: not a run directory (no config.yaml)")
        try:
            saved = yaml.safe_load(self.config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ResumeError(f"--resume {self.path}: config.yaml is unreadable ({exc.__class__.__name__})") from None
        if not isinstance(saved, dict):
            raise ResumeError(f"--resume {self.path}: config.yaml is not a mapping")
        return saved

    @classmethod
    def check_resume(cls, path: str | os.PathLike[str], config: Mapping[str, Any],
                     resolve: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                     ) -> tuple[RunDirectory, list[str]]:
        """Open a run to continue with ``config``, which must match the saved config except
        in :attr:`RESUME_MAY_CHANGE`; return it and those changes, as lines like
        ``stopping.max_iterations 10 -> 50``. ``resolve`` resolves the saved config as
        ``config`` was (defaults filled in), so a key added since the run was made, at its
        default, is no difference. A run killed before its first checkpoint has no
        :attr:`state_file`: it starts again from the beginning."""
        run = cls(path)
        saved = run.read_config()
        if resolve is not None:
            try:
                saved = dict(resolve(saved))
            except ConfigError:  # compared as written: the difference says what changed
                pass
        changed = differences(saved, config)
        different = [k for k in changed if k.split(".")[0] not in cls.RESUME_MAY_CHANGE]
        if different:
            raise ResumeError(
                f"--resume {run.path}: the run was made by a different config "
                f"(differs in: {', '.join(different)}); only stopping and trackers may change"
            )
        return run, [f"{k} {json.dumps(a, default=json_default)} -> {json.dumps(b, default=json_default)}"
                     for k, (a, b) in changed.items()]

    def update_config(self, config_yaml: str) -> None:
        write_text(self.config_file, config_yaml)

    # -- policies -----------------------------------------------------------------
    def _policy_file(self, policy_id: str) -> Path:
        population, index = policy_id.rsplit("/", 1)
        return self.checkpoints / "policies" / population / f"{index}.npz"

    def save_policy(self, policy_id: str, weights: Weights) -> None:
        """Write a frozen policy's weights (once; policies never change), deflated: a run
        keeps every policy, and tables such as tabular policies' information-state keys
        shrink 40-fold (Leduc: 220 KB to 5 KB a policy). Lossless, so resuming is exact."""
        path = self._policy_file(policy_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        with uninterrupted():  # a stop signal waits until the file is whole, as in a commit
            write_npz(path, weights, compress=True)

    def load_policy(self, policy_id: str) -> dict[str, np.ndarray]:
        return self.read_weights(self._policy_file(policy_id))

    @staticmethod
    def read_weights(path: Path) -> dict[str, np.ndarray]:
        """A policy's weights from an ``.npz`` file, without unpickling anything."""
        try:
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"{path}: corrupt or missing policy checkpoint ({exc})") from None

    # -- iteration state ------------------------------------------------------------
    history_file = property(lambda self: self.path / "checkpoints" / "history.jsonl")

    def commit(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
               new_history: Sequence[Mapping[str, Any]] = (),
               learners: Mapping[str, LearnerState] | None = None) -> Path:
        """Write the iteration's arrays, learner states and history lines, then atomically
        point ``state.json`` at them: the checkpoint holds ``state["iteration"]`` history
        lines, and the ``learners`` given (read back by :meth:`load_learners`)."""
        with uninterrupted():  # a stop signal waits until the checkpoint is whole
            return self._commit(state, arrays, new_history, learners)

    def _commit(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                new_history: Sequence[Mapping[str, Any]], learners: Mapping[str, LearnerState] | None) -> Path:
        iteration = int(state["iteration"])
        name = f"iter-{iteration:06d}.npz"
        write_npz(self.checkpoints / name, arrays)
        extra: dict[str, Any] = {}
        if learners:
            extra["learners"] = self._save_learners(f"learners-{iteration:06d}", learners)
        if new_history:
            with open(self.history_file, "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(h, default=json_default) + "\n" for h in new_history))
                f.flush()
                os.fsync(f.fileno())
        write_json(self.state_file, {"format": FORMAT, **state, "arrays": name, **extra})
        for old in self.checkpoints.glob("iter-*.npz"):
            if old.name != name:
                old.unlink(missing_ok=True)
        for old in self.checkpoints.glob("learners-*"):
            if old.name != extra.get("learners"):
                shutil.rmtree(old, ignore_errors=True)
        return self.checkpoints

    # -- learner states -------------------------------------------------------------
    def _save_learners(self, name: str, learners: Mapping[str, LearnerState]) -> str:
        """Each learner's state under ``checkpoints/<name>/<key>/``: ``weights.npz``, a
        team's other members' ``member-<k>.npz``, its trainer's files in ``trainer/`` and
        ``learner.json`` naming them; return ``name``."""
        root = self.checkpoints / name
        shutil.rmtree(root, ignore_errors=True)  # what an interrupted commit left
        for key, learner in learners.items():
            if not _FILE_NAME.fullmatch(key):
                raise ValueError(f"learner key {key!r}: may use only letters, digits, _ . - (it names a directory)")
            where = root / key
            (where / "trainer").mkdir(parents=True)
            write_npz(where / "weights.npz", learner.weights)
            for file, data in learner.trainer.items():
                if not _FILE_NAME.fullmatch(file):
                    raise ValueError(f"learner {key}: trainer state file name {file!r} may use only letters, "
                                     "digits, _ . -")
                write_bytes(where / "trainer" / file, data)
            for k, weights in enumerate(learner.members.values()):
                write_npz(where / f"member-{k}.npz", weights)
            write_json(where / "learner.json", {"key": key, "population": learner.population, "seed": learner.seed,
                                                "trainer": sorted(learner.trainer), "members": list(learner.members)})
        return name

    def load_learners(self, state: Mapping[str, Any]) -> dict[str, LearnerState]:
        """The learner states a checkpoint (``state``, from :meth:`load_state`) holds, by key."""
        name = state.get("learners")
        if name is None:
            return {}
        root = self.checkpoints / str(name)
        learners = {}
        try:
            for meta_file in sorted(root.glob("*/learner.json")):
                meta = json.loads(meta_file.read_text(encoding="utf-8"))
                where = meta_file.parent
                trainer = {file: (where / "trainer" / file).read_bytes() for file in meta["trainer"]}
                # Written before teams existed: no members.
                members = {str(p): self.read_weights(where / f"member-{k}.npz")
                           for k, p in enumerate(meta.get("members", []))}
                learners[meta["key"]] = LearnerState(key=meta["key"], population=meta["population"],
                                                     seed=int(meta["seed"]), trainer=trainer,
                                                     weights=self.read_weights(where / "weights.npz"),
                                                     members=members)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{root}: corrupt learner checkpoint ({exc.__class__.__name__}: {exc})") from None
        if not learners:
            raise CheckpointError(f"{root}: missing learner checkpoint")
        return learners

    def load_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The last committed state and its arrays."""
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{self.state_file}: corrupt checkpoint state ({exc})") from None
        if not isinstance(state, dict) or state.get("format") != FORMAT or "arrays" not in state:
            raise CheckpointError(f"{self.state_file}: not a popmarl checkpoint of format {FORMAT}")
        path = self.checkpoints / str(state["arrays"])
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"{path}: corrupt or missing checkpoint arrays ({exc})") from None
        state["history"] = self._read_history(int(state.get("history_length", 0)))
        return state, arrays

    def _read_history(self, length: int) -> list[dict[str, Any]]:
        """The first ``length`` committed history lines (later ones are uncommitted)."""
        if length == 0:
            return []
        try:
            lines = self.history_file.read_text(encoding="utf-8").splitlines()[:length]
            history = [json.loads(line) for line in lines]
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{self.history_file}: corrupt checkpoint history ({exc})") from None
        if len(history) != length:
            raise CheckpointError(f"{self.history_file}: truncated ({len(history)} of {length} lines)")
        return history

    def truncate_history(self, history: Sequence[Mapping[str, Any]]) -> None:
        """Drop uncommitted history lines (before continuing a resumed run)."""
        write_text(self.history_file, "".join(json.dumps(h, default=json_default) + "\n" for h in history))

    def append_metrics(self, line: Mapping[str, Any]) -> None:
        """Add one completed iteration's line to ``metrics.jsonl``."""
        with open(self.metrics_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, default=json_default) + "\n")

    def restore_metrics(self, history: list[Mapping[str, Any]]) -> None:
        """Rewrite ``metrics.jsonl`` as exactly the committed iterations' lines."""
        write_text(self.metrics_file, "".join(json.dumps(h, default=json_default) + "\n" for h in history))

    #: The summary's keys that hold a list per policy: written last, after the headline figures.
    SUMMARY_LAST = ("populations", "meta_strategies")

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        """Write ``summary.json`` for a reader: single values first, then structures, the
        per-policy lists (:attr:`SUMMARY_LAST`) last, each list of plain values on one line."""
        order = sorted(summary, key=lambda k: (isinstance(summary[k], (Mapping, list)), k in self.SUMMARY_LAST))
        plain = json.loads(json.dumps({k: summary[k] for k in order}, default=json_default))
        write_text(self.summary_file, _readable_json(plain) + "\n")

    def read_summary(self) -> dict[str, Any]:
        try:
            return json.loads(self.summary_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"{self.summary_file}: missing or unreadable ({exc.__class__.__name__})") from None
