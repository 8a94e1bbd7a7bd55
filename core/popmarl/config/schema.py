"""The run configuration: attrs classes, and plain data validated into them.

Every problem is reported at once, each with its dotted path (``env.params.size: must
be >= 1, got 0``). Components are ``{name, params}`` (or a bare name); ``params`` is
validated against the component's own ``Config``. Reading a YAML file and ``--set``
overrides are :mod:`popmarl.config.loading`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs
import yaml

from popmarl.errors import ConfigError, UnknownComponentError
from popmarl.config.conversion import structure_attrs, unstructure
from popmarl.data.tasks import TrainBudget
from popmarl.interfaces.validators import at_least_one, non_negative, optional, positive, unit_interval
from popmarl.plugins.registry import Registries, RegistriesLike


@attrs.frozen(kw_only=True)
class ComponentConfig:
    """A component by registered name, with its parameters."""

    name: str
    params: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class AgentsConfig:
    """``per_player``, ``shared``, or ``{agent name or regex: population}``."""

    mapping: str | dict[str, str] = "per_player"


#: The wall-clock cap of a run whose ``stopping`` sets no cap of its own (30 minutes).
DEFAULT_MAX_WALL_TIME_S = 1800.0


@attrs.frozen(kw_only=True)
class StoppingConfig:
    """When the run ends: the first condition met wins.

    ``max_iterations``, ``max_wall_time_s``: caps; ``target_nash_conv``: psro, once the
    meta-strategy's NashConv (where the env computes it) is at most this; ``patience``:
    psro, once the meta-game has converged: for ``patience`` iterations in a row, the new
    policies gained at most ``min_gain`` (a share of the payoff table's range) against the
    meta-strategy they answered (the ``oracle_gain_share`` metric: PSRO's own estimate of
    its meta-strategy's NashConv, 0 once its oracle finds nothing better).

    A config that sets none of them gets its scenario's default
    (:attr:`popmarl.scenario.base.Scenario.default_stopping`: psro stops once converged, with
    ``patience`` 5, or after 30 minutes; marl and the league after 10 iterations); one
    that sets no cap (only a target or ``patience``) stops after 30 minutes at the latest."""

    max_iterations: int | None = attrs.field(default=None, validator=optional(non_negative))
    target_nash_conv: float | None = attrs.field(default=None, validator=optional(non_negative))
    max_wall_time_s: float | None = attrs.field(default=None, validator=optional(positive))
    patience: int | None = attrs.field(default=None, validator=optional(at_least_one))
    min_gain: float = attrs.field(default=0.01, validator=non_negative)

    @property
    def unset(self) -> bool:
        """Whether no condition is set (the scenario's default applies)."""
        return all(v is None for v in (self.max_iterations, self.target_nash_conv, self.max_wall_time_s,
                                       self.patience))

    def with_defaults(self, default: StoppingConfig) -> StoppingConfig:
        """The conditions in force: ``default`` where none is set; a cap of
        :data:`DEFAULT_MAX_WALL_TIME_S` where no cap is."""
        if self.unset:
            return default
        if self.max_iterations is None and self.max_wall_time_s is None:
            return attrs.evolve(self, max_wall_time_s=DEFAULT_MAX_WALL_TIME_S)
        return self


#: A ``psro`` best response's budget when ``training`` sets none (no ``max_env_steps``,
#: ``max_episodes``, ``max_wall_time_s``, ``min_env_steps``, ``patience``, ``target_return``
#: or ``target_win_rate``): train until the return against its opponents stops improving
#: for ``patience`` update rounds (:mod:`popmarl.engine.progress`), after at least
#: ``AUTO_MIN_GAMES`` games' worth of env steps and at most ``AUTO_MAX_GAMES`` games'
#: worth (a game's length as random play measures it: :mod:`popmarl.interfaces.env_traits`), and
#: never fewer than the ``..._ENV_STEPS`` floors (``benchmarks/defaults.py``).
AUTO_MIN_GAMES = 5_000
AUTO_MAX_GAMES = 25_000
AUTO_MIN_ENV_STEPS = 20_000
AUTO_MAX_ENV_STEPS = 200_000
AUTO_PATIENCE = 3
#: The env steps of a ``marl`` iteration and of a ``league`` round when
#: ``training.max_env_steps`` is unset.
ROUND_ENV_STEPS = 20_000


@attrs.frozen(kw_only=True)
class TrainingConfig:
    """One oracle training run (learning algorithms only): its budget, its early stop on
    a windowed return or win rate or on a plateau of the return (``patience`` update
    rounds without a significant improvement, after ``min_env_steps``; see
    :mod:`popmarl.engine.progress`), which snapshot it keeps, how it starts (``init``:
    ``newest_weights``, a new trainer on the weights of the population's newest policy;
    ``fresh``; or ``previous``: carry on from the population's newest policy with its
    trainer's state), how it plays (``opponent_epsilon``, ``self_play``), and how many
    best responses per population learn at once (``pipeline``: :mod:`popmarl.scenario.psro.pipeline`).

    The budget follows learning unless set: with none of its keys, a best response trains
    until its return plateaus, for at least 5,000 and at most 25,000 games' worth of env
    steps (at least 20,000 and 200,000: :data:`AUTO_MIN_GAMES` and the constants beside
    it), so that small games stop early and longer ones train longer; ``patience`` or
    ``min_env_steps`` alone keep that cap; any of ``max_env_steps``, ``max_episodes``,
    ``max_wall_time_s`` is the budget as given. The other defaults (``newest_weights``,
    ``opponent_epsilon`` from the algorithm: 0.3 for dqn and ppo, 0 for a2c; 0 in games
    with chance or simultaneous moves, 0.5 in long turn-based games without chance, where
    ``self_play`` is 0.5 too, else 0: :func:`popmarl.interfaces.algorithm.opponent_exploration`,
    :func:`popmarl.interfaces.algorithm.default_self_play`) are chosen by
    ``benchmarks/defaults.py`` across poker and board games: a new best response keeps what the
    population's newest policy learned, and in a turn-based game without chance its
    opponents sometimes move at random, so that it meets positions their policies never
    reach."""

    max_env_steps: int | None = attrs.field(default=None, validator=optional(at_least_one))
    min_env_steps: int | None = attrs.field(default=None, validator=optional(at_least_one))
    patience: int | None = attrs.field(default=None, validator=optional(at_least_one))
    max_episodes: int | None = attrs.field(default=None, validator=optional(at_least_one))
    max_wall_time_s: float | None = attrs.field(default=None, validator=optional(positive))
    episodes_per_update: int = attrs.field(default=128, validator=at_least_one)
    num_envs: int = attrs.field(default=64, validator=at_least_one)
    window: int = attrs.field(default=100, validator=at_least_one)
    target_return: float | None = None
    target_win_rate: float | None = attrs.field(default=None, validator=optional(unit_interval))
    keep: Literal["last", "best"] = "last"
    init: Literal["fresh", "previous", "newest_weights"] = "newest_weights"
    self_play: float | None = attrs.field(default=None, validator=optional(unit_interval))
    opponent_epsilon: float | None = attrs.field(default=None, validator=optional(unit_interval))
    #: psro: best responses learning at once per population (Pipeline PSRO; 1: PSRO).
    pipeline: int = attrs.field(default=1, validator=at_least_one)

    def __attrs_post_init__(self) -> None:
        if self.min_env_steps is not None and self.max_env_steps is not None and self.min_env_steps > self.max_env_steps:
            raise ValueError(f"min_env_steps ({self.min_env_steps}) exceeds max_env_steps ({self.max_env_steps})")

    def given(self, names: Iterable[str]) -> list[str]:
        """Which of the fields ``names`` the config sets (differ from the default)."""
        defaults = TrainingConfig()
        return [name for name in names if getattr(self, name) != getattr(defaults, name)]

    @property
    def capped(self) -> bool:
        """Whether the config caps a training run itself (``max_env_steps``,
        ``max_episodes`` or ``max_wall_time_s``)."""
        return any(v is not None for v in (self.max_env_steps, self.max_episodes, self.max_wall_time_s))

    @property
    def auto(self) -> bool:
        """Whether the budget follows learning by default (no budget key is set)."""
        return not self.capped and all(v is None for v in (self.min_env_steps, self.patience, self.target_return,
                                                           self.target_win_rate))

    @property
    def round_env_steps(self) -> int:
        """The env steps of a ``marl`` iteration or a ``league`` round: ``max_env_steps``,
        else :data:`ROUND_ENV_STEPS`."""
        return ROUND_ENV_STEPS if self.max_env_steps is None else self.max_env_steps

    def budget(self, algorithm_opponent_epsilon: float = 0.0, *, episode_steps: float = 0.0,
               self_play: float = 0.0, follows_learning: bool = True,
               max_env_steps: int | None = None) -> TrainBudget:
        """The budget of one training run, the one builder of every scenario's and tool's
        :class:`~popmarl.data.tasks.TrainBudget`: every field from the field of the same
        name here; ``opponent_epsilon``, when not set, from the learner's algorithm and
        the env (``algorithm_opponent_epsilon``:
        :func:`popmarl.interfaces.algorithm.opponent_exploration`), ``self_play``, when not
        set, the env's (``self_play``: :func:`popmarl.interfaces.algorithm.default_self_play`).

        ``follows_learning``: where no budget key is set, the budget follows learning (a
        ``psro`` best response's: see the class docstring; ``episode_steps``: a game's mean
        env steps, :attr:`popmarl.interfaces.env_traits.EnvTraits.episode_steps`). False
        (a ``marl`` iteration, a ``league`` round, a fixed stretch of training): the budget
        is the config's as given, with no plateau rule or cap added. ``max_env_steps``:
        the env steps of this training run in place of the config's (a round's length,
        :attr:`round_env_steps`, or a tool's own)."""
        fields = {f.name: getattr(self, f.name) for f in attrs.fields(TrainBudget)}
        if follows_learning and self.auto:
            fields.update(min_env_steps=max(AUTO_MIN_ENV_STEPS, round(AUTO_MIN_GAMES * episode_steps)),
                          patience=AUTO_PATIENCE)
        if follows_learning and not self.capped:
            cap = max(AUTO_MAX_ENV_STEPS, round(AUTO_MAX_GAMES * episode_steps))
            fields["max_env_steps"] = max(cap, fields["min_env_steps"] or 0)
        if max_env_steps is not None:
            fields["max_env_steps"] = max_env_steps
        if self.opponent_epsilon is None:
            fields["opponent_epsilon"] = algorithm_opponent_epsilon
        if self.self_play is None:
            fields["self_play"] = self_play
        return TrainBudget(**fields)


@attrs.frozen(kw_only=True)
class EvaluationConfig:
    """How payoff entries are estimated: exactly where the env allows (``auto``), else
    ``episodes_per_entry`` sampled episodes."""

    episodes_per_entry: int = attrs.field(default=100, validator=at_least_one)
    exact: Literal["auto", "never"] = "auto"
    num_envs: int = attrs.field(default=64, validator=at_least_one)
    #: psro: every N iterations, the metrics carry ``approx_nash_conv`` (:mod:`popmarl.tools.exploit`),
    #: its responses trained for ``approx_nash_conv_env_steps`` (null: ``popmarl exploit``'s default).
    approx_nash_conv_every: int | None = attrs.field(default=None, validator=optional(at_least_one))
    approx_nash_conv_env_steps: int | None = attrs.field(default=None, validator=optional(at_least_one))
    #: psro: the metrics carry ``elo/<population>``, the Elo of each population's newest
    #: policy (:mod:`popmarl.gametheory.ratings`; two-player games), from every payoff entry's
    #: win/draw/loss played once on a seed of its own.
    ratings: bool = False
    #: A run without exact NashConv: every N iterations (0: never) the metrics carry
    #: ``versus_random/<population>/win``, ``/draw``, ``/loss`` and ``/return``: each
    #: population's newest policy against uniformly random play in every seat it plays, over
    #: ``versus_random_episodes`` games per seat (``/team_return`` instead where one team
    #: plays every seat; :mod:`popmarl.scenario.progress`). Played on seeds of their own.
    versus_random_every: int = attrs.field(default=5, validator=non_negative)
    versus_random_episodes: int = attrs.field(default=50, validator=at_least_one)


@attrs.frozen(kw_only=True)
class RunConfig:
    """A whole run."""

    scenario: ComponentConfig = ComponentConfig(name="psro")
    seed: int = 0
    env: ComponentConfig
    agents: AgentsConfig = AgentsConfig()
    #: One component for every population, or ``{population: component}``.
    algorithm: ComponentConfig | dict[str, ComponentConfig]
    solver: ComponentConfig = ComponentConfig(name="uniform")
    backend: ComponentConfig = ComponentConfig(name="local")
    stopping: StoppingConfig = StoppingConfig()
    training: TrainingConfig = TrainingConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    trackers: list[ComponentConfig] = attrs.field(factory=lambda: [ComponentConfig(name="console")])


#: Top-level key -> registry kind, for the component fields.
COMPONENT_KINDS = {
    "scenario": "scenarios",
    "env": "envs",
    "algorithm": "algorithms",
    "solver": "solvers",
    "backend": "backends",
}


def per_population(spec: Any) -> bool:
    """Whether a raw ``algorithm`` value maps populations to components (a mapping
    without ``name``) rather than being one component."""
    return isinstance(spec, Mapping) and "name" not in spec and "params" not in spec


def _normalize_components(raw: dict[str, Any]) -> None:
    """Allow a bare name wherever a component is expected."""
    for key in COMPONENT_KINDS:
        if isinstance(raw.get(key), str):
            raw[key] = {"name": raw[key]}
    if per_population(raw.get("algorithm")):
        raw["algorithm"] = {p: {"name": c} if isinstance(c, str) else c for p, c in raw["algorithm"].items()}
    if isinstance(raw.get("trackers"), list):
        raw["trackers"] = [{"name": t} if isinstance(t, str) else t for t in raw["trackers"]]


def _check_component(kind: str, spec: ComponentConfig, path: str, problems: list[str],
                     found: Registries) -> ComponentConfig:
    registry = found.get(kind)
    try:
        cls = registry.load(spec.name)
    except UnknownComponentError as exc:
        problems.append(f"{path}.name: {exc}")
        return spec
    config_cls = getattr(cls, "Config", None)
    if config_cls is None or not attrs.has(config_cls):
        return spec
    config = structure_attrs(config_cls, dict(spec.params), f"{path}.params", problems)
    if config is None:
        return spec
    return ComponentConfig(name=spec.name, params=unstructure(config))


def _check_raw_components(raw: Mapping[str, Any], problems: list[str], found: Registries) -> None:
    """After a structural problem elsewhere: still check each well-formed component's name
    and params (a malformed one is already reported)."""
    specs = [(key, kind, raw.get(key)) for key, kind in COMPONENT_KINDS.items()]
    if per_population(raw.get("algorithm")):
        specs = [s for s in specs if s[0] != "algorithm"]
        specs += [(f"algorithm.{p}", "algorithms", c) for p, c in raw["algorithm"].items()]
    if isinstance(raw.get("trackers"), list):
        specs += [(f"trackers[{i}]", "trackers", t) for i, t in enumerate(raw["trackers"])]
    for path, kind, value in specs:
        spec = structure_attrs(ComponentConfig, value, path, []) if isinstance(value, Mapping) else None
        if spec is not None:
            _check_component(kind, spec, path, problems, found)


def validate(raw: Any, *, source: str = "config", registries: RegistriesLike | None = None) -> RunConfig:
    """Validate plain data into a :class:`RunConfig` with every component's params
    resolved (defaults filled in); raise :class:`ConfigError` listing every problem.
    Component names are looked up in ``registries`` (default: ``popmarl.<kind>``)."""
    found = Registries.of(registries)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: must be a mapping of top-level keys, got {type(raw).__name__}")
    raw = dict(raw)
    _normalize_components(raw)
    problems: list[str] = []
    config = structure_attrs(RunConfig, raw, "", problems)
    if config is None:
        _check_raw_components(raw, problems, found)  # so every problem is reported at once
        raise ConfigError(problems)
    resolved: dict[str, Any] = {}
    for key, kind in COMPONENT_KINDS.items():
        spec = getattr(config, key)
        if isinstance(spec, dict):
            resolved[key] = {p: _check_component(kind, c, f"{key}.{p}", problems, found) for p, c in spec.items()}
        else:
            resolved[key] = _check_component(kind, spec, key, problems, found)
    resolved["trackers"] = [
        _check_component("trackers", t, f"trackers[{i}]", problems, found) for i, t in enumerate(config.trackers)
    ]
    if problems:
        raise ConfigError(problems)
    return attrs.evolve(config, **resolved)


def population_algorithms(config: RunConfig, populations: Sequence[str]) -> dict[str, ComponentConfig]:
    """Each population's algorithm: the one component for all, or the run's mapping,
    which must name every population and no other."""
    if isinstance(config.algorithm, ComponentConfig):
        return {p: config.algorithm for p in populations}
    unknown = [p for p in config.algorithm if p not in populations]
    problems = [f"algorithm.{p}: no such population; the populations are {', '.join(populations)}" for p in unknown]
    missing = [p for p in populations if p not in config.algorithm]
    if missing:
        problems.append(f"algorithm: no algorithm for population(s) {', '.join(missing)}; the populations are "
                        f"{', '.join(populations)} (or give one algorithm for all)")
    if problems:
        raise ConfigError(problems)
    return {p: config.algorithm[p] for p in populations}


def to_dict(config: RunConfig) -> dict[str, Any]:
    """The resolved config as plain data (what ``config.yaml`` holds)."""
    return unstructure(config)


def dump(config: RunConfig) -> str:
    """The resolved config as YAML."""
    return yaml.safe_dump(to_dict(config), sort_keys=False)
