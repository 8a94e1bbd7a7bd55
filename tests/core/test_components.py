"""The component interfaces: every core component has an attrs Config with defaults, and
can be built by name with no arguments; the builtin solvers and algorithms behave."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import popmarl
from popmarl.interfaces.algorithm import PolicySpace
from popmarl.interfaces.component import Component
from popmarl.plugins.registry import KINDS
from popmarl.interfaces.spaces import Box, Discrete

CORE_COMPONENTS = [
    (kind, name) for kind in KINDS for name, entry in getattr(popmarl, kind).entries.items()
    if entry.distribution == "popmarl"
]
BASES = {
    "scenarios": popmarl.Scenario, "algorithms": popmarl.Algorithm, "envs": popmarl.Env,
    "solvers": popmarl.MetaSolver, "backends": popmarl.Backend, "trackers": popmarl.Tracker,
    "ratings": popmarl.Rating,
}


def test_public_api_re_exports() -> None:
    for name in ("hookimpl", "load_config", "run", "Registry", "ConfigError", "UserError", "PluginError",
                 "UnknownComponentError", "Policy", "Trainer", "PopulationAlgorithm", "RolloutWorker", *KINDS):
        assert hasattr(popmarl, name), name
    assert set(popmarl.__all__) <= set(dir(popmarl)) | set(KINDS)


def test_solvers_load_uniform_works_as_documented() -> None:
    uniform = popmarl.solvers.load("uniform")()
    payoffs = np.zeros((2, 3, 4))
    mixtures = uniform.solve(payoffs)
    assert isinstance(mixtures, tuple) and len(mixtures) == 2
    np.testing.assert_allclose(mixtures[0], np.full(3, 1 / 3))
    np.testing.assert_allclose(mixtures[1], np.full(4, 1 / 4))


@pytest.mark.parametrize(("kind", "name"), CORE_COMPONENTS, ids=[f"{k}:{n}" for k, n in CORE_COMPONENTS])
def test_each_core_component_has_a_config_with_defaults(kind: str, name: str) -> None:
    cls = getattr(popmarl, kind).load(name)
    assert issubclass(cls, Component) and issubclass(cls, BASES[kind])
    assert attrs.has(cls.Config), f"{name}.Config is not an attrs class"
    for field in attrs.fields(cls.Config):
        assert field.default is not attrs.NOTHING, f"{kind} {name}: Config.{field.name} has no default"
    instance = cls()
    assert instance.config == cls.Config()


def test_core_components_cover_every_kind() -> None:
    # Network models are torch modules: the core has no torch, popmarl-torch registers them.
    assert {kind for kind, _ in CORE_COMPONENTS} == set(KINDS) - {"models"}


def test_a_component_takes_params_or_a_config_but_not_both() -> None:
    matrix = popmarl.envs.load("matrix")
    assert matrix(game="matching_pennies").config.game == "matching_pennies"
    config = matrix.Config(game="prisoners_dilemma")
    assert matrix(config=config).config is config
    with pytest.raises(TypeError, match="not both"):
        matrix(config=config, game="rps")
    with pytest.raises(TypeError):
        matrix(gmae="rps")


def test_a_meta_solver_is_a_few_lines(tmp_path) -> None:
    """A user's solver: subclass, implement solve, and solve_detailed reports its regret."""

    class FirstPolicy(popmarl.MetaSolver):
        def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
            return tuple(np.eye(n)[0] for n in payoffs.shape[1:])

    rps = popmarl.envs.load("matrix")().payoffs
    result = FirstPolicy().solve_detailed(rps)
    assert [m.tolist() for m in result.mixtures] == [[1, 0, 0], [1, 0, 0]]
    assert result.metrics["meta_nash_conv"] == pytest.approx(2.0)  # rock vs rock: each gains 1 with paper
    assert result.metrics["meta_entropy_0"] == 0.0


def test_latest_solver_puts_all_weight_on_the_newest_policy() -> None:
    mixtures = popmarl.solvers.load("latest")().solve(np.zeros((3, 2, 4, 1)))
    assert [m.tolist() for m in mixtures] == [[0, 1], [0, 0, 0, 1], [1]]


@pytest.mark.parametrize("solver", ["uniform", "latest"])
def test_solvers_refuse_a_malformed_tensor(solver: str) -> None:
    instance = popmarl.solvers.load(solver)()
    with pytest.raises(ValueError, match="shape"):
        instance.solve(np.zeros((3, 2, 2)))  # 3 players need 3 strategy axes
    with pytest.raises(ValueError, match="NaN"):
        instance.solve_detailed(np.full((2, 2, 2), np.nan))


def _space(n: int) -> PolicySpace:
    return PolicySpace(population="p", agents=("player_0",), observation_space=Box(shape=(1,)),
                       action_space=Discrete(n=n))


@pytest.mark.parametrize(("initial", "expected"), [("first", [1, 0, 0]), ("uniform", [1 / 3] * 3)])
def test_exact_matrix_br_initial_policy(initial: str, expected: list[float]) -> None:
    algorithm = popmarl.algorithms.load("exact_matrix_br")(initial=initial)
    policy = algorithm.initial_policy(space=_space(3), seed=0)
    np.testing.assert_allclose(policy.get_weights()["probs"], expected)


def test_policy_weights_round_trip_through_plain_arrays() -> None:
    algorithm = popmarl.algorithms.load("exact_matrix_br")()
    policy = algorithm.make_policy(space=_space(3), seed=0)
    other = algorithm.make_policy(space=_space(3), seed=1)
    other.set_weights({"probs": np.array([0.0, 0.0, 1.0])})
    policy.set_weights(other.get_weights())
    weights = policy.get_weights()
    assert all(isinstance(v, np.ndarray) and v.dtype != object for v in weights.values())
    batch = popmarl.Observations(obs=np.ones((5, 1), np.float32))
    assert policy.act(batch, explore=False, rng=np.random.default_rng(0)).tolist() == [2] * 5


def test_random_algorithm_plays_uniformly_over_legal_actions() -> None:
    policy = popmarl.algorithms.load("random")().make_policy(space=_space(4), seed=0)
    mask = np.array([[1, 0, 1, 0]] * 4000, dtype=bool)
    actions = policy.act(popmarl.Observations(obs=np.ones((4000, 1)), mask=mask), explore=True,
                         rng=np.random.default_rng(0))
    assert set(actions.tolist()) == {0, 2}
    assert abs(np.mean(actions == 0) - 0.5) < 0.05
