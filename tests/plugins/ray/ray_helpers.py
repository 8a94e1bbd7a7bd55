"""Helpers of the ray backend tests: run configs, a tiny learning algorithm that needs no
torch, and a backend that kills or freezes its own actors on cue."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any

import attrs
import numpy as np
import ray

import popmarl
from popmarl.interfaces.algorithm import Algorithm, PolicySpace, TrainerContext
from popmarl.builtin.exact_matrix_br import ExactMatrixBR, ExactMatrixBRConfig
from popmarl.config.schema import validate
from popmarl.errors import CheckpointError
from popmarl.interfaces.policy import ExplicitPolicy, masked_uniform, sample_rows
from popmarl.data.episodes import Episode, Observations
from popmarl.data.tasks import (
    BestResponseResult,
    BestResponseTask,
    EvalResult,
    EvalTask,
    TrainResult,
    TrainTask,
)
from popmarl.interfaces.spaces import Discrete
from popmarl.interfaces.trainer import Trainer, TrainerState
from popmarl_ray import RayBackend
from popmarl_ray.servers import EpisodeServerActor

# Classes of this module reach the Ray actors by value (the workers cannot import it).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: Ray's worker processes on this machine (the session fixture's local Ray).
NUM_CPUS = 2
#: Double oracle on a random 8x8 zero-sum matrix game: exact oracle, exact evaluation.
MATRIX_EXACT: dict[str, Any] = {
    "env": {"name": "matrix", "params": {"game": "random_zero_sum", "size": 8, "seed": 3}},
    "algorithm": {"name": "exact_matrix_br"},
    "solver": {"name": "uniform"},
    "stopping": {"max_iterations": 3},
    "trackers": [],
}


def installed(kind: str, name: str) -> bool:
    """Whether an entry point registers component ``name`` of ``kind``."""
    return any(ep.name == name for ep in metadata.entry_points(group=f"popmarl.{kind}"))


def ray_backend(**params: Any) -> dict[str, Any]:
    """The backend section for the ray backend with ``params``."""
    return {"name": "ray", "params": {"num_rollout_workers": 2, **params}}


def run(config: Mapping[str, Any], out: Any) -> dict[str, Any]:
    """Run a raw config in-process."""
    return popmarl.run(validate(dict(config)), out=str(out))


# -- a learning algorithm without torch: an epsilon-greedy bandit per population ------------
class BanditPolicy(ExplicitPolicy):
    """Greedy on its action-value estimates (ties split), epsilon-greedy when exploring."""

    def __init__(self, n_actions: int, epsilon: float = 0.2) -> None:
        self.q = np.zeros(n_actions)
        self.n = np.zeros(n_actions)
        self.epsilon = epsilon

    def probabilities(self, batch: Observations) -> np.ndarray:
        best = (self.q == self.q.max()).astype(float)
        probs = np.broadcast_to(best / best.sum(), (len(batch), self.q.size)).copy()
        if batch.mask is not None:
            probs = probs * batch.mask
        return probs / probs.sum(axis=1, keepdims=True)

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        probs = self.probabilities(batch)
        if explore:
            uniform = masked_uniform(batch.mask, len(batch), self.q.size)
            probs = (1 - self.epsilon) * probs + self.epsilon * uniform
        return sample_rows(probs, rng)

    def get_weights(self) -> Mapping[str, np.ndarray]:
        return {"q": self.q.copy(), "n": self.n.copy()}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        self.q, self.n = np.array(weights["q"], float), np.array(weights["n"], float)


class BanditTrainer(Trainer):
    """Running mean of the return of each first action. Its whole state (means and
    counts) is the policy's weights, so its own state is empty."""

    def __init__(self, policy: BanditPolicy) -> None:
        self.policy = policy

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        for episode in episodes:
            a = int(np.asarray(episode.actions).reshape(-1)[0])
            self.policy.n[a] += 1
            self.policy.q[a] += (episode.episode_return - self.policy.q[a]) / self.policy.n[a]
        return {"episodes": float(len(episodes))}

    def state(self) -> TrainerState:
        return {}

    def load_state(self, state: TrainerState) -> None:
        if state:
            raise CheckpointError(f"trainer state: the bandit trainer keeps no files, got {sorted(state)}")


class Bandit(Algorithm):
    """``bandit``: a learning algorithm for one-shot matrix games (test only). Off-policy:
    the mean return of each action does not depend on the policy that chose it."""

    learns = True
    on_policy = False

    def make_policy(self, *, space: PolicySpace, seed: int) -> BanditPolicy:
        assert isinstance(space.action_space, Discrete)
        return BanditPolicy(space.action_space.n)

    def make_trainer(self, *, policy: Any, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        return BanditTrainer(policy)


class FailingPolicy(BanditPolicy):
    """Fails whenever it plays greedily (payoff evaluation), never while exploring."""

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if not explore:
            raise RuntimeError("boom\nsecond line of a long remote traceback")
        return super().act(batch, explore=explore, rng=rng)


class FailingBandit(Bandit):
    """``bandit`` whose policies cannot be evaluated (test only)."""

    def make_policy(self, *, space: PolicySpace, seed: int) -> FailingPolicy:
        assert isinstance(space.action_space, Discrete)
        return FailingPolicy(space.action_space.n)


# -- plugins with a bug: each call is noted in a file, so a test counts them over every process ----
#: The test session's own process (the actors see this value: the module is pickled by value).
DRIVER_PID = os.getpid()


def tally(path: str) -> None:
    """Note one call in the file ``path`` (a line per call, from whichever process)."""
    with open(path, "a", encoding="utf-8") as calls:
        calls.write(f"{os.getpid()}\n")


def tallied(path: Any) -> int:
    """How many calls :func:`tally` noted in ``path``."""
    return len(open(path, encoding="utf-8").read().splitlines()) if os.path.exists(path) else 0


def mean_return(episodes: Sequence[Episode]) -> float:
    """A plugin's bug: a TypeError on every call."""
    total = sum(e.episode_return for e in episodes)
    return total / "episodes"  # type: ignore[operator]


class BuggyTrainer(BanditTrainer):
    """A bandit trainer whose ``update`` raises a TypeError (noting each call in ``calls``)."""

    def __init__(self, policy: BanditPolicy, calls: str) -> None:
        super().__init__(policy)
        self.calls = calls

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        tally(self.calls)
        return {"mean_return": mean_return(episodes)}


@attrs.frozen(kw_only=True)
class TallyConfig:
    """``calls``: the file each call of the failing method is noted in."""

    calls: str = ""


class BuggyBandit(Bandit):
    """``bandit`` with a :class:`BuggyTrainer` (test only)."""

    Config = TallyConfig

    def make_trainer(self, *, policy: Any, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        return BuggyTrainer(policy, self.config.calls)


class TalliedFailingPolicy(FailingPolicy):
    """:class:`FailingPolicy`, noting in ``calls`` each greedy ``act`` (each one fails)."""

    def __init__(self, n_actions: int, calls: str) -> None:
        super().__init__(n_actions)
        self.calls = calls

    def act(self, batch: Observations, *, explore: bool, rng: np.random.Generator) -> np.ndarray:
        if not explore:
            tally(self.calls)
        return super().act(batch, explore=explore, rng=rng)


class TalliedFailingBandit(Bandit):
    """``bandit`` whose policies fail in payoff evaluation, noting each failure in ``calls``."""

    Config = TallyConfig

    def make_policy(self, *, space: PolicySpace, seed: int) -> TalliedFailingPolicy:
        assert isinstance(space.action_space, Discrete)
        return TalliedFailingPolicy(space.action_space.n, self.config.calls)


@attrs.frozen(kw_only=True)
class FragileConfig(ExactMatrixBRConfig):
    """``broken``: a file whose presence breaks the algorithm's construction in an actor."""

    broken: str = ""


class FragileBR(ExactMatrixBR):
    """``exact_matrix_br`` that an actor cannot build once the file ``broken`` exists (a
    plugin's bug that shows only in a fresh actor, e.g. a replacement; test only)."""

    Config = FragileConfig

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if os.getpid() != DRIVER_PID and os.path.exists(self.config.broken):
            raise TypeError(f"fragile: cannot build from {self.config.broken!r}")


def with_bandit(monkeypatch: Any) -> None:
    """Register ``bandit`` in this process only (the backend ships it to the actors)."""
    monkeypatch.setattr(popmarl, "algorithms", popmarl.algorithms.with_component("bandit", Bandit))


def run_within(config: Mapping[str, Any], out: Any, seconds: float) -> dict[str, Any]:
    """:func:`run`, failing the test if it takes more than ``seconds`` (a hung run is
    left behind in a daemon thread)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["summary"] = run(config, out)
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"the run did not finish within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return dict(outcome["summary"])


# -- a ray backend that kills (or freezes) its own actors --------------------------------------
def kill_pid(pid: int, *, delay_s: float = 0.0, sig: int = signal.SIGKILL) -> threading.Thread | None:
    """Send ``sig`` (SIGKILL; SIGSTOP freezes the actor: it hangs without dying) to
    ``pid`` now, or from a thread after ``delay_s``."""
    if delay_s <= 0:
        os.kill(pid, sig)
        return None
    thread = threading.Thread(target=lambda: (time.sleep(delay_s), _signal_quietly(pid, sig)), daemon=True)
    thread.start()
    return thread


def stop_pid(pid: int, *, delay_s: float = 0.0) -> threading.Thread | None:
    """Freeze ``pid`` (SIGSTOP): the actor neither answers nor dies."""
    STOPPED.append(pid)
    return kill_pid(pid, delay_s=delay_s, sig=signal.SIGSTOP)


#: Processes frozen by :func:`stop_pid` (the tests kill any left at their end).
STOPPED: list[int] = []


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _signal_quietly(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class KillingBackend(RayBackend):
    """The ray backend, with a plan of kills: ``KillingBackend.plan`` maps
    ``("evaluate" | "train" | "best_respond", call number)`` to a function ``(backend) -> None`` run just
    before that call. At every call it notes the call's kind (``call_kinds``), the worker
    pids (``seen_workers``) and the servers' stream counts (``seen_streams``); the last
    instance is kept in ``KillingBackend.last``."""

    plan: dict[tuple[str, int], Callable[[KillingBackend], None]] = {}
    last: KillingBackend | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls = {"evaluate": 0, "train": 0, "best_respond": 0}
        self.seen_workers: list[tuple[int, ...]] = []
        self.seen_streams: list[tuple[int, int]] = []
        self.call_kinds: list[str] = []
        KillingBackend.last = self

    def _before(self, kind: str) -> None:
        self.calls[kind] += 1
        self.call_kinds.append(kind)
        self.seen_workers.append(tuple(self.worker_pids()))
        self.seen_streams.append(self.open_streams())
        action = self.plan.get((kind, self.calls[kind]))
        if action is not None:
            action(self)

    def evaluate(self, tasks: Sequence[EvalTask]) -> list[EvalResult]:
        self._before("evaluate")
        return super().evaluate(tasks)

    def train(self, tasks: Sequence[TrainTask]) -> list[TrainResult]:
        self._before("train")
        return super().train(tasks)

    def best_respond(self, tasks: Sequence[BestResponseTask]) -> list[BestResponseResult]:
        self._before("best_respond")
        return super().best_respond(tasks)


class SlowToCloseEpisodeServer(EpisodeServerActor):
    """The episode server, dropping a closed key's stream only after ``CLOSE_DELAY_S``
    (as when Ray runs a later call to this async actor first)."""

    CLOSE_DELAY_S = 0.5

    async def close(self, key: str) -> None:
        await asyncio.sleep(self.CLOSE_DELAY_S)
        await super().close(key)


def with_killing_backend(monkeypatch: Any, plan: Mapping[tuple[str, int], Callable[[KillingBackend], None]]) -> None:
    """Register ``ray_killing`` (a :class:`KillingBackend` following ``plan``)."""
    monkeypatch.setattr(KillingBackend, "plan", dict(plan))
    monkeypatch.setattr(popmarl, "backends", popmarl.backends.with_component("ray_killing", KillingBackend))
