"""Algorithm ``bandit_pg``: one softmax over the actions, learned by policy gradient.

The policy ignores its observation: it suits one-shot games (the ``matrix`` env), where
the observation says nothing. Its trainer follows the gradient of the episodes' returns
less a running baseline (REINFORCE).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from popmarl.api import (Algorithm, ConfigError, Discrete, Episode, EpisodeBatch, ExplicitPolicy, Observations,
                         PolicySpace, Trainer, TrainerContext, TrainerState, positive)


@attrs.frozen(kw_only=True)
class BanditPGConfig:
    """``lr``: the step size; ``baseline_rate``: how fast the baseline follows the mean return."""

    lr: float = attrs.field(default=0.5, validator=positive)
    baseline_rate: float = attrs.field(default=0.1, validator=positive)


class SoftmaxPolicy(ExplicitPolicy):
    """``softmax(logits)`` over the legal actions, whatever the observation."""

    def __init__(self, logits: np.ndarray) -> None:
        self.logits = np.asarray(logits, dtype=float)

    def probabilities(self, batch: Observations) -> np.ndarray:
        logits = np.broadcast_to(self.logits, (len(batch), self.logits.size))
        if batch.mask is not None:
            logits = np.where(np.asarray(batch.mask, dtype=bool), logits, -np.inf)
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        return weights / weights.sum(axis=1, keepdims=True)

    def get_weights(self) -> Mapping[str, np.ndarray]:
        return {"logits": self.logits.copy()}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        self.logits = np.array(weights["logits"], dtype=float)


class Reinforce(Trainer):
    """REINFORCE with a running baseline on a :class:`SoftmaxPolicy`."""

    def __init__(self, policy: SoftmaxPolicy, config: BanditPGConfig) -> None:
        self.policy, self.config = policy, config
        self.baseline = 0.0

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        batch = EpisodeBatch.of(episodes)  # every episode's decisions, column-wise
        # Each decision's return-to-go: here, the return of its (one-decision) episode.
        to_go = np.repeat(batch.returns, np.diff(batch.starts))
        probs = self.policy.probabilities(Observations(obs=batch.obs, mask=batch.masks))
        chosen = np.eye(probs.shape[1])[np.asarray(batch.actions, dtype=int)]
        gradient = ((chosen - probs) * (to_go - self.baseline)[:, None]).mean(axis=0)
        self.policy.logits = self.policy.logits + self.config.lr * gradient
        self.baseline += self.config.baseline_rate * (float(batch.returns.mean()) - self.baseline)
        return {"baseline": self.baseline}

    def state(self) -> TrainerState:
        # Everything update() depends on besides the policy's weights, in a safe format.
        return {"trainer.json": json.dumps({"baseline": self.baseline}).encode()}

    def load_state(self, state: TrainerState) -> None:
        self.baseline = float(json.loads(state["trainer.json"])["baseline"])


class BanditPG(Algorithm):
    """A softmax over actions, trained by REINFORCE."""

    Config = BanditPGConfig
    config: BanditPGConfig
    learns = True  # it overrides make_trainer

    def check(self, *, env: object, space: PolicySpace) -> None:
        if not isinstance(space.action_space, Discrete):
            raise ConfigError(f"algorithm bandit_pg: population {space.population} needs discrete actions")

    def make_policy(self, *, space: PolicySpace, seed: int) -> SoftmaxPolicy:
        # Zero logits: uniform play, also the population's first policy.
        return SoftmaxPolicy(np.zeros(space.action_space.n))

    def make_trainer(self, *, policy: SoftmaxPolicy, space: PolicySpace, seed: int,  # type: ignore[override]
                     context: TrainerContext) -> Reinforce:
        return Reinforce(policy, self.config)
