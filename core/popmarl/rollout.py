"""The rollout engine: steps a vector of games with one batched ``act`` per policy.

``evaluate`` fills payoff entries (many profiles share one vector of games); ``explore``
plays a learner against opponents drawn from the meta-strategy once per episode and
keeps the learner's transitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from popmarl.env import Env, Step
from popmarl.policy import Policy
from popmarl.records import Episode, Observations

#: Given a game slot, the policy of each agent for that slot's next episode, or None
#: when no more episodes should start.
Assigner = Callable[[int], "Mapping[str, Policy] | None"]


class _Recorder:
    """Accumulates one learner agent's transitions per game slot."""

    def __init__(self, agent: str, num_envs: int) -> None:
        self.agent = agent
        self.obs: list[list[np.ndarray]] = [[] for _ in range(num_envs)]
        self.actions: list[list[object]] = [[] for _ in range(num_envs)]
        self.masks: list[list[np.ndarray]] = [[] for _ in range(num_envs)]
        self.rewards: list[list[float]] = [[] for _ in range(num_envs)]

    def decide(self, env_ids: np.ndarray, batch: Observations, actions: np.ndarray) -> None:
        for row, slot in enumerate(env_ids):
            self.obs[slot].append(batch.obs[row])
            self.actions[slot].append(actions[row])
            if batch.mask is not None:
                self.masks[slot].append(batch.mask[row])
            self.rewards[slot].append(0.0)

    def reward(self, slot: int, reward: float) -> None:
        if self.rewards[slot] and reward:
            self.rewards[slot][-1] += reward

    def finish(self, slot: int, episode_return: float, truncated: bool) -> Episode | None:
        obs, actions = self.obs[slot], self.actions[slot]
        episode = None
        if obs:
            episode = Episode(
                agent=self.agent,
                obs=np.stack(obs),
                actions=np.asarray(actions),
                rewards=np.asarray(self.rewards[slot], dtype=np.float32),
                masks=np.stack(self.masks[slot]) if self.masks[slot] else None,
                terminated=not truncated,
                truncated=truncated,
                episode_return=float(episode_return),
            )
        self.obs[slot], self.actions[slot], self.masks[slot], self.rewards[slot] = [], [], [], []
        return episode


class RolloutWorker:
    """Plays vectors of ``num_envs`` games of ``env``."""

    def __init__(self, *, env: Env, num_envs: int = 64) -> None:
        self.env = env
        self.num_envs = num_envs
        self.agents = env.agents

    def evaluate(
        self, profiles: Sequence[Mapping[str, Policy]], *, episodes: int, seed: int
    ) -> tuple[np.ndarray, int]:
        """Mean return of each agent for each profile over ``episodes`` episodes each;
        returns ``([len(profiles), n_agents], env_steps)``."""
        n_entries = len(profiles)
        started = np.zeros(n_entries, int)
        totals = np.zeros((n_entries, len(self.agents)))
        entry_of = np.full(self.num_envs, -1)
        cursor = [0]

        def assign(slot: int) -> Mapping[str, Policy] | None:
            while cursor[0] < n_entries and started[cursor[0]] >= episodes:
                cursor[0] += 1
            if cursor[0] >= n_entries:
                entry_of[slot] = -1
                return None
            entry = cursor[0]
            started[entry] += 1
            entry_of[slot] = entry
            return profiles[entry]

        def finish(slot: int, returns: np.ndarray, truncated: bool) -> None:
            totals[entry_of[slot]] += returns

        steps = self._play(assign, finish, seed=seed, explore=False, recorders=())
        return totals / max(episodes, 1), steps

    def explore(
        self,
        *,
        learner: Policy,
        learner_agents: Sequence[str],
        opponents: Mapping[str, tuple[Sequence[Policy], np.ndarray]],
        max_episodes: int | None,
        max_steps: int | None,
        seed: int,
        on_episode: Callable[[Episode], None] | None = None,
    ) -> tuple[list[Episode], int]:
        """Play ``learner`` in one of ``learner_agents`` per episode (chosen uniformly, so
        a shared policy plays every seat) against opponents drawn from their mixtures
        once per episode; return the learner's episodes and the env steps taken."""
        rng = np.random.default_rng(seed)
        episodes: list[Episode] = []
        started = [0]
        steps_box = [0]

        def assign(slot: int) -> Mapping[str, Policy] | None:
            if max_episodes is not None and started[0] >= max_episodes:
                return None
            if max_steps is not None and steps_box[0] >= max_steps:
                return None
            started[0] += 1
            seat = learner_agents[int(rng.integers(len(learner_agents)))]
            profile: dict[str, Policy] = {}
            for agent in self.agents:
                if agent == seat:
                    profile[agent] = learner
                else:
                    pool, mixture = opponents[agent]
                    profile[agent] = pool[int(rng.choice(len(pool), p=mixture))]
            return profile

        recorders = tuple(_Recorder(agent, self.num_envs) for agent in learner_agents)

        def keep(episode: Episode) -> None:
            episodes.append(episode)
            if on_episode is not None:
                on_episode(episode)

        steps = self._play(
            assign, None, seed=seed, explore=True, recorders=recorders,
            learner=learner, on_learner_episode=keep, steps_box=steps_box,
        )
        return episodes, steps

    def _play(
        self,
        assign: Assigner,
        finish: Callable[[int, np.ndarray, bool], None] | None,
        *,
        seed: int,
        explore: bool,
        recorders: Sequence[_Recorder],
        learner: Policy | None = None,
        on_learner_episode: Callable[[Episode], None] | None = None,
        steps_box: list[int] | None = None,
    ) -> int:
        rng = np.random.default_rng(seed)
        vec = self.env.vector(num_envs=self.num_envs, seed=seed)
        assignment: list[Mapping[str, Policy] | None] = [assign(slot) for slot in range(self.num_envs)]
        agent_index = {a: k for k, a in enumerate(self.agents)}
        recorder_of = {r.agent: r for r in recorders}
        steps = 0
        step: Step = vec.reset()
        try:
            while any(a is not None for a in assignment):
                actions: dict[str, np.ndarray] = {}
                for agent, (env_ids, batch) in step.decisions.items():
                    actions[agent] = self._act(agent, env_ids, batch, assignment, explore, rng, learner, recorder_of)
                    steps += int(np.count_nonzero([assignment[s] is not None for s in env_ids]))
                if steps_box is not None:
                    steps_box[0] = steps
                step = vec.step(actions)
                for agent, rec in recorder_of.items():
                    col = step.rewards[:, agent_index[agent]]
                    for slot in np.flatnonzero(col):
                        rec.reward(int(slot), float(col[slot]))
                for row, slot in enumerate(step.finished):
                    slot = int(slot)
                    if assignment[slot] is None:
                        continue
                    returns = step.returns[row]
                    if finish is not None:
                        finish(slot, returns, bool(step.truncated[row]))
                    for agent, rec in recorder_of.items():
                        played = assignment[slot][agent] is learner  # type: ignore[index]
                        episode = rec.finish(slot, returns[agent_index[agent]], bool(step.truncated[row]))
                        if played and episode is not None and on_learner_episode is not None:
                            on_learner_episode(episode)
                    assignment[slot] = assign(slot)
        finally:
            vec.close()
        return steps

    def _act(
        self,
        agent: str,
        env_ids: np.ndarray,
        batch: Observations,
        assignment: Sequence[Mapping[str, Policy] | None],
        explore: bool,
        rng: np.random.Generator,
        learner: Policy | None,
        recorder_of: Mapping[str, _Recorder],
    ) -> np.ndarray:
        """One batched ``act`` per distinct policy among the rows; idle slots act randomly."""
        n = len(env_ids)
        policies = [assignment[s][agent] if assignment[s] is not None else None for s in env_ids]  # type: ignore[index]
        ids = np.array([id(p) for p in policies])
        actions: np.ndarray | None = None
        for key in np.unique(ids):
            rows = np.flatnonzero(ids == key)
            policy = policies[rows[0]]
            sub = _take(batch, rows) if len(rows) < n else batch
            if policy is None:
                chosen = _legal_first(sub)
            else:
                chosen = np.asarray(policy.act(sub, explore=explore and policy is learner, rng=rng))
                rec = recorder_of.get(agent)
                if rec is not None and policy is learner:
                    rec.decide(env_ids[rows], sub, chosen)
            if actions is None:
                actions = np.zeros((n, *chosen.shape[1:]), dtype=chosen.dtype)
            actions[rows] = chosen
        assert actions is not None
        return actions


def _take(batch: Observations, rows: np.ndarray) -> Observations:
    return Observations(
        obs=batch.obs[rows],
        mask=None if batch.mask is None else batch.mask[rows],
        keys=None if batch.keys is None else tuple(batch.keys[r] for r in rows),
        agent=batch.agent,
    )


def _legal_first(batch: Observations) -> np.ndarray:
    """Any legal action (for games whose slot has no more episodes to play)."""
    if batch.mask is None:
        return np.zeros(len(batch), dtype=np.int64)
    return np.asarray(batch.mask).argmax(axis=1)
