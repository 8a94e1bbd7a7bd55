"""Capability flags (:class:`popmarl.interfaces.algorithm.Algorithm`): what an algorithm can
do is read from its flags only; ``make_trainer`` is always given its context; and
``popmarl plugins --check`` fails an algorithm whose flags contradict what it implements,
in one line (:func:`popmarl.interfaces.algorithm.flag_problems`)."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

import popmarl
from popmarl.builtin.matrix_env import MatrixEnv
from popmarl.cli.plugins import check_cell
from popmarl.interfaces.population_algorithm import PopulationAlgorithm
from popmarl.errors import ConfigError
from popmarl.interfaces.algorithm import Algorithm, PolicySpace, TrainerContext, flag_problems
from popmarl.interfaces.spaces import Box
from popmarl.plugins.check import Target, check


def _space(env: MatrixEnv, seat: str) -> PolicySpace:
    return PolicySpace(population=seat, agents=(seat,), observation_space=env.observation_space(seat),
                       action_space=env.action_space(seat))


def _trainer(self: Any, *, policy: Any, space: Any, seed: int, context: TrainerContext) -> Any:
    return object()


def _answer(self: Any, problem: Any) -> Any:
    return None


def _algorithm(name: str, **body: Any) -> type[Algorithm]:
    """An algorithm class ``name`` with the flags and methods of ``body``, besides a policy."""
    return type(name, (popmarl.Algorithm,), {"make_policy": lambda self, *, space, seed: None, **body})


#: One algorithm per contradiction, with the line ``plugins --check`` gives it.
CONTRADICTIONS = {
    "learns_without_trainer": ({"learns": True},
                               "sets learns = True and does not override make_trainer"),
    "trainer_without_learns": ({"make_trainer": _trainer},
                               "overrides make_trainer and leaves learns False, so it is never called; "
                               "set learns = True"),
    "answers_without_answer": ({"answers": True},
                               "sets answers = True and does not override best_response"),
    "answer_without_answers": ({"best_response": _answer},
                               "overrides best_response and leaves answers False, so it is never called; "
                               "set answers = True"),
    "correlated_without_answers": ({"answers_correlated": True},
                                   "sets answers_correlated = True and leaves answers False "
                                   "(answers_correlated implies answers)"),
    "joint_view_without_learns": ({"joint_view": True},
                                  "sets joint_view = True and leaves learns False (joint_view implies learns)"),
    "team_without_joint_view": ({"learns": True, "make_trainer": _trainer, "trains_team": True},
                                "sets trains_team = True and leaves joint_view False (trains_team implies joint_view)"),
}


@pytest.mark.parametrize("name", sorted(CONTRADICTIONS))
def test_each_contradiction_is_one_line_naming_the_flag_and_the_method(name: str) -> None:
    body, message = CONTRADICTIONS[name]
    assert flag_problems(_algorithm(name, **body)) == [f"{name} {message}"]


def test_flags_that_agree_with_the_methods_are_no_problem() -> None:
    assert flag_problems(_algorithm("learner", learns=True, make_trainer=_trainer)) == []
    assert flag_problems(_algorithm("oracle", answers=True, answers_correlated=True, best_response=_answer)) == []
    assert flag_problems(_algorithm("team", learns=True, joint_view=True, trains_team=True,
                                    make_trainer=_trainer)) == []
    assert flag_problems(_algorithm("neither")) == []


def _source(name: str, body: dict[str, Any]) -> str:
    """The module source of one probe algorithm class ``name`` with ``body``'s flags and methods."""
    lines = [f"class {name}(Algorithm):", "    def make_policy(self, *, space, seed):", "        return None"]
    for key, value in body.items():
        if value is _trainer:
            lines += ["    def make_trainer(self, *, policy, space, seed, context):", "        return None"]
        elif value is _answer:
            lines += ["    def best_response(self, problem):", "        return None"]
        else:
            lines.append(f"    {key} = {value!r}")
    return "\n".join(lines) + "\n"


def test_plugins_check_fails_each_algorithm_whose_flags_contradict_it(make_dist) -> None:
    """The check's child interpreter imports each probe and holds its flags against it: a
    contradiction fails the row with one line; flags that agree pass."""
    bodies = {**{name: body for name, (body, _) in CONTRADICTIONS.items()},
              "agreeing": {"learns": True, "make_trainer": _trainer}}
    source = "from popmarl.api import Algorithm\n\n\n" + "\n\n".join(_source(n, b) for n, b in bodies.items())
    make_dist("popmarl-probe-flags", version="0.1.0",
              entry_points={"popmarl.algorithms": {name: f"probe_flags_mod:{name}" for name in bodies}},
              modules={"probe_flags_mod": source})
    targets = [Target(group="popmarl.algorithms", name=name, value=f"probe_flags_mod:{name}") for name in bodies]
    found = {t.name: checked for t, checked in check({"popmarl-probe-flags": targets}).items()}
    for name, (_, message) in CONTRADICTIONS.items():
        cell = check_cell(found[name], "popmarl-probe-flags", "0.1.0")
        assert cell == f"FAILED: capability flags: {name} {message}", cell
    assert found["agreeing"].problem is None


def test_every_registered_algorithms_flags_agree_with_what_it_implements() -> None:
    for name in popmarl.algorithms.names():
        assert flag_problems(popmarl.algorithms.load(name)) == [], name


def test_make_trainer_takes_its_context_for_every_registered_algorithm() -> None:
    """Every registered algorithm that learns is built with its defaults and starts a
    learner on rock-paper-scissors (one that refuses discrete actions, ``sac``, on a
    bounded Box of the same seat): its make_trainer is called with the learner's context
    (a keyword it must take, with no default); one that does not learn is not asked."""
    env = MatrixEnv(game="rps")
    discrete = _space(env, env.agents[0])
    continuous = attrs.evolve(discrete, action_space=Box(shape=(1,), low=-1.0, high=1.0))
    for name in popmarl.algorithms.names():
        cls = popmarl.algorithms.load(name)
        try:
            cls().make_policy(space=discrete, seed=0)
            space = discrete
        except ConfigError:
            space = continuous
        parameter = inspect.signature(cls.make_trainer).parameters.get("context")
        assert parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameter.default is inspect.Parameter.empty, name
        algorithm = cls()
        made: list[TrainerContext] = []
        original = algorithm.make_trainer

        def spy(*, context: TrainerContext, _made: list[TrainerContext] = made, _original: Any = original,
                **kwargs: Any) -> Any:
            _made.append(context)
            return _original(context=context, **kwargs)

        algorithm.make_trainer = spy  # type: ignore[method-assign]
        agent = PopulationAlgorithm(space=space, algorithm=algorithm, env=env, algorithm_name=name)
        policy, trainer = agent.new_learner(seed=0)
        if not cls.learns:
            assert made == [] and trainer is None, name
            continue
        assert trainer is not None, name
        (context,) = made
        assert context.own_seats == space.agents and context.policies == {space.population: policy}, name
        assert context.spaces == {space.population: space} and context.state_space is None, name


def test_the_flag_decides_whether_a_trainer_is_made() -> None:
    """An algorithm that overrides make_trainer and leaves ``learns`` False does not learn:
    the flag is what the engine reads (``plugins --check`` reports the contradiction)."""
    env = MatrixEnv(game="rps")
    unflagged = _algorithm("Unflagged", make_trainer=_trainer)
    agent = PopulationAlgorithm(space=_space(env, "player_0"), algorithm=unflagged(), env=env)
    assert not agent.learns and agent.new_learner(seed=0)[1] is None
    flagged = _algorithm("Flagged", learns=True, make_trainer=_trainer)
    agent = PopulationAlgorithm(space=_space(env, "player_0"), algorithm=flagged(), env=env)
    assert agent.learns and agent.new_learner(seed=0)[1] is not None
