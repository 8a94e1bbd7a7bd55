"""The joint view (``Algorithm.joint_view``): a learner receives every seat's rows of each
game aligned by step, the state where the env has one, and each seat's outcome — checked
against games played again by hand, on an AEC game without state (tic-tac-toe), a
parallel one with ``state()`` (mpe2 simple spread), one whose seats differ in spaces
(speaker/listener) and OpenSpiel Leduc (every player's information state)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyspiel
import pytest

from popmarl.interfaces.algorithm import Algorithm, PolicySpace, TrainerContext
from popmarl.builtin.random_policy import BoxRandomPolicy, UniformRandomPolicy
from popmarl.interfaces.env import Env
from popmarl.errors import ConfigError
from popmarl.interfaces.policy import Policy
from popmarl.data.episodes import Episode
from popmarl.data.learners import LearnerSpec
from popmarl.data.meta_strategy import MetaStrategy
from popmarl.data.tasks import TrainBudget, TrainTask
from popmarl.engine.rollout import RolloutWorker
from popmarl.engine.seating import OpponentDraw, Seating
from popmarl.interfaces.spaces import Discrete
from popmarl.interfaces.trainer import Trainer, TrainerState
from popmarl.data.trajectories import JointEpisodes
from popmarl_openspiel.env import OpenSpielEnv
from popmarl_pettingzoo.env import PettingZooEnv


def _pz(module: str) -> PettingZooEnv:
    return PettingZooEnv(config=PettingZooEnv.Config(module=module))


def _random(env: Env, agent: str) -> Policy:
    space = env.action_space(agent)
    return UniformRandomPolicy(space.n) if isinstance(space, Discrete) else BoxRandomPolicy(space)


def _joint(env: Env, *, games: int, num_envs: int = 4, seed: int = 0) -> JointEpisodes:
    """The first seat learns from the joint view (uniformly random play) against random
    opponents named ``opp``; ``games`` games."""
    first, *others = env.agents
    opponents = [_random(env, a) for a in others]
    draw = OpponentDraw({a: ([p], np.ones(1)) for a, p in zip(others, opponents)})
    draw.names = {id(p): "opp" for p in opponents}
    played = RolloutWorker(env=env, num_envs=num_envs).explore(
        learners=[Seating(policy=_random(env, first), seats=(first,), name="me", joint=True)],
        opponents=draw, max_episodes=games, max_steps=None, seed=seed)
    (joint,) = played.episodes
    assert isinstance(joint, JointEpisodes)
    assert len(joint) == games == len(played.tags)
    return joint


def _common(joint: JointEpisodes, env: Env) -> None:
    """What holds on every env: rows aligned, non-acting rows empty, rewards adding up to
    the returns, names and outcomes."""
    assert joint.seats == env.agents
    assert joint.policy_names == ("me", "opp")
    assert (joint.policies[:, 0] == 0).all() and (joint.policies[:, 1:] == 1).all()
    assert joint.own[:, 0].all() and not joint.own[:, 1:].any()
    game = joint.game_of_row
    for seat in env.agents:
        rows = joint.rows[seat]
        assert len(rows.obs) == len(rows.actions) == len(rows.acted) == joint.steps
        assert env.observation_space(seat).shape == rows.obs.shape[1:]
        idle = ~rows.acted
        assert not rows.obs[idle].any() and not np.asarray(rows.actions)[idle].any()
        if rows.masks is not None:
            assert not rows.masks[idle].any() and rows.masks[rows.acted].any(axis=1).all()
        totals = np.bincount(game, weights=rows.rewards, minlength=len(joint))
        np.testing.assert_allclose(totals, joint.returns[:, env.agents.index(seat)], atol=1e-4)
    acting = np.stack([joint.rows[s].acted for s in env.agents], axis=1)
    assert acting.any(axis=1).all(), "every step has a seat that acted"
    np.testing.assert_array_equal(joint.outcomes(), np.sign(joint.returns - joint.returns[:, ::-1])
                                  if len(env.agents) == 2 else joint.outcomes())


def test_tictactoe_rows_replay_by_hand() -> None:
    from pettingzoo.classic import tictactoe_v3

    env = _pz("pettingzoo.classic.tictactoe_v3")
    assert env.state_space is None
    joint = _joint(env, games=12)
    _common(joint, env)
    assert joint.state is None and joint.final_state is None
    for g in range(len(joint)):
        hand = tictactoe_v3.env()
        hand.reset(seed=0)
        totals = dict.fromkeys(env.agents, 0.0)
        for r in range(joint.starts[g], joint.starts[g + 1]):
            (seat,) = [s for s in env.agents if joint.rows[s].acted[r]]  # one seat per AEC step
            assert seat == hand.agent_selection
            observed = hand.observe(seat)
            np.testing.assert_array_equal(joint.rows[seat].obs[r], observed["observation"].reshape(-1))
            np.testing.assert_array_equal(joint.rows[seat].masks[r], observed["action_mask"].astype(bool))
            hand.step(int(joint.rows[seat].actions[r]))
            for agent in env.agents:
                totals[agent] += hand.rewards[agent]
        assert not hand.agents or all(hand.terminations.values())
        np.testing.assert_array_equal(joint.returns[g], [totals[a] for a in env.agents])
        winner = np.sign([totals[a] - totals[b] for a, b in zip(env.agents, env.agents[::-1])])
        np.testing.assert_array_equal(joint.outcomes()[g], winner)


@pytest.mark.parametrize("module", ["mpe2.simple_spread_v3", "mpe2.simple_speaker_listener_v4"])
def test_mpe_state_is_every_observation_at_the_same_step(module: str) -> None:
    env = _pz(module)
    assert env.state_space is not None
    joint = _joint(env, games=6, num_envs=3)
    _common(joint, env)
    assert joint.state is not None and joint.final_state is not None
    assert joint.state.shape == (joint.steps, *env.state_space.shape)
    assert np.diff(joint.starts).tolist() == [25] * 6  # max_cycles: every seat acts every step
    assert joint.truncated.all()
    # mpe2's state() is every agent's observation, concatenated: the rows line up.
    np.testing.assert_allclose(joint.state, np.concatenate([joint.rows[s].obs for s in env.agents], axis=1),
                               atol=1e-6)
    for g in range(len(joint)):
        finals = [joint.rows[s].final_obs[g] for s in env.agents]
        np.testing.assert_allclose(joint.final_state[g], np.concatenate(finals), atol=1e-6)
    if "speaker" in module:  # seats differ: the speaker sees 3 numbers and says 1 of 3 words; the listener moves
        assert joint.rows["speaker_0"].obs.shape[1] == 3 and joint.rows["listener_0"].obs.shape[1] == 11
        assert joint.rows["speaker_0"].actions.max() < 3 <= joint.rows["listener_0"].actions.max()


def test_leduc_state_is_every_information_state_and_games_replay() -> None:
    env = OpenSpielEnv(config=OpenSpielEnv.Config(game="leduc_poker"))
    joint = _joint(env, games=20)
    _common(joint, env)
    assert joint.state is not None and joint.final_state is not None
    size = env.observation_space("player_0").shape[0]
    assert joint.state.shape == (joint.steps, 2 * size)
    for k, seat in enumerate(env.agents):
        acted = joint.rows[seat].acted
        np.testing.assert_array_equal(joint.state[acted, k * size:(k + 1) * size], joint.rows[seat].obs[acted])
    game = pyspiel.load_game("leduc_poker")
    for g in range(len(joint)):
        # The deal, read from the final information states (one-hot private and public cards).
        final = joint.final_state[g].reshape(2, size)
        private = [int(np.argmax(final[p, 2:8])) for p in range(2)]
        public = int(np.argmax(final[0, 8:14])) if final[0, 8:14].any() else None
        state = game.new_initial_state()
        for card in private:
            state.apply_action(card)
        for r in range(joint.starts[g], joint.starts[g + 1]):
            if state.is_chance_node():
                assert public is not None
                state.apply_action(public)
            (seat,) = [s for s in env.agents if joint.rows[s].acted[r]]
            assert env.agents.index(seat) == state.current_player()
            np.testing.assert_array_equal(joint.rows[seat].obs[r],
                                          state.information_state_tensor(state.current_player()))
            state.apply_action(int(joint.rows[seat].actions[r]))
        assert state.is_terminal()
        np.testing.assert_array_equal(joint.returns[g], state.returns())


def test_only_a_joint_learner_records_other_seats() -> None:
    """A learner that does not ask for the joint view gets its own decisions, as before."""
    env = _pz("pettingzoo.classic.tictactoe_v3")
    first, second = env.agents
    draw = OpponentDraw({second: ([_random(env, second)], np.ones(1))})
    played = RolloutWorker(env=env, num_envs=4).explore(
        learners=[Seating(policy=_random(env, first), seats=(first,))], opponents=draw, max_episodes=5,
        max_steps=None, seed=0)
    (own,) = played.episodes
    assert not isinstance(own, JointEpisodes)
    assert set(own.agents) == {first}


class _Recording(Trainer):
    """Keeps what it was given."""

    def __init__(self, context: TrainerContext | None) -> None:
        self.context = context
        self.received: list[Any] = []

    def update(self, episodes: Sequence[Episode]) -> Mapping[str, float]:
        self.received.append(episodes)
        return {}

    def state(self) -> TrainerState:
        return {}

    def load_state(self, state: TrainerState) -> None:
        pass


class _JointRandom(Algorithm):
    learns = True
    joint_view = True
    needs_state = True
    made: list[_Recording] = []

    def make_policy(self, *, space: PolicySpace, seed: int) -> Policy:
        return UniformRandomPolicy(space.action_space.n) if isinstance(space.action_space, Discrete) \
            else BoxRandomPolicy(space.action_space)

    def make_trainer(self, *, policy: Policy, space: PolicySpace, seed: int, context: TrainerContext) -> Trainer:
        trainer = _Recording(context)
        self.made.append(trainer)
        return trainer


def test_a_joint_trainer_gets_its_context_and_games_through_run_task() -> None:
    from popmarl.interfaces.population_algorithm import PopulationAlgorithm
    from popmarl.engine.learners import Learners
    from popmarl.engine.learner_loop import run_task

    env = _pz("mpe2.simple_speaker_listener_v4")
    speaker, listener = env.agents
    space = PolicySpace(population="speaker", agents=(speaker,), observation_space=env.observation_space(speaker),
                        action_space=env.action_space(speaker))
    frozen = {"listener_0": _random(env, listener)}
    agents = {"speaker": PopulationAlgorithm(space=space, algorithm=_JointRandom(), env=env)}
    task = TrainTask(learners=(LearnerSpec(key="team", population="speaker", seats=(speaker,), seed=1),),
                     seed=3, budget=TrainBudget(max_episodes=8, episodes_per_update=4),
                     opponents=MetaStrategy.pure({listener: "listener_0"}))
    run_task(task, learners=Learners(agents), rollout=RolloutWorker(env=env, num_envs=4), policy_of=frozen.__getitem__)
    trainer = _JointRandom.made[-1]
    assert trainer.context is not None
    assert trainer.context.own_seats == (speaker,) and set(trainer.context.seats) == {speaker, listener}
    assert trainer.context.seats[listener][0] == env.observation_space(listener)
    assert trainer.context.state_space == env.state_space
    assert [type(b) for b in trainer.received] == [JointEpisodes, JointEpisodes]
    assert [len(b) for b in trainer.received] == [4, 4]
    assert all(b.policy_names == ("team", "listener_0") for b in trainer.received)


def test_an_algorithm_that_needs_state_is_refused_on_an_env_without(tmp_path: Any) -> None:
    import popmarl

    registries = popmarl.Registries.current().with_component("algorithms", "joint_random", _JointRandom)
    config = popmarl.validate({
        "scenario": {"name": "marl"}, "algorithm": {"name": "joint_random"},
        "env": {"name": "pettingzoo", "params": {"module": "pettingzoo.classic.tictactoe_v3"}},
        "stopping": {"max_iterations": 1}}, registries=registries)
    with pytest.raises(ConfigError, match=r"^algorithm: joint_random \(population .*\) reads the env's global "
                                          r"state, and env PettingZooEnv has none"):
        popmarl.run(config, out=tmp_path / "run", registries=registries)
    assert not (tmp_path / "run").exists()


def _team_agents(env: Env, algorithm: Algorithm, names: Mapping[str, str] | None = None) -> dict[str, Any]:
    from popmarl.interfaces.population_algorithm import PopulationAlgorithm

    return {seat: PopulationAlgorithm(space=PolicySpace(population=seat, agents=(seat,),
                                                   observation_space=env.observation_space(seat),
                                                   action_space=env.action_space(seat)),
                                 algorithm=algorithm, env=env, algorithm_name=(names or {}).get(seat, "joint_random"))
            for seat in env.agents}


def _snapshot(population: str) -> Any:
    from popmarl.data.policies import PolicySpec

    return PolicySpec(policy_id=f"{population}/1", population=population, algorithm="joint_random", iteration=1)


def test_a_team_learner_owns_seats_of_two_populations_with_one_update_and_one_checkpoint(tmp_path: Any) -> None:
    """Speaker and listener are two populations (``per_player``); one team learner plays
    both: one trainer, given both policies and spaces, one joint view per round, a
    snapshot per population, one state that rebuilds the team."""
    from popmarl.engine.learners import Learners
    from popmarl.runs.rundir import RunDirectory
    from popmarl.engine.learner_loop import run_task

    env = _pz("mpe2.simple_speaker_listener_v4")
    speaker, listener = env.agents
    learners = Learners(_team_agents(env, _JointRandom()))
    spec = LearnerSpec(key="team", population=speaker, seats=(speaker, listener), seed=1,
                       snapshot=_snapshot(speaker), team_snapshots=(_snapshot(listener),))
    task = TrainTask(learners=(spec,), seed=3, budget=TrainBudget(max_episodes=8, episodes_per_update=4),
                     return_state=True)
    result = run_task(task, learners=learners, rollout=RolloutWorker(env=env, num_envs=4), policy_of={}.__getitem__)
    trainer = _JointRandom.made[-1]
    assert trainer.context is not None and set(trainer.context.policies) == {speaker, listener}
    assert trainer.context.spaces[listener].action_space == env.action_space(listener)
    assert trainer.context.policies[listener] is learners.held["team"].members[listener]
    assert [len(b) for b in trainer.received] == [4, 4] and all(b.own.all() for b in trainer.received)
    assert all(b.policy_names == ("team",) for b in trainer.received)
    by_population = {p.spec.population: p.weights for p in result.policies}
    assert {k: int(v["n_actions"]) for k, v in by_population.items()} == {speaker: 3, listener: 5}
    state = result.states["team"]
    assert state.population == speaker and int(state.members[listener]["n_actions"]) == 5
    # One checkpoint: saved and read back with its members; the team is rebuilt from it.
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.create("scenario: {name: marl}\n")
    run_dir.commit({"iteration": 1}, {}, learners={"team": state})
    (loaded,) = run_dir.load_learners(run_dir.load_state()[0]).values()
    assert int(loaded.members[listener]["n_actions"]) == 5
    rebuilt = Learners(_team_agents(env, _JointRandom())).rebuild(loaded, seats=spec.seats)
    assert set(rebuilt.members) == {speaker, listener}


def test_a_team_needs_one_algorithm_that_reads_the_joint_view() -> None:
    from popmarl.builtin.random_policy import RandomAlgorithm
    from popmarl.engine.learners import LearnerError, Learners

    env = _pz("mpe2.simple_speaker_listener_v4")
    speaker, listener = env.agents
    spec = LearnerSpec(key="team", population=speaker, seats=(speaker, listener), seed=1)
    with pytest.raises(LearnerError, match=r"^learner team: algorithm random learns from its own seats' decisions, "
                                           r"so it cannot train a team over populations speaker_0, listener_0"):
        Learners(_team_agents(env, RandomAlgorithm(), {speaker: "random", listener: "random"})).prepare(
            spec, {}.__getitem__)
    with pytest.raises(LearnerError, match=r"^learner team: a team over populations speaker_0, listener_0 trains "
                                           r"with one algorithm, and listener_0 do not use joint_random"):
        Learners(_team_agents(env, _JointRandom(), {listener: "ppo"})).prepare(spec, {}.__getitem__)
