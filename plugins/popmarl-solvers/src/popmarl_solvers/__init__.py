"""Meta-solvers for popmarl, registered under the ``popmarl.solvers`` entry-point group.

``nash`` (exact LP / Lemke–Howson / n-player support search), ``prd`` (projected
replicator dynamics), ``rm`` (regret matching), ``alpharank`` (α-Rank),
``fictitious_play``, ``uniform_biased``, and JPSRO's joint solvers ``cce`` and ``ce``
((coarse) correlated equilibria: max Gini, max entropy or max welfare). Every solver
reports the NashConv of its answer on the meta-game as ``meta_nash_conv``; the joint
solvers also report their answer's CCE and CE gaps.
"""

from popmarl_solvers.alpharank import AlphaRank, AlphaRankConfig
from popmarl_solvers.correlated import CoarseCorrelated, Correlated, CorrelatedConfig
from popmarl_solvers.fictitious import FictitiousPlay, FictitiousPlayConfig
from popmarl_solvers.nash import Nash, NashConfig
from popmarl_solvers.regret_matching import RegretMatching, RMConfig
from popmarl_solvers.replicator import PRDConfig, ProjectedReplicatorDynamics
from popmarl_solvers.uniform_biased import UniformBiased, UniformBiasedConfig

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)

__all__ = [
    "AlphaRank",
    "AlphaRankConfig",
    "CoarseCorrelated",
    "Correlated",
    "CorrelatedConfig",
    "FictitiousPlay",
    "FictitiousPlayConfig",
    "Nash",
    "NashConfig",
    "PRDConfig",
    "ProjectedReplicatorDynamics",
    "RMConfig",
    "RegretMatching",
    "UniformBiased",
    "UniformBiasedConfig",
]
