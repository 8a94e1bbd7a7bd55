"""The templates every solver of this package follows: validate, solve, clean, measure."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping

import numpy as np

from popmarl.api import (JointMetaSolver, MetaSolver, SolverResult, check_joint, check_payoffs, joint_metrics,
                         marginals, solution_metrics)

from popmarl_solvers.games import MetaGame, normalize
from popmarl_solvers.symmetric import use_symmetric

Mixtures = tuple[np.ndarray, ...]
Extra = Mapping[str, float | str]


class Solver(MetaSolver):
    """A meta-solver whose answer always comes with its measured regret.

    Subclasses implement :meth:`_solve`; this class checks the payoffs, resolves the
    ``symmetric`` option (when the Config has one), answers trivial games, makes each
    mixture a probability vector and reports ``meta_nash_conv`` next to the subclass's
    own metrics (``solver_method``, ``solver_iterations``, ...).
    """

    def solve(self, payoffs: np.ndarray) -> tuple[np.ndarray, ...]:
        """One mixture per population (see :meth:`solve_detailed` for the metrics)."""
        return self.solve_detailed(payoffs).mixtures

    def solve_detailed(self, payoffs: np.ndarray) -> SolverResult:
        """Solve ``payoffs`` shaped ``[n, |S_1|, ..., |S_n|]`` and measure the answer."""
        payoffs = check_payoffs(payoffs)
        symmetric = use_symmetric(getattr(self.config, "symmetric", False), payoffs)
        if all(k == 1 for k in payoffs.shape[1:]):
            mixtures: Mixtures = tuple(np.ones(1) for _ in payoffs.shape[1:])
            extra: Extra = {"solver_method": "trivial", "solver_iterations": 0}
        else:
            mixtures, extra = self._solve(payoffs, symmetric)
        mixtures = tuple(normalize(m) for m in mixtures)
        metrics = solution_metrics(payoffs, mixtures)
        metrics["solver_symmetric"] = float(symmetric)
        metrics.update(extra)
        return SolverResult(mixtures=mixtures, metrics=metrics)

    @abstractmethod
    def _solve(self, payoffs: np.ndarray, symmetric: bool) -> tuple[Mixtures, Extra]:
        """Mixtures for checked ``payoffs`` (not all 1×…×1) and the extra metrics."""


class DynamicsSolver(Solver):
    """A :class:`Solver` that runs learning dynamics on the meta-game (regret matching,
    replicator dynamics, fictitious play) for ``config.iterations`` steps.

    Subclasses implement :meth:`_dynamics` on a :class:`~popmarl_solvers.games.MetaGame`
    (one population for a game solved as symmetric); this class builds the game, expands
    the answer to every player and reports the method and the iterations.
    """

    def _solve(self, payoffs: np.ndarray, symmetric: bool) -> tuple[Mixtures, Extra]:
        game = MetaGame(payoffs, symmetric=symmetric)
        mixtures, method = self._dynamics(game)
        return game.expand(mixtures), {"solver_method": method, "solver_iterations": self.config.iterations}

    @abstractmethod
    def _dynamics(self, game: MetaGame) -> tuple[list[np.ndarray], str]:
        """The mixtures the dynamics answer, one per population of ``game``, and the
        method's name (``solver_method``)."""


class JointSolver(JointMetaSolver):
    """:class:`Solver`'s template for joint (correlated) solvers: validate, solve, measure.

    Subclasses implement :meth:`_solve_joint`; this class checks the payoffs, answers
    1-profile games, makes the answer a distribution over profiles and reports the
    marginals' ``meta_nash_conv``, the joint's ``meta_cce_gap``, ``meta_ce_gap``,
    ``meta_welfare`` and ``meta_joint_entropy`` next to the subclass's own metrics.
    """

    def solve_joint(self, payoffs: np.ndarray) -> np.ndarray:
        """A distribution over profiles (see :meth:`solve_detailed` for the metrics)."""
        joint = self.solve_detailed(payoffs).joint
        assert joint is not None
        return joint

    def solve_detailed(self, payoffs: np.ndarray) -> SolverResult:
        """Solve ``payoffs`` shaped ``[n, |S_1|, ..., |S_n|]`` and measure the answer."""
        payoffs = check_payoffs(payoffs)
        shape = payoffs.shape[1:]
        if all(k == 1 for k in shape):
            joint: np.ndarray = np.ones(shape)
            extra: Extra = {"solver_method": "trivial", "solver_iterations": 0}
        else:
            joint, extra = self._solve_joint(payoffs)
        joint = check_joint(joint, shape)
        mixtures = marginals(joint)
        metrics = {**solution_metrics(payoffs, mixtures), **joint_metrics(payoffs, joint), **extra}
        return SolverResult(mixtures=mixtures, joint=joint, metrics=metrics)

    @abstractmethod
    def _solve_joint(self, payoffs: np.ndarray) -> tuple[np.ndarray, Extra]:
        """A joint distribution for checked ``payoffs`` (not 1×…×1) and the extra metrics."""
