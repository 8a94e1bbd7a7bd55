"""GPUs reserved for learner actors: the run warns when an algorithm configured with
``device: cpu`` would leave them idle (``device: auto``, the default, uses them)."""

from __future__ import annotations

from typing import Any

from popmarl.interfaces.backend import RunSetup
from popmarl.data.population import AgentMapping
from popmarl_ray import RayConfig
from popmarl_ray.backend import unused_gpus


def setup(**algorithms: tuple[str, dict[str, Any]]) -> RunSetup:
    mapping = AgentMapping.resolve("per_player", tuple(algorithms))
    return RunSetup(env_name="matrix", env_params={}, algorithms=algorithms, mapping=mapping, spaces={}, seed=0)


def test_a_gpu_reserved_for_a_cpu_learner_is_reported() -> None:
    mixed = setup(player_0=("dqn", {"device": "cpu"}), player_1=("ppo", {"device": "auto"}))
    message = unused_gpus(RayConfig(num_gpus_per_learner=0.5), mixed)
    assert message == ("ray backend: num_gpus_per_learner reserves 0.5 GPU per learner, but the algorithm of "
                       "player_0 has device: cpu and leaves it idle; use device: auto (or cuda) to train on it, "
                       "or num_gpus_per_learner: 0")


def test_no_warning_without_reserved_gpus_or_cpu_learners() -> None:
    on_cpu = setup(player_0=("dqn", {"device": "cpu"}), player_1=("dqn", {"device": "cpu"}))
    assert unused_gpus(RayConfig(), on_cpu) is None
    auto = setup(player_0=("dqn", {"device": "auto"}), player_1=("exact_matrix_br", {}))
    assert unused_gpus(RayConfig(num_gpus_per_learner=1), auto) is None
    both = unused_gpus(RayConfig(num_gpus_per_learner=1), on_cpu)
    assert both is not None and "the algorithm of player_0, player_1 has device: cpu" in both
