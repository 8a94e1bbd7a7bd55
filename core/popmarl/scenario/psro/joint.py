"""JPSRO's joint meta-strategy (Marris et al. 2021): the other seats drawn together from it,
its support, and its CCE and CE gaps in the real game."""

from __future__ import annotations

from typing import Any

import numpy as np

from popmarl.data.meta_strategy import MetaStrategy
from popmarl.gametheory.metagame import JOINT_SUPPORT_TOL, joint_support
from popmarl.interfaces.env import correlated_profile
from popmarl.interfaces.solver import JointMetaSolver
from popmarl.scenario.meta_game import exact_env
from popmarl.scenario.psro.state import PSROBase, PSROState


class PSROJoint(PSROBase):
    """What PSRO does with a joint solver's (``cce``, ``ce``) distribution over profiles."""

    def joint_opponents(self, state: PSROState, seat: int) -> list[MetaStrategy]:
        """The other seats' profiles drawn together from the joint meta-strategy:
        marginalised over ``seat`` (CCE), or one distribution per policy of ``seat`` it
        recommends, conditioned on that recommendation (CE)."""
        solver = self.ctx.solver
        conditional = isinstance(solver, JointMetaSolver) and solver.conditional
        return [opponents for _, opponents, _ in self._joint_slices(state, seat, conditional=conditional)]

    def _joint_slices(self, state: PSROState, seat: int, *,
                      conditional: bool) -> list[tuple[float, MetaStrategy, float]]:
        """(weight, the other seats' distribution, ``seat``'s on-policy value under it):
        the joint marginalised over ``seat`` (weight 1), or conditioned on each policy of
        ``seat`` it recommends (weight: that policy's marginal probability)."""
        assert state.joint is not None
        agents = self.ctx.env.agents
        others = tuple(a for k, a in enumerate(agents) if k != seat)
        axis_ids = [ids for k, ids in enumerate(self._axis_ids(state.policies)) if k != seat]
        joint, values = np.moveaxis(state.joint, seat, 0), np.moveaxis(state.table.values[seat], seat, 0)
        if conditional:
            slices = [(float(joint[i].sum()), joint[i], values[i]) for i in range(joint.shape[0])]
        else:
            slices = [(1.0, joint.sum(axis=0), (joint * values).sum(axis=0) / np.maximum(joint.sum(axis=0), 1e-300))]
        result = []
        for weight, dist, value in slices:
            index = np.argwhere(dist > JOINT_SUPPORT_TOL)
            if weight <= JOINT_SUPPORT_TOL or len(index) == 0:
                continue
            probabilities = dist[tuple(index.T)] / dist[tuple(index.T)].sum()
            profiles = tuple(tuple(axis_ids[j][i] for j, i in enumerate(row)) for row in index)
            on_policy = float(probabilities @ value[tuple(index.T)])
            result.append((weight, MetaStrategy.correlated(others, profiles, probabilities),
                           on_policy))
        return result

    def correlated_gaps(self, state: PSROState) -> dict[str, float]:
        """The joint meta-strategy's CCE and CE gaps in the real game, as OpenSpiel's
        ``jpsro.py`` reports them: per seat, the value of a best response to the other
        seats drawn from the joint (CCE: marginalised over the seat; CE: conditioned on
        each recommendation, weighted by its probability) minus the on-policy value,
        floored at 0, summed over seats; the CE gap only for CE solvers (it takes a best
        response per recommendation). Empty without a joint meta-strategy or where the env
        cannot compute such best responses."""
        env, solver = exact_env(self.ctx.env) if state.joint is not None else None, self.ctx.solver
        if env is None:
            return {}
        gaps = {}
        # The CE gap needs a best response per recommendation: for CE solvers only.
        conditional = isinstance(solver, JointMetaSolver) and solver.conditional
        for name, conditional in (("cce_gap", False), ("ce_gap", True))[:2 if conditional else 1]:
            total = 0.0
            for seat, agent in enumerate(env.agents):
                for weight, opponents, on_policy in self._joint_slices(state, seat, conditional=conditional):
                    profiles = correlated_profile(opponents, self.policies.__getitem__)
                    assert profiles is not None
                    value = env.correlated_best_response_value(agent, profiles)
                    if value is None:
                        return {}
                    total += weight * max(value - on_policy, 0.0)
            gaps[name] = total
        return gaps

    def joint_meta_strategy(self, state: PSROState) -> dict[str, Any]:
        """The joint meta-strategy's support: the seats, one policy id per seat for each
        profile, and the profiles' probabilities (``popmarl eval`` draws from it)."""
        assert state.joint is not None
        profiles, probabilities = joint_support(state.joint, self._axis_ids(state.policies))
        return {"agents": list(self.ctx.env.agents), "profiles": profiles, "probabilities": probabilities}
