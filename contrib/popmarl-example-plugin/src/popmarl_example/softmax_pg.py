"""Algorithm ``softmax_pg``: a linear softmax policy learned by REINFORCE (policy gradient).

The policy's action logits are ``obs @ w + b`` (observations flattened), masked to the
legal actions. Its trainer follows the policy gradient of the episodes' returns-to-go
less a running baseline, with momentum. It learns by rollouts, so it works in every
scenario and backend, on any env with discrete actions and array observations; its
state (the baseline, momentum buffers and update counter) is checkpointed as JSON and
``.npz``, so a resumed run continues exactly.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from popmarl.api import (Algorithm, ConfigError, Discrete, Episode, ExplicitPolicy, Observations, Policy, PolicySpace,
                         Trainer, TrainerContext, TrainerState)


@attrs.frozen(kw_only=True)
class SoftmaxPGConfig:
    """``lr``: step size; ``momentum``: of the gradient steps (0: plain SGD);
    ``baseline_rate``: how fast the baseline follows the mean episode return."""

    lr: float = attrs.field(default=0.5, validator=attrs.validators.gt(0))
    momentum: float = attrs.field(default=0.5, validator=[attrs.validators.ge(0), attrs.validators.lt(1)])
    baseline_rate: float = attrs.field(default=0.1, validator=[attrs.validators.gt(0), attrs.validators.le(1)])


class LinearSoftmaxPolicy(ExplicitPolicy):
    """Action probabilities ``softmax(obs @ w + b)`` over the legal actions, sampled in
    training and evaluation alike (a mixed strategy is often the point)."""

    def __init__(self, w: np.ndarray, b: np.ndarray) -> None:
        self.w, self.b = w, b

    def probabilities(self, batch: Observations) -> np.ndarray:
        logits = np.asarray(batch.obs, dtype=float).reshape(len(batch), -1) @ self.w + self.b
        if batch.mask is not None:
            logits = np.where(np.asarray(batch.mask, dtype=bool), logits, -np.inf)
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        return weights / weights.sum(axis=1, keepdims=True)

    def get_weights(self) -> Mapping[str, np.ndarray]:
        return {"w": self.w.copy(), "b": self.b.copy()}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        w, b = np.asarray(weights["w"], dtype=float), np.asarray(weights["b"], dtype=float)
        if w.shape != self.w.shape or b.shape != self.b.shape:
            raise ValueError(f"softmax_pg: weights shaped {w.shape}, {b.shape}; this policy needs "
                             f"{self.w.shape}, {self.b.shape}")
        self.w, self.b = w.copy(), b.copy()


class Reinforce(Trainer):
    """REINFORCE with a running baseline and momentum on ``policy``."""

    def __init__(self, policy: LinearSoftmaxPolicy, config: SoftmaxPGConfig) -> None:
        self.policy, self.config = policy, config
        self.velocity = {"w": np.zeros_like(policy.w), "b": np.zeros_like(policy.b)}
        self.baseline = 0.0
        self.updates = 0

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        obs = np.concatenate([np.asarray(e.obs, dtype=float).reshape(len(e.actions), -1) for e in episodes])
        masks = None if any(e.masks is None for e in episodes) else np.concatenate([e.masks for e in episodes])
        actions = np.concatenate([np.asarray(e.actions, dtype=int) for e in episodes])
        to_go = np.concatenate([np.cumsum(np.asarray(e.rewards, dtype=float)[::-1])[::-1] for e in episodes])
        probs = self.policy.probabilities(Observations(obs=obs, mask=masks))
        step = (np.eye(probs.shape[1])[actions] - probs) * (to_go - self.baseline)[:, None] / len(episodes)
        grads = {"w": obs.T @ step, "b": step.sum(axis=0)}
        for name, grad in grads.items():
            self.velocity[name] = self.config.momentum * self.velocity[name] + grad
        self.policy.w = self.policy.w + self.config.lr * self.velocity["w"]
        self.policy.b = self.policy.b + self.config.lr * self.velocity["b"]
        mean_return = float(np.mean([e.episode_return for e in episodes]))
        self.baseline += self.config.baseline_rate * (mean_return - self.baseline)
        self.updates += 1
        # "updates" is the task's own count; this one runs over the learner's whole life.
        return {"baseline": self.baseline, "total_updates": float(self.updates)}

    def state(self) -> TrainerState:
        buffer = io.BytesIO()
        np.savez(buffer, w=self.velocity["w"], b=self.velocity["b"])
        counters = {"baseline": self.baseline, "updates": self.updates}
        return {"trainer.json": json.dumps(counters).encode(), "velocity.npz": buffer.getvalue()}

    def load_state(self, state: TrainerState) -> None:
        counters = json.loads(state["trainer.json"])
        self.baseline, self.updates = float(counters["baseline"]), int(counters["updates"])
        with np.load(io.BytesIO(state["velocity.npz"]), allow_pickle=False) as data:
            self.velocity = {name: np.array(data[name]) for name in ("w", "b")}


class SoftmaxPG(Algorithm):
    """A linear softmax policy trained by REINFORCE, for discrete actions."""

    learns = True
    Config = SoftmaxPGConfig
    config: SoftmaxPGConfig

    def make_policy(self, *, space: PolicySpace, seed: int) -> LinearSoftmaxPolicy:
        if not isinstance(space.action_space, Discrete):
            raise ConfigError(f"algorithm softmax_pg: population {space.population} needs discrete actions")
        n_obs = int(np.prod(getattr(space.observation_space, "shape", (1,))))
        rng = np.random.default_rng(seed)
        return LinearSoftmaxPolicy(rng.normal(0.0, 0.01, (n_obs, space.action_space.n)),
                                   np.zeros(space.action_space.n))

    def initial_policy(self, *, space: PolicySpace, seed: int) -> LinearSoftmaxPolicy:
        """Uniform play (zero weights), as a learner's first policy."""
        policy = self.make_policy(space=space, seed=seed)
        policy.set_weights({"w": np.zeros_like(policy.w), "b": np.zeros_like(policy.b)})
        return policy

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int, context: TrainerContext) -> Reinforce:
        assert isinstance(policy, LinearSoftmaxPolicy)
        return Reinforce(policy, self.config)
