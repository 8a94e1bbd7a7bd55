"""The rollout engine: steps a vector of games with one batched ``act`` per policy (one
``act_grouped`` per group of opponents that can act together).

``play`` fills payoff entries (many profiles, fixed or drawn per episode, share one
vector of games; ``evaluate`` averages fixed profiles' returns); ``explore``
plays a learner against opponents drawn from the meta-strategy once per episode and
keeps the learner's transitions. Which policy plays which agent in which game is an
integer table, so grouping the rows of a decision by policy is a few numpy calls.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

import attrs

import numpy as np

from popmarl.interfaces.env import Env, Step, VectorEnv
from popmarl.engine.joint_recording import Cut, JointRecorder
from popmarl.data.outcomes import PlayedGames
from popmarl.interfaces.policy import ActingAlone, Policy, masked_uniform, sample_rows
from popmarl.data.records import EMPTY_EPISODES, EpisodeBatch, JointOpponents, Observations, Opponents
from popmarl.interfaces.spaces import Box, Space
from popmarl.data.trajectories import JointEpisodes

#: Called when a game slot is free, with the env steps taken so far: the policy of
#: each agent for that slot's next episode and a tag reported back with its returns,
#: or None when no more episodes should start (for good: it is not asked again).
Sampler = Callable[[int], "tuple[Mapping[str, Policy], Any] | None"]
#: Draws one episode's profile (a policy per agent) with the generator it is given.
ProfileDraw = Callable[[np.random.Generator], Mapping[str, Policy]]
IDLE = -1


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


class _Recorder:
    """Records one agent's decisions in learner seats, column-wise: each ``decide``
    appends a block of rows tagged with the game slot's current episode id, a reward is
    added to the slot's last row, and finishing a slot's episode files it (or drops it)
    and opens a new id. :func:`_gather` collects a learner's filed episodes in one sort."""

    def __init__(self, agent: str, num_envs: int) -> None:
        self.agent = agent
        self._obs: list[np.ndarray] = []
        self._actions: list[np.ndarray] = []
        self._masks: list[np.ndarray | None] = []  # one entry per block (None: the env gave no mask)
        self._ids: list[np.ndarray] = []
        self._rewards = np.zeros(1024, dtype=np.float64)
        self._rows = 0
        self._episode_of_slot = np.arange(num_envs, dtype=np.int64)
        self._next_id = num_envs
        self._last_row = np.full(num_envs, -1, dtype=np.int64)
        #: Filed episodes by id: (learner, position in its list, return, cut).
        self.filed: dict[int, tuple[int, int, float, Cut | None]] = {}

    def decide(self, env_ids: np.ndarray, batch: Observations, actions: np.ndarray) -> None:
        n = len(env_ids)
        # Copies: the env owns its step buffers and may reuse them.
        self._obs.append(np.array(batch.obs))
        self._actions.append(np.array(actions))
        self._masks.append(None if batch.mask is None else np.array(batch.mask))
        self._ids.append(self._episode_of_slot[env_ids])
        if self._rows + n > len(self._rewards):
            self._rewards = np.concatenate([self._rewards, np.zeros(max(self._rows + n, len(self._rewards)))])
        self._last_row[env_ids] = np.arange(self._rows, self._rows + n)
        self._rows += n

    def reward(self, slots: np.ndarray, rewards: np.ndarray) -> None:
        """Add each slot's reward to its episode's last decision (none yet: dropped)."""
        rows = self._last_row[slots]
        held = rows >= 0
        self._rewards[rows[held]] += rewards[held]

    def finish(self, slot: int, learner: int, position: int, episode_return: float, cut: Cut | None) -> int | None:
        """File the slot's episode for ``learner`` at ``position`` in its list (truncated
        with the observation ``cut`` when it was cut off with this agent in play) and
        return its id; None if this agent made no decision in it."""
        episode = int(self._episode_of_slot[slot]) if self._last_row[slot] >= 0 else None
        if episode is not None:
            self.filed[episode] = (learner, position, float(episode_return), cut)
        self.clear(slot)
        return episode

    def clear(self, slots: int | np.ndarray) -> None:
        """Drop the episode of ``slots`` (one or an array of them); their next decisions
        start new ones."""
        n = np.size(slots)
        self._episode_of_slot[slots] = np.arange(self._next_id, self._next_id + n) if n != 1 else self._next_id
        self._next_id += n
        self._last_row[slots] = -1

    def rows_of(self, learner: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
        """``learner``'s filed rows in time order: (position of their episode, obs,
        actions, masks, rewards)."""
        if not self._ids:
            empty = np.zeros(0, np.int64)
            return empty, np.zeros((0,)), empty, None, np.zeros(0)
        if len(self._ids) > 1:
            self._masks = [_joined_masks(self._masks, [len(block) for block in self._ids])]
            self._obs, self._actions, self._ids = ([np.concatenate(c)] for c in (self._obs, self._actions, self._ids))
        position = np.full(self._next_id, -1, dtype=np.int64)
        for episode, (k, at, _, _) in self.filed.items():
            if k == learner:
                position[episode] = at
        row_position = position[self._ids[0]]
        rows = np.flatnonzero(row_position >= 0)
        masks = None if self._masks[0] is None else self._masks[0][rows]
        return row_position[rows], self._obs[0][rows], self._actions[0][rows], masks, self._rewards[:self._rows][rows]


def _joined_masks(blocks: Sequence[np.ndarray | None], lengths: Sequence[int]) -> np.ndarray | None:
    """Blocks of masks (of ``lengths`` rows) as one array, a block without one filled
    with every action legal; None if no block has one."""
    width = next((b.shape[1] for b in blocks if b is not None), None)
    if width is None:
        return None
    return np.concatenate([np.ones((n, width), bool) if b is None else b for b, n in zip(blocks, lengths)])


def _gather(recorders: Sequence[_Recorder], learner: int, order: Sequence[tuple[_Recorder, int]]) -> EpisodeBatch:
    """``learner``'s episodes, in the order they finished (``order``: the recorder
    and episode id of each), as one column-wise batch."""
    if not order:
        return EMPTY_EPISODES
    parts = [r.rows_of(learner) for r in recorders]
    parts = [p for p in parts if len(p[0])]
    position = np.concatenate([p[0] for p in parts])
    # Rows by episode position; within an episode, one recorder's rows in time order.
    rows = np.argsort(position, kind="stable")
    joined_masks = _joined_masks([p[3] for p in parts], [len(p[0]) for p in parts])
    meta = [recorder.filed[episode] for recorder, episode in order]
    cuts = [cut for _, _, _, cut in meta]
    counts = np.bincount(position, minlength=len(order))
    return EpisodeBatch(
        agents=tuple(recorder.agent for recorder, _ in order),
        starts=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        obs=np.concatenate([p[1] for p in parts])[rows],
        actions=np.concatenate([p[2] for p in parts])[rows],
        rewards=np.concatenate([p[4] for p in parts])[rows].astype(np.float32),
        masks=None if joined_masks is None else joined_masks[rows],
        returns=np.asarray([ret for _, _, ret, _ in meta], dtype=np.float64),
        truncated=np.asarray([cut is not None for cut in cuts], dtype=bool),
        final_obs=tuple(None if cut is None else cut[0] for cut in cuts),
        final_masks=tuple(None if cut is None else cut[1] for cut in cuts),
    )


class _Table:
    """Which policy (an index into ``policies``) plays each agent in each game slot."""

    def __init__(self, agents: Sequence[str], num_envs: int) -> None:
        self.policies: list[Policy] = []
        #: Each policy's ``group_key`` (read once, when it is first seated).
        self.keys: list[Hashable | None] = []
        self._index_of: dict[int, int] = {}
        self.code = {a: np.full(num_envs, IDLE, dtype=np.int64) for a in agents}
        self.busy = np.zeros(num_envs, dtype=bool)
        self._profile: list[Mapping[str, Policy] | None] = [None] * num_envs

    def assign(self, slot: int, profile: Mapping[str, Policy] | None) -> None:
        if profile is self._profile[slot] and profile is not None:
            return  # the same profile again (evaluation, co-learning): the codes stand
        self._profile[slot] = profile
        self.busy[slot] = profile is not None
        for agent, codes in self.code.items():
            if profile is None:
                codes[slot] = IDLE
                continue
            policy = profile[agent]
            key = id(policy)
            if key not in self._index_of:
                self._index_of[key] = len(self.policies)
                self.policies.append(policy)
                self.keys.append(policy.group_key())
            codes[slot] = self._index_of[key]

    def policy_at(self, agent: str, slot: int) -> Policy | None:
        code = int(self.code[agent][slot])
        return None if code == IDLE else self.policies[code]

    def any_active(self) -> bool:
        return bool(self.busy.any())


class OpponentCopy(ActingAlone):
    """A learner's current policy in an opponent's seat (self-play). It shares the
    learner's weights, but is a distinct object, so the rollout engine treats it as an
    opponent: it acts without exploring and none of its transitions are kept."""


@attrs.frozen(kw_only=True)
class Seating:
    """A learner in play: its policy and the seats it plays (``one_seat``: one of them
    per episode, drawn uniformly; otherwise all of them); a team's other members play
    their seats with their own policies (``seat_policies``); ``name`` (its key) is what a
    joint view calls it, and ``joint`` whether it learns from the joint view."""

    policy: Policy
    seats: tuple[str, ...]
    one_seat: bool = False
    name: str = "learner"
    joint: bool = False
    seat_policies: Mapping[str, Policy] = attrs.field(factory=dict)

    def policy_at(self, seat: str) -> Policy:
        """The policy that plays ``seat``."""
        return self.seat_policies.get(seat, self.policy)

    @property
    def policies(self) -> tuple[Policy, ...]:
        """Every policy of the learner (a team's members), each once."""
        return tuple({id(p): p for p in (self.policy, *self.seat_policies.values())}.values())


class OpponentDraw:
    """Draws the opponents of one episode: each seat from its mixture of frozen
    policies, and the seats of a joint distribution together, as one profile."""

    def __init__(self, seats: Mapping[str, tuple[Sequence[Policy], np.ndarray]],
                 joint: tuple[tuple[str, ...], Sequence[Sequence[Policy]], np.ndarray] | None = None) -> None:
        self.seats = seats
        self.joint = joint
        #: What a joint view calls each policy (by ``id``): its policy id, where known.
        self.names: dict[int, str] = {}
        # Cumulative probabilities: one uniform draw and a binary search per choice.
        self._cdf = {agent: _cdf(mixture) for agent, (_, mixture) in seats.items()}
        self._joint_cdf = None if joint is None else _cdf(joint[2])

    @classmethod
    def of(cls, mixtures: Sequence[Opponents], joint: JointOpponents | None,
           policy_of: Callable[[str], Policy]) -> OpponentDraw:
        """Per-seat mixtures and a joint distribution of policy ids, as live policies
        (``policy_of``) ready to draw from (their supports only)."""
        names: dict[int, str] = {}

        def live(pid: str) -> Policy:
            policy = policy_of(pid)
            names[id(policy)] = pid
            return policy

        seats = {}
        for seat in mixtures:
            support = seat.support()
            probs = np.asarray([p for _, p in support], dtype=float)
            seats[seat.agent] = ([live(pid) for pid, _ in support], probs / probs.sum())
        drawn_together = None
        if joint is not None:
            profiles = joint.support()
            probs = np.asarray([p for _, p in profiles], dtype=float)
            drawn_together = (joint.agents, [[live(pid) for pid in prof] for prof, _ in profiles],
                              probs / probs.sum())
        draw = cls(seats, drawn_together)
        draw.names = names
        return draw

    def draw(self, rng: np.random.Generator, agents: Sequence[str]) -> dict[str, Policy]:
        """A policy for each of ``agents`` (in order; the joint profile first, if any)."""
        return self.profile(self.choose(rng, agents), agents)

    def choose(self, rng: np.random.Generator, agents: Sequence[str]) -> tuple[int, ...]:
        """What :meth:`draw` draws, as indices (the joint profile's, -1 without one, then
        each of ``agents``' policy, -1 where the joint profile seats it): :meth:`profile`
        turns them into policies."""
        joint = -1
        seated: tuple[str, ...] = ()
        if self.joint is not None:
            assert self._joint_cdf is not None
            joint = _choose(self._joint_cdf, rng)
            seated = self.joint[0]
        chosen = [joint]
        for agent in agents:
            if agent in seated:
                chosen.append(-1)
                continue
            if agent not in self.seats:
                raise ValueError(f"train task: no opponents for seat {agent} (give a mixture or a joint distribution)")
            chosen.append(_choose(self._cdf[agent], rng))
        return tuple(chosen)

    def profile(self, chosen: tuple[int, ...], agents: Sequence[str]) -> dict[str, Policy]:
        """The policies of ``agents`` that :meth:`choose` chose as ``chosen``."""
        drawn: dict[str, Policy] = {}
        if self.joint is not None:
            joint_agents, profiles, _ = self.joint
            drawn.update({a: p for a, p in zip(joint_agents, profiles[chosen[0]]) if a in agents})
        for agent, k in zip(agents, chosen[1:]):
            if k >= 0:
                drawn[agent] = self.seats[agent][0][k]
        return drawn


def _cdf(probabilities: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(np.asarray(probabilities, dtype=float))
    return cdf / cdf[-1]


def _choose(cdf: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn with the probabilities whose cumulative sums are ``cdf`` (one
    with a single entry takes no draw)."""
    if len(cdf) == 1:
        return 0
    return min(int(cdf.searchsorted(rng.random(), side="right")), len(cdf) - 1)


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
        (:class:`OpponentDraw`); ``episodes[k]`` of the result holds learner ``k``'s
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
            return profile, tuple(_name(profile[a], names) for a in self.agents)

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
        table = _Table(self.agents, self.num_envs)
        learner_of = {id(p): k for k, entry in enumerate(learners)
                      for p in (entry if isinstance(entry, Sequence) else (entry,))}
        kept: list[list[tuple[_Recorder, int]]] = [[] for _ in learners]
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
        recorders = {a: _Recorder(a, self.num_envs) for a in self.agents
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
                    chosen = self._act(table, codes, batch, explore, rng, learner_codes, recorded, recorders.get(agent),
                                       env_ids, space, opponent_epsilon)
                    if whole is not None:
                        whole.decide(agent, env_ids, batch, chosen)
                    actions[agent] = _applied(chosen, space)
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
                cuts = _cuts(step) if recorders else {}
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
            whole.gather(k) if whole is not None and joint_wanted[k] else _gather(list(recorders.values()), k, order)
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

    def _file_joint(self, whole: JointRecorder, table: _Table, slot: int, step: Step, row: int,
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
                     policies=[_name(p, names) for p in seated], own=own)

    def _act(
        self,
        table: _Table,
        codes: np.ndarray,
        batch: Observations,
        explore: bool,
        rng: np.random.Generator,
        learner_codes: set[int],
        recorded_codes: set[int],
        recorder: _Recorder | None,
        env_ids: np.ndarray,
        space: Space,
        opponent_epsilon: float,
    ) -> np.ndarray:
        """The rows' actions as chosen (a Box action before clipping: :func:`_applied`):
        one batched ``act`` per distinct policy among the rows, except that opponents
        (policies other than the learners', acting without exploring) with equal
        ``group_key`` act in one ``act_grouped`` call; idle games take any legal action
        (their results are ignored). Policies act, and opponents' actions are perturbed
        (``opponent_epsilon``), unit by unit in the order of their first code, a group's
        members in code order: ``rng`` is drawn from in an order fixed by the inputs."""
        unique = np.unique(codes)
        if len(unique) == 1:
            code = int(unique[0])
            return self._act_alone(table, code, batch, None, explore, rng, code in learner_codes, recorded_codes,
                                   recorder, env_ids, space, opponent_epsilon)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], unique).tolist() + [len(codes)]
        rows_of = {int(c): order[bounds[k]:bounds[k + 1]] for k, c in enumerate(unique)}
        # Units in the order of their first code: a policy alone, or a group's members.
        units: list[list[int]] = []
        members_of: dict[Hashable, list[int]] = {}
        for code in rows_of:
            key = None if code == IDLE or code in learner_codes else table.keys[code]
            if key is None:
                units.append([code])
            elif key in members_of:
                members_of[key].append(code)
            else:
                members_of[key] = [code]
                units.append(members_of[key])
        actions: np.ndarray | None = None
        for unit in units:
            if len(unit) == 1:
                rows = rows_of[unit[0]]
                chosen = self._act_alone(table, unit[0], batch, rows, explore, rng, unit[0] in learner_codes,
                                         recorded_codes, recorder, env_ids, space, opponent_epsilon)
            else:
                rows = np.concatenate([rows_of[c] for c in unit])
                sub = _take(batch, rows)
                ends = np.cumsum([len(rows_of[c]) for c in unit]).tolist()
                parts = [_slice(sub, a, b) for a, b in zip([0, *ends[:-1]], ends)]
                members = [table.policies[c] for c in unit]
                chosen = np.concatenate([np.asarray(a) for a in type(members[0]).act_grouped(members, parts, rng=rng)])
                if opponent_epsilon > 0:
                    chosen = _perturb(chosen, sub, space, opponent_epsilon, rng)
            if actions is None:
                actions = np.zeros((len(codes), *chosen.shape[1:]), dtype=chosen.dtype)
            actions[rows] = chosen
        assert actions is not None
        return actions

    def _act_alone(
        self, table: _Table, code: int, batch: Observations, rows: np.ndarray | None, explore: bool,
        rng: np.random.Generator, is_learner: bool, recorded_codes: set[int], recorder: _Recorder | None,
        env_ids: np.ndarray, space: Space, opponent_epsilon: float,
    ) -> np.ndarray:
        """The actions of one policy (``code``) on ``rows`` of the batch (None: all)."""
        sub = batch if rows is None else _take(batch, rows)
        if code == IDLE:
            return _any_legal(sub, space)
        chosen = np.asarray(table.policies[code].act(sub, explore=explore and is_learner, rng=rng))
        if is_learner and recorder is not None and code in recorded_codes:
            recorder.decide(env_ids if rows is None else env_ids[rows], sub, chosen)
        elif not is_learner and opponent_epsilon > 0:
            chosen = _perturb(chosen, sub, space, opponent_epsilon, rng)
        return chosen


def _name(policy: Policy | None, names: Mapping[int, str] | None) -> str:
    """The name a joint view gives ``policy`` (an unnamed one: its class)."""
    if policy is None:
        return ""
    if names is not None and id(policy) in names:
        return names[id(policy)]
    return type(policy).__name__


def _applied(actions: np.ndarray, space: Space) -> np.ndarray:
    """What the env receives: Box actions clipped to the bounds (a learner's episode
    keeps the policy's own sample, e.g. a Gaussian draw past a bound, which is what its
    log-probability is of)."""
    return space.clip(actions) if isinstance(space, Box) else actions


def _cuts(step: Step) -> dict[tuple[str, int], Cut]:
    """``step.final`` by (agent, game): copies, since the env owns its buffers."""
    cuts: dict[tuple[str, int], Cut] = {}
    for agent, (env_ids, batch) in step.final.items():
        obs = np.array(batch.obs)
        masks = None if batch.mask is None else np.array(batch.mask)
        for row, slot in enumerate(env_ids.tolist()):
            cuts[(agent, int(slot))] = (obs[row], None if masks is None else masks[row])
    return cuts


def _take(batch: Observations, rows: np.ndarray) -> Observations:
    return Observations(
        obs=batch.obs[rows],
        mask=None if batch.mask is None else batch.mask[rows],
        keys=None if batch.keys is None else tuple(batch.keys[r] for r in rows),
        agent=batch.agent,
    )


def _slice(batch: Observations, start: int, stop: int) -> Observations:
    """Rows ``start:stop`` of ``batch`` (views)."""
    return Observations(
        obs=batch.obs[start:stop],
        mask=None if batch.mask is None else batch.mask[start:stop],
        keys=None if batch.keys is None else batch.keys[start:stop],
        agent=batch.agent,
    )


def _perturb(
    chosen: np.ndarray, batch: Observations, space: Space, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """``chosen`` with each row replaced, with probability ``epsilon``, by a uniformly
    random legal action."""
    rows = np.flatnonzero(rng.random(len(chosen)) < epsilon)
    if not len(rows):
        return chosen
    chosen = chosen.copy()
    if isinstance(space, Box):
        chosen[rows] = space.sample(rng, n=len(rows))
    else:
        mask = None if batch.mask is None else np.asarray(batch.mask)[rows]
        chosen[rows] = sample_rows(masked_uniform(mask, len(rows), space.n), rng)
    return chosen


def _any_legal(batch: Observations, space: Space) -> np.ndarray:
    """A legal action per row (for games with no more episodes to play)."""
    if isinstance(space, Box):
        return np.broadcast_to(space.clip(np.zeros(space.shape)), (len(batch), *space.shape)).copy()
    if batch.mask is None:
        return np.zeros(len(batch), dtype=np.int64)
    return np.asarray(batch.mask).argmax(axis=1)
