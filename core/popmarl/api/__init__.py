"""What a component author may import: the one public surface of popmarl for plugins.

Algorithms, envs, meta-solvers, scenarios, backends and trackers written outside the core
(the plugins under ``plugins/``, ``contrib/``, a user's own package) import from here and
from :mod:`popmarl.api.engine` (backend authors only), never from the core's other
modules, whose layout may change between versions. The names below are re-exported from
where the core defines them; each is listed once. :data:`API_VERSION` is the version of
this surface: a plugin declares the one it was built against (see
``popmarl plugins --check``).

Importing this module imports numpy and attrs and no heavy library.
"""

# The import statements are the list: ``X as X`` marks each name as re-exported.
from popmarl.api.version import API_VERSION as API_VERSION

# Errors: a UserError (and its subclasses) is the user's to fix, printed as one line.
from popmarl.errors import CheckpointError as CheckpointError
from popmarl.errors import ConfigError as ConfigError
from popmarl.errors import PluginError as PluginError
from popmarl.errors import PopmarlError as PopmarlError
from popmarl.errors import ResumeError as ResumeError
from popmarl.errors import SolverError as SolverError
from popmarl.errors import UnknownComponentError as UnknownComponentError
from popmarl.errors import UserError as UserError
from popmarl.config.conversion import did_you_mean as did_you_mean

# Components and their configs: a class with an attrs ``Config``, and its validators.
from popmarl.interfaces.component import Component as Component
from popmarl.interfaces.validators import at_least_one as at_least_one
from popmarl.interfaces.validators import layer_widths as layer_widths
from popmarl.interfaces.validators import non_negative as non_negative
from popmarl.interfaces.validators import optional as optional
from popmarl.interfaces.validators import positive as positive
from popmarl.interfaces.validators import unit_interval as unit_interval

# Envs and spaces.
from popmarl.interfaces.spaces import Box as Box
from popmarl.interfaces.spaces import Discrete as Discrete
from popmarl.interfaces.spaces import Space as Space
from popmarl.interfaces.env import CorrelatedProfile as CorrelatedProfile
from popmarl.interfaces.env import Env as Env
from popmarl.interfaces.env import ExactEnv as ExactEnv
from popmarl.interfaces.env import MixedProfile as MixedProfile
from popmarl.interfaces.env import Profile as Profile
from popmarl.interfaces.env import Step as Step
from popmarl.interfaces.env import VectorEnv as VectorEnv
from popmarl.interfaces.env_traits import EnvTraits as EnvTraits
from popmarl.interfaces.match import Action as Action
from popmarl.interfaces.match import Match as Match

# Policies.
from popmarl.interfaces.policy import ExplicitPolicy as ExplicitPolicy
from popmarl.interfaces.policy import MixedStrategyPolicy as MixedStrategyPolicy
from popmarl.interfaces.policy import Policy as Policy
from popmarl.interfaces.policy import epsilon_greedy as epsilon_greedy
from popmarl.interfaces.policy import masked_uniform as masked_uniform
from popmarl.interfaces.policy import sample_rows as sample_rows

# Algorithms, trainers and a trainer's state files.
from popmarl.interfaces.population_algorithm import PopulationAlgorithm as PopulationAlgorithm
from popmarl.interfaces.algorithm import Algorithm as Algorithm
from popmarl.interfaces.algorithm import BestResponseProblem as BestResponseProblem
from popmarl.interfaces.algorithm import PolicySpace as PolicySpace
from popmarl.interfaces.algorithm import TrainerContext as TrainerContext
from popmarl.interfaces.trainer import Trainer as Trainer
from popmarl.interfaces.trainer import TrainerState as TrainerState
from popmarl.interfaces.trainer_files import TRAINER_FORMAT as TRAINER_FORMAT
from popmarl.interfaces.trainer_files import TRAINER_FILE as TRAINER_FILE
from popmarl.interfaces.trainer_files import first_line as first_line
from popmarl.interfaces.trainer_files import json_bytes as json_bytes
from popmarl.interfaces.trainer_files import npz_bytes as npz_bytes
from popmarl.interfaces.trainer_files import read_json as read_json
from popmarl.interfaces.trainer_files import read_npz as read_npz
from popmarl.interfaces.trainer_files import read_trainer_json as read_trainer_json
from popmarl.interfaces.trainer_files import state_file as state_file
from popmarl.interfaces.trainer_files import trainer_json as trainer_json

# Meta-solvers and the meta-game arithmetic they use.
from popmarl.interfaces.solver import JointMetaSolver as JointMetaSolver
from popmarl.interfaces.solver import MetaSolver as MetaSolver
from popmarl.interfaces.solver import SolverResult as SolverResult
from popmarl.interfaces.solver import joint_metrics as joint_metrics
from popmarl.interfaces.solver import solution_metrics as solution_metrics
from popmarl.gametheory.metagame import batch_expected_payoffs as batch_expected_payoffs
from popmarl.gametheory.metagame import check_joint as check_joint
from popmarl.gametheory.metagame import check_payoffs as check_payoffs
from popmarl.gametheory.metagame import deviation_payoffs as deviation_payoffs
from popmarl.gametheory.metagame import marginals as marginals
from popmarl.gametheory.metagame import nash_conv as nash_conv
from popmarl.gametheory.payoffs import PayoffTable as PayoffTable

# Ratings of the players of a cross-play tournament (``popmarl rank``).
from popmarl.interfaces.rating import CrossPlay as CrossPlay
from popmarl.interfaces.rating import Rating as Rating
from popmarl.gametheory.ratings import elo as elo
from popmarl.gametheory.ratings import head_to_head as head_to_head

# Backends, scenarios, trackers and lifecycle hooks.
from popmarl.interfaces.backend import Backend as Backend
from popmarl.interfaces.backend import Components as Components
from popmarl.interfaces.backend import RunSetup as RunSetup
from popmarl.scenario.base import IterationState as IterationState
from popmarl.scenario.base import IterativeScenario as IterativeScenario
from popmarl.scenario.base import Work as Work
from popmarl.scenario.base import RunContext as RunContext
from popmarl.scenario.base import Scenario as Scenario
from popmarl.interfaces.tracker import Tracker as Tracker
from popmarl.interfaces.hookspec import hookimpl as hookimpl
from popmarl.plugins.registry import KINDS as KINDS
from popmarl.plugins.registry import Registries as Registries

# The records components receive and return.
from popmarl.data.tasks import BestResponseResult as BestResponseResult
from popmarl.data.tasks import BestResponseTask as BestResponseTask
from popmarl.data.episodes import Episode as Episode
from popmarl.data.episodes import EpisodeBatch as EpisodeBatch
from popmarl.data.tasks import EvalResult as EvalResult
from popmarl.data.tasks import EvalTask as EvalTask
from popmarl.data.policies import FrozenPolicy as FrozenPolicy
from popmarl.data.learners import LearnerInit as LearnerInit
from popmarl.data.learners import LearnerSpec as LearnerSpec
from popmarl.data.learners import LearnerState as LearnerState
from popmarl.data.meta_strategy import MetaStrategy as MetaStrategy
from popmarl.data.episodes import Observations as Observations
from popmarl.data.policies import PolicySpec as PolicySpec
from popmarl.data.run import RunInfo as RunInfo
from popmarl.data.headline import ProgressFigure as ProgressFigure
from popmarl.data.headline import headline as headline
from popmarl.data.tasks import TrainBudget as TrainBudget
from popmarl.data.tasks import TrainResult as TrainResult
from popmarl.data.tasks import TrainTask as TrainTask
from popmarl.data.policies import Weights as Weights
from popmarl.data.outcomes import PlayedGames as PlayedGames
from popmarl.data.outcomes import outcome_indicators as outcome_indicators
from popmarl.data.trajectories import JointEpisodes as JointEpisodes
from popmarl.data.trajectories import SeatRows as SeatRows
from popmarl.data.seeds import seed32 as seed32
from popmarl.data.seeds import stream_seed as stream_seed
from popmarl.data.atomic import json_default as json_default
from popmarl.data.atomic import read_json_lines as read_json_lines
from popmarl.data.atomic import write_bytes as write_bytes
from popmarl.data.atomic import write_json as write_json
