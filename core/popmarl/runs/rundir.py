"""The run directory and its checkpoints (``docs/run_format.md`` describes every file).

Layout: ``config.yaml``, ``summary.json``, ``metrics.jsonl``, ``payoffs.npz``,
``checkpoints/``, and ``log.txt`` where the run raised Python warnings. A checkpoint is
committed by atomically replacing ``checkpoints/state.json``; everything it references
(frozen policies, the iteration's arrays, its lines of ``metrics.jsonl``, its payoff
table) is written before it, so a kill at any point leaves the last commit intact.

No file repeats another (format 2): the checkpoint's history is the first
``history_length`` lines of ``metrics.jsonl``; its payoff table is ``payoffs.npz``
itself; a learner whose weights are those of a frozen policy names that policy; every
array is deflated. Runs of format 1 (a ``checkpoints/history.jsonl`` copy of the metrics,
the table in the iteration's arrays) still read and resume; their next commit is of
format 2.
"""

from __future__ import annotations

import hashlib
import itertools
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
from popmarl.data.atomic import FAST_DEFLATE_LEVEL, json_default, write_bytes, write_json, write_npz, write_text
from popmarl.errors import CheckpointError, ConfigError, ResumeError, UserError
from popmarl.gametheory.payoffs import stored_digest
from popmarl.runs.interrupts import uninterrupted
from popmarl.data.learners import LearnerState
from popmarl.data.policies import Weights
from popmarl.runs.warning_log import LOG_FILE

_FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
RUN_FILES = ("config.yaml", "summary.json", "metrics.jsonl", "payoffs.npz", "checkpoints")
#: The format of the checkpoints written (``state.json``'s ``format``).
FORMAT = 2
#: The formats read (and resumed).
READ_FORMATS = (1, 2)
#: The arrays of a payoff table's file (``payoffs.npz``) besides each axis's ``policy_ids_<k>``.
_TABLE_KEYS = ("payoffs", "filled", "agents", "digest")


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
        #: The metrics lines the last commit wrote, which :meth:`append_metrics` then finds there.
        self._committed_lines: list[str] = []
        #: Frozen policies saved by this session, by :func:`weights_digest` (a learner
        #: whose weights are one of them names it in place of a copy).
        self._policy_digests: dict[str, str] = {}
        #: The last commit's learners that hold their own ``weights.npz``: digest, population, directory.
        self._own_weights: list[tuple[str, str, Path]] = []

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
        """Write a frozen policy's weights (once; policies never change, but for a league's
        ``<population>/main``), deflated: a run keeps every policy, and tables such as
        tabular policies' information-state keys shrink 40-fold (Leduc: 220 KB to 5 KB a
        policy). Lossless, so resuming is exact."""
        path = self._policy_file(policy_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        with uninterrupted():  # a stop signal waits until the file is whole, as in a commit
            write_npz(path, weights)
        digest = weights_digest(weights)
        if _frozen(policy_id):
            self._policy_digests.setdefault(digest, policy_id)
        self._name_in_learners(policy_id, digest)

    def _name_in_learners(self, policy_id: str, digest: str) -> None:
        """Have the last commit's learners of ``policy_id``'s population whose weights are
        ``policy_id``'s (a snapshot, or a league's main agent, saved after the commit)
        name it in place of their copy. Safe for a league's main agent too, which is
        rewritten: only after the next commit, whose learners do not name it, replaced
        this one; until then each learner names a file that holds its weights (the
        digest is checked on load)."""
        population = policy_id.rsplit("/", 1)[0]
        for learner_digest, learner_population, where in self._own_weights:
            if learner_digest == digest and learner_population == population:
                meta = json.loads((where / "learner.json").read_text(encoding="utf-8"))
                write_json(where / "learner.json", {**meta, "weights_policy": policy_id, "weights_digest": digest})
                (where / "weights.npz").unlink(missing_ok=True)
        self._own_weights = [w for w in self._own_weights if (w[0], w[1]) != (digest, population)]

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
    #: Format 1's copy of the committed metrics lines (format 2 reads ``metrics.jsonl``).
    history_file = property(lambda self: self.path / "checkpoints" / "history.jsonl")

    def commit(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
               new_history: Sequence[Mapping[str, Any]] = (),
               learners: Mapping[str, LearnerState] | None = None) -> Path:
        """Write the iteration's arrays, learner states and new history lines (appended to
        ``metrics.jsonl``), then atomically point ``state.json`` at them: the checkpoint
        holds ``state["history_length"]`` lines of ``metrics.jsonl``, and the ``learners``
        given (read back by :meth:`load_learners`). Arrays holding a whole payoff table's
        file (:func:`popmarl.scenario.meta_game.table_arrays` of a table that knows its
        policy ids) are committed as ``payoffs.npz``, not copied into the checkpoint."""
        with uninterrupted():  # a stop signal waits until the checkpoint is whole
            return self._commit(state, arrays, new_history, learners)

    def _commit(self, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                new_history: Sequence[Mapping[str, Any]], learners: Mapping[str, LearnerState] | None) -> Path:
        iteration = int(state["iteration"])
        name = f"iter-{iteration:06d}.npz"
        table = _table_of(arrays)
        write_npz(self.checkpoints / name, {k: v for k, v in arrays.items() if table is None or k not in table})
        extra: dict[str, Any] = {}
        if table is not None:  # written under its own name first: state.json names the table it commits
            pending = f"payoffs-{iteration:06d}.npz"
            write_npz(self.checkpoints / pending, table, level=FAST_DEFLATE_LEVEL)
            extra["payoffs"] = {"file": pending, "digest": str(table["digest"])}
        if learners:
            extra["learners"] = self._save_learners(f"learners-{iteration:06d}", learners)
        lines = [json.dumps(h, default=json_default) for h in new_history]
        if lines:
            with open(self.metrics_file, "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
                f.flush()
                os.fsync(f.fileno())
        write_json(self.state_file, {"format": FORMAT, **state, "arrays": name, **extra})
        self._committed_lines = lines
        if table is not None:
            os.replace(self.checkpoints / extra["payoffs"]["file"], self.payoffs_file)
        self._remove_uncommitted(name, extra.get("learners"))
        return self.checkpoints

    def _remove_uncommitted(self, arrays: str, learners: str | None) -> None:
        """Remove what no checkpoint names any more: older iterations' arrays and learner
        states, a payoff table a kill left under its own name, format 1's history copy."""
        for old in self.checkpoints.glob("iter-*.npz"):
            if old.name != arrays:
                old.unlink(missing_ok=True)
        for old in self.checkpoints.glob("payoffs-*.npz"):
            old.unlink(missing_ok=True)
        for old in self.checkpoints.glob("learners-*"):
            if old.name != learners:
                shutil.rmtree(old, ignore_errors=True)
        self.history_file.unlink(missing_ok=True)

    # -- learner states -------------------------------------------------------------
    def _save_learners(self, name: str, learners: Mapping[str, LearnerState]) -> str:
        """Each learner's state under ``checkpoints/<name>/<key>/``: ``weights.npz`` (or,
        where they are a frozen policy's, that policy's id in ``learner.json``; see also
        :meth:`_name_in_learners`), a team's
        other members' ``member-<k>.npz``, its trainer's files in ``trainer/`` and
        ``learner.json`` naming them; return ``name``."""
        root = self.checkpoints / name
        shutil.rmtree(root, ignore_errors=True)  # what an interrupted commit left
        self._own_weights = []
        for key, learner in learners.items():
            if not _FILE_NAME.fullmatch(key):
                raise ValueError(f"learner key {key!r}: may use only letters, digits, _ . - (it names a directory)")
            where = root / key
            (where / "trainer").mkdir(parents=True)
            digest = weights_digest(learner.weights)
            policy = self._frozen_policy_with(learner.population, digest)
            if policy is None:
                write_npz(where / "weights.npz", learner.weights)
                self._own_weights.append((digest, learner.population, where))
            for file, data in learner.trainer.items():
                if not _FILE_NAME.fullmatch(file):
                    raise ValueError(f"learner {key}: trainer state file name {file!r} may use only letters, "
                                     "digits, _ . -")
                write_bytes(where / "trainer" / file, data)
            for k, weights in enumerate(learner.members.values()):
                write_npz(where / f"member-{k}.npz", weights)
            weights_of = {} if policy is None else {"weights_policy": policy, "weights_digest": digest}
            write_json(where / "learner.json", {"key": key, "population": learner.population, "seed": learner.seed,
                                                "trainer": sorted(learner.trainer), "members": list(learner.members),
                                                **weights_of})
        return name

    def _frozen_policy_with(self, population: str, digest: str) -> str | None:
        """The id of a frozen policy of ``population`` this session saved with weights of
        ``digest``, if any."""
        policy = self._policy_digests.get(digest)
        return policy if policy is not None and policy.rsplit("/", 1)[0] == population else None

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
                                                     weights=self._learner_weights(where, meta), members=members)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{root}: corrupt learner checkpoint ({exc.__class__.__name__}: {exc})") from None
        if not learners:
            raise CheckpointError(f"{root}: missing learner checkpoint")
        return learners

    def _learner_weights(self, where: Path, meta: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """A learner's weights: its ``weights.npz``, or the frozen policy ``learner.json``
        names, checked against the digest it records."""
        policy = meta.get("weights_policy")
        if policy is None:
            return self.read_weights(where / "weights.npz")
        weights = self.load_policy(str(policy))
        if weights_digest(weights) != meta.get("weights_digest"):
            raise CheckpointError(f"{where / 'learner.json'}: policy {policy}'s weights are not the learner's")
        return weights

    def load_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The last committed state (with its ``history`` lines) and its arrays (with the
        payoff table's, where ``payoffs.npz`` holds them)."""
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{self.state_file}: corrupt checkpoint state ({exc})") from None
        if not isinstance(state, dict) or state.get("format") not in READ_FORMATS or "arrays" not in state:
            formats = " or ".join(str(f) for f in READ_FORMATS)
            raise CheckpointError(f"{self.state_file}: not a popmarl checkpoint of format {formats}")
        arrays = self._read_arrays(self.checkpoints / str(state["arrays"]), "checkpoint arrays")
        if "payoffs" in state:
            arrays.update(self._read_arrays(self._committed_table(state["payoffs"]), "payoff table"))
        history_file = self.history_file if state["format"] == 1 else self.metrics_file
        state["history"] = self._read_history(history_file, int(state.get("history_length", 0)))
        return state, arrays

    @staticmethod
    def _read_arrays(path: Path, what: str) -> dict[str, np.ndarray]:
        try:
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"{path}: corrupt or missing {what} ({exc})") from None

    def _committed_table(self, entry: Any) -> Path:
        """The file holding the payoff table a checkpoint commits (``entry``: its ``file``
        and ``digest``): ``payoffs.npz``, or, where a kill came between the commit and
        its renaming to ``payoffs.npz``, the file under the name it was written as."""
        if not isinstance(entry, dict) or not {"file", "digest"} <= set(entry):
            raise CheckpointError(f"{self.state_file}: corrupt checkpoint state (payoffs: {entry!r})")
        for path in (self.payoffs_file, self.checkpoints / str(entry["file"])):
            if stored_digest(path) == entry["digest"]:
                return path
        raise CheckpointError(f"{self.payoffs_file}: does not hold the payoff table of the checkpoint")

    def _read_history(self, path: Path, length: int) -> list[dict[str, Any]]:
        """The first ``length`` lines of ``path`` (later ones are uncommitted)."""
        if length == 0:
            return []
        try:
            with open(path, encoding="utf-8") as f:
                history = [json.loads(line) for line in itertools.islice(f, length)]
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{path}: corrupt checkpoint history ({exc})") from None
        if len(history) != length:
            raise CheckpointError(f"{path}: truncated ({len(history)} of {length} lines)")
        return history

    def truncate_history(self, history: Sequence[Mapping[str, Any]]) -> None:
        """Drop what an interrupted iteration left past the checkpoint before a resumed run
        goes on: metrics lines it did not commit (:meth:`restore_metrics`), and finish a
        commit whose payoff table a kill left under its own name (renamed to ``payoffs.npz``)."""
        self.restore_metrics(history)
        try:
            entry = json.loads(self.state_file.read_text(encoding="utf-8")).get("payoffs")
        except (OSError, ValueError, AttributeError):
            return
        if isinstance(entry, dict) and isinstance(entry.get("file"), str):
            pending = self.checkpoints / entry["file"]
            if pending.is_file() and stored_digest(pending) == entry.get("digest"):
                os.replace(pending, self.payoffs_file)

    def append_metrics(self, line: Mapping[str, Any]) -> None:
        """Add one completed iteration's line to ``metrics.jsonl``, unless the last commit
        wrote it there (as its history)."""
        text = json.dumps(line, default=json_default)
        if text in self._committed_lines:
            self._committed_lines.remove(text)
            return
        with open(self.metrics_file, "a", encoding="utf-8") as f:
            f.write(text + "\n")

    def restore_metrics(self, history: Sequence[Mapping[str, Any]]) -> None:
        """Rewrite ``metrics.jsonl`` as exactly the committed iterations' lines."""
        self._committed_lines = []
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


def weights_digest(weights: Mapping[str, Any]) -> str:
    """A SHA-256 of a policy's weights: each array's name, dtype, shape and bytes."""
    digest = hashlib.sha256()
    for key in sorted(weights):
        value = np.ascontiguousarray(weights[key])
        digest.update(f"{key}:{value.dtype.str}:{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _frozen(policy_id: str) -> bool:
    """Whether ``policy_id`` names a frozen policy (``<population>/<index>``), never rewritten."""
    return policy_id.rsplit("/", 1)[-1].isdigit()


def _table_of(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The arrays of a whole payoff table's file among ``arrays`` (see
    :meth:`~popmarl.gametheory.payoffs.PayoffTable.file_arrays`), or None."""
    if not all(k in arrays for k in _TABLE_KEYS):
        return None
    keys = [*_TABLE_KEYS, *(f"policy_ids_{k}" for k in range(len(arrays["agents"])))]
    return {k: v for k, v in arrays.items() if k in keys} if all(k in arrays for k in keys) else None
