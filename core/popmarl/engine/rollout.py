"""The rollout engine: steps a vector of games with one batched ``act`` per policy (one
``act_grouped`` per group of opponents that can act together).

``play`` fills payoff entries (many profiles, fixed or drawn per episode, share one
vector of games; ``evaluate`` averages fixed profiles' returns); ``explore``
plays a learner against opponents drawn from the meta-strategy once per episode and
keeps the learner's transitions. Which policy plays which agent in which game is an
integer table (:mod:`popmarl.engine.seating`), so grouping the rows of a decision by
policy is a few numpy calls (:mod:`popmarl.engine.acting`); a learner's rows are kept by
:mod:`popmarl.engine.episode_recording` (its own decisions) or
:mod:`popmarl.engine.joint_recording` (the joint view).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from popmarl.data.episodes import EpisodeBatch
from popmarl.data.outcomes import PlayedGames
from popmarl.data.trajectories import JointEpisodes
from popmarl.engine.acting import applied, choose_actions
from popmarl.engine.episode_recording import EpisodeRecorder, cut_observations, gather_episodes
from popmarl.engine.joint_recording import Cut, JointRecorder
from popmarl.engine.seating import IDLE, OpponentCopy, OpponentDraw, SeatTable, Seating, policy_name
from popmarl.interfaces.env import Env, Step, VectorEnv
from popmarl.interfaces.policy import Policy

#: Called when a game slot is free, with the env steps taken so far: the policy of
#: each agent for that slot's next episode and a tag reported back with its returns,
#: or None when no more episodes should start (for good: it is not asked again).
Sampler = Callable[[int], "tuple[Mapping[str, Policy], Any] | None"]
#: Draws one episode's profile (a policy per agent) with the generator it is given.
ProfileDraw = Callable[[np.random.Generator], Mapping[str, Policy]]


@attrs.frozen(kw_only=True)
class Rollouts:
    """What a batch of episodes produced: each finished episode's tag and returns (env
    agent order), each learner's trajectories, and the env steps (decisions) taken."""

    tags: list[Any]
    returns: np.ndarray
    truncated: np.ndarray
    episodes: list[EpisodeBatch | JointEpisodes]
    env_steps: int

    def games(self) -> PlayedGames:
        """Who played each seat of each game, and its returns (tags of :meth:`RolloutWorker.explore`)."""
        return PlayedGames(players=tuple(self.tags), returns=self.returns)


class RolloutWorker:
    """Plays vectors of ``num_envs`` games of ``env``."""

    def __init__(self, *, env: Env, num_envs: int = 64) -> None:
        self.env = env
        self.num_envs = num_envs
        self.agents = env.agents
        self.action_spaces = {a: env.action_space(a) for a in env.agents}

    def evaluate(
        self, profiles: Sequence[Mapping[str, Policy]], *, episodes: int, seed: int
    ) -> tuple[np.ndarray, int]:
        """Mean return of each agent for each profile over ``episodes`` episodes each;
        returns ``([len(profiles), n_agents], env_steps)``."""
        result = self.play([(profile, episodes) for profile in profiles], seed=seed)
        totals = np.zeros((len(profiles), len(self.agents)))
        np.add.at(totals, np.asarray(result.tags, dtype=int), result.returns)
        return totals / max(episodes, 1), result.env_steps

    def play(self, entries: Sequence[tuple[Mapping[str, Policy] | ProfileDraw, int]], *, seed: int) -> Rollouts:
        """Play each entry's episodes without exploring: its policy per agent, or, for an
        entry given as a :data:`ProfileDraw`, a profile drawn once per episode. The
        result's tags are the entries' positions."""
        rng = np.random.default_rng(seed)
        order = iter([(entry, k) for k, (entry, episodes) in enumerate(entries) for _ in range(episodes)])

        def sample(steps: int) -> tuple[Mapping[str, Policy], int] | None:
            item = next(order, None)
            if item is None:
                return None
            entry, k = item
            return (entry(rng) if callable(entry) else entry), k

        return self.run(sample, seed=seed, explore=False)

    def explore(
        self,
        *,
        learners: Sequence[Seating],
        opponents: OpponentDraw,
        max_episodes: int | None,
        max_steps: int | None,
        seed: int,
        self_play: float = 0.0,
        opponent_epsilon: float = 0.0,
    ) -> Rollouts:
        """Play ``learners`` in their seats against opponents drawn once per episode
        (:class:`~popmarl.engine.seating.OpponentDraw`); ``episodes[k]`` of the result holds learner ``k``'s
        finished episodes (one per seat it played, per episode in which it moved), or,
        for a learner whose seating asks for the ``joint`` view, its games
        (:class:`~popmarl.data.trajectories.JointEpisodes`); each game's tag names who played
        each seat (a learner's key, a frozen policy's id, ``self-play:<key>``).

        With probability ``self_play`` an episode is self-play (one learner only): every
        seat but the learner's is played by a copy of its current policy that acts as an
        opponent (without exploring) and whose moves are not recorded, so the learner
        still learns from its own seat only. Each opponent decision (copies included) is
        replaced by a uniformly random legal action with probability ``opponent_epsilon``."""
        if self_play > 0 and len(learners) != 1:
            raise ValueError(f"self_play: copies of the learner play the other seats, so a task with self_play has "
                             f"one learner, got {len(learners)}")
        rng = np.random.default_rng(seed)
        started = 0
        copies = [OpponentCopy(seating.policy) for seating in learners]
        # Episodes with the same draws share one profile and tag (few distinct ones: the
        # table then keeps a slot's codes when its next episode draws the same).
        drawn: dict[tuple[Any, ...], tuple[dict[str, Policy], tuple[str, ...]]] = {}

        def sample(steps: int) -> tuple[Mapping[str, Policy], tuple[str, ...]] | None:
            nonlocal started
            if (max_episodes is not None and started >= max_episodes) or (max_steps is not None and steps >= max_steps):
                return None
            started += 1
            # (one seat to draw from takes no random number: numpy's integers(1) draws none)
            choice: list[Any] = [(0 if len(seating.seats) == 1 else int(rng.integers(len(seating.seats))))
                                 if seating.one_seat else -1 for seating in learners]
            if self_play > 0 and rng.random() < self_play:  # copies of the learner in every other seat
                choice.append(None)
            else:
                taken = {seat for seating, k in zip(learners, choice)
                         for seat in (seating.seats if k < 0 else (seating.seats[k],))}
                rest = [a for a in self.agents if a not in taken]
                choice.append(opponents.choose(rng, rest))
            key = tuple(choice)
            if key not in drawn:
                drawn[key] = profile_of(key)
            return drawn[key]

        def profile_of(key: tuple[Any, ...]) -> tuple[dict[str, Policy], tuple[str, ...]]:
            profile: dict[str, Policy] = {}
            for seating, k in zip(learners, key):
                profile.update({seat: seating.policy_at(seat) for seat in (seating.seats if k < 0 else (seating.seats[k],))})
            rest = [a for a in self.agents if a not in profile]
            if key[-1] is None:
                profile.update({a: copies[0] for a in rest})
            else:
                profile.update(opponents.profile(key[-1], rest))
            return profile, tuple(policy_name(profile[a], names) for a in self.agents)

        names = {**opponents.names, **{id(copy): f"self-play:{s.name}" for copy, s in zip(copies, learners)},
                 **{id(p): s.name for s in learners for p in s.policies}}
        return self.run(sample, seed=seed, explore=True, learners=[s.policies for s in learners],
                        opponent_epsilon=opponent_epsilon, joint=[s.joint for s in learners], names=names,
                        learner_seats={seat for s in learners for seat in s.seats})

    def run(
        self, sample: Sampler, *, seed: int, explore: bool, learners: Sequence[Policy | Sequence[Policy]] = (),
        opponent_epsilon: float = 0.0, joint: Sequence[bool] = (), names: Mapping[int, str] | None = None,
        learner_seats: Collection[str] | None = None,
    ) -> Rollouts:
        """Play episodes until ``sample`` returns None for every free slot. Policies in
        ``learners`` act with ``explore`` and their trajectories are kept; the others'
        decisions are uniformly random with probability ``opponent_epsilon``. A learner
        given as several policies (a team's members) is one learner: their rows are its.

        A learner with ``joint[k]`` set gets the joint view of its games
        (:class:`~popmarl.data.trajectories.JointEpisodes`: every seat's rows, the state where
        the env has one) instead of its own decisions; ``names`` (by ``id`` of a policy)
        names the policies its rows say played each seat. Other seats' rows are recorded
        only when some learner asks for the joint view. ``learner_seats``: the seats
        ``sample`` may give a learner (None: any); the others' decisions are not tracked."""
        # Streams independent of each other and of a caller's default_rng(seed) (explore
        # draws opponents from one): shared streams correlate opponents, actions and chance.
        act_seed, env_seed = (int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(2))
        rng = np.random.default_rng(act_seed)
        vec = self.env.vector(num_envs=self.num_envs, seed=env_seed)
        table = SeatTable(self.agents, self.num_envs)
        learner_of = {id(p): k for k, entry in enumerate(learners)
                      for p in (entry if isinstance(entry, Sequence) else (entry,))}
        kept: list[list[tuple[EpisodeRecorder, int]]] = [[] for _ in learners]
        tags: list[Any] = []
        returns: list[np.ndarray] = []
        truncations: list[np.ndarray] = []
        slot_tag: list[Any] = [None] * self.num_envs
        steps = 0

        exhausted = False

        def refill(slot: int) -> None:
            nonlocal exhausted
            drawn = None if exhausted else sample(steps)
            if drawn is None and not exhausted:
                exhausted = True  # games that finish from now on are not needed again
                vec.stop_restarts()
            table.assign(slot, None if drawn is None else drawn[0])
            slot_tag[slot] = None if drawn is None else drawn[1]

        joint_wanted = [k < len(joint) and bool(joint[k]) for k in range(len(learners))]
        joint_learners = [k for k, wants in enumerate(joint_wanted) if wants]
        whole = self._joint_recorder(vec) if joint_learners else None
        step: Step = vec.reset()
        for slot in range(self.num_envs):
            refill(slot)
        agent_index = {a: k for k, a in enumerate(self.agents)}
        recorders = {a: EpisodeRecorder(a, self.num_envs) for a in self.agents
                     if learner_seats is None or a in learner_seats} if learners else {}
        learner_codes: set[int] = set()
        # A joint-view learner's rows come from the joint recorder: not copied twice.
        recorded: set[int] = set()
        # By table code, the learner it is (-1: none), then a -1 that the IDLE code (-1) reads.
        learner_at = np.full(1, -1, dtype=np.int64)
        coded = 0  # the table's policies seen so far (it only grows)
        try:
            while table.any_active():
                if coded < len(table.policies):
                    seated_learners = [learner_of.get(id(p)) for p in table.policies[coded:]]
                    for c, k in enumerate(seated_learners, start=coded):
                        if k is not None:
                            learner_codes.add(c)
                            if not joint_wanted[k]:
                                recorded.add(c)
                    learner_at = np.concatenate([learner_at[:-1], [-1 if k is None else k for k in seated_learners], [-1]])
                    coded = len(table.policies)
                actions: dict[str, np.ndarray] = {}
                if whole is not None:
                    whole.begin(np.flatnonzero(table.busy), step.state)
                for agent, (env_ids, batch) in step.decisions.items():
                    codes = table.code[agent][env_ids]
                    steps += int(np.count_nonzero(codes != IDLE))
                    space = self.action_spaces[agent]
                    chosen = choose_actions(table, codes, batch, explore, rng, learner_codes, recorded,
                                            recorders.get(agent), env_ids, space, opponent_epsilon)
                    if whole is not None:
                        whole.decide(agent, env_ids, batch, chosen)
                    actions[agent] = applied(chosen, space)
                step = vec.step(actions)
                if whole is not None:
                    whole.reward(step.rewards)
                for agent, rec in recorders.items():
                    column = step.rewards[:, agent_index[agent]]
                    rewarded = np.flatnonzero(column)
                    if len(rewarded):
                        rec.reward(rewarded, column[rewarded])
                if not len(step.finished):
                    continue
                live = table.busy[step.finished]
                returns.append(step.returns[live])
                truncations.append(step.truncated[live])
                cuts = cut_observations(step) if recorders else {}
                rows = np.flatnonzero(live)
                slots = step.finished[rows]
                # Per recorder, the learner that played its agent in each finished game
                # (-1: none): the others' episodes are dropped at once.
                seated = {}
                for agent, rec in recorders.items():
                    ks = learner_at[table.code[agent][slots]]
                    rec.clear(slots[ks < 0])
                    seated[agent] = ks.tolist()
                returns_of = step.returns[rows].tolist()
                truncated_of = step.truncated[rows].tolist()
                for i, slot in enumerate(slots.tolist()):
                    tags.append(slot_tag[slot])
                    if whole is not None:
                        self._file_joint(whole, table, slot, step, int(rows[i]), cuts, learner_of, joint_learners,
                                         names)
                    for agent, rec in recorders.items():
                        k = seated[agent][i]
                        if k < 0:
                            continue
                        cut = cuts.get((agent, slot)) if truncated_of[i] else None
                        episode = rec.finish(slot, k, len(kept[k]), returns_of[i][agent_index[agent]], cut)
                        if episode is not None:
                            kept[k].append((rec, episode))
                    refill(slot)
        finally:
            vec.close()
        n_agents = len(self.agents)
        all_returns = np.concatenate(returns).astype(float) if returns else np.zeros((0, n_agents))
        all_truncated = np.concatenate(truncations).astype(bool) if truncations else np.zeros(0, bool)
        episodes: list[EpisodeBatch | JointEpisodes] = [
            whole.gather(k) if whole is not None and joint_wanted[k]
            else gather_episodes(list(recorders.values()), k, order)
            for k, order in enumerate(kept)]
        return Rollouts(tags=tags, returns=all_returns.reshape(len(tags), n_agents), truncated=all_truncated,
                        episodes=episodes, env_steps=steps)

    def _joint_recorder(self, vec: VectorEnv) -> JointRecorder:
        """A recorder of every seat's rows (and the state, where the env has one: asked
        of ``vec`` before its reset)."""
        space = self.env.state_space
        if space is not None and not vec.record_state():
            raise ValueError(f"env {type(self.env).__name__} declares a state space, but its vector records "
                             "no state (VectorEnv.record_state returned False)")
        return JointRecorder(agents=self.agents, num_envs=self.num_envs,
                             observation_spaces={a: self.env.observation_space(a) for a in self.agents},
                             action_spaces=self.action_spaces, state_space=space)

    def _file_joint(self, whole: JointRecorder, table: SeatTable, slot: int, step: Step, row: int,
                    cuts: Mapping[tuple[str, int], Cut], learner_of: Mapping[int, int],
                    joint_learners: Sequence[int], names: Mapping[int, str] | None) -> None:
        """File the game that finished in ``slot`` (row ``row`` of ``step.finished``) for
        the joint-view learners that played in it."""
        seated = [table.policy_at(agent, slot) for agent in self.agents]
        own = {}
        for k in joint_learners:
            seats = np.asarray([p is not None and learner_of.get(id(p)) == k for p in seated])
            if seats.any():
                own[k] = seats
        truncated = bool(step.truncated[row])
        whole.finish(slot, returns=step.returns[row], truncated=truncated,
                     final_state=None if step.final_state is None else step.final_state[row],
                     cuts={a: cut for (a, s), cut in cuts.items() if s == slot} if truncated else {},
                     policies=[policy_name(p, names) for p in seated], own=own)
