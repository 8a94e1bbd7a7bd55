"""A DQN update round's samples, drawn and preprocessed once for all its gradient steps.

Per gradient step Tianshou's off-policy update samples a batch from the replay buffer
(``buffer.sample``: index draws, then a nested :class:`~tianshou.data.Batch` of every
field) and computes the n-step targets (``compute_nstep_return``: the indices ``n``
steps ahead, the end flags, the discounted rewards, then the target network's values).
Within one round the buffer does not change, so everything but the target network's
values is the same whichever step asks: :class:`ReplayRound` draws the round's indices
in one call (the same draws as one call per step: the buffer's generator fills them in
order), computes the rewards' part of every n-step return at once with Tianshou's own
kernel, and per step gathers the rows as tensors and adds the discounted values the
networks give then. Each step's batch equals what ``buffer.sample`` and
``_preprocess_batch`` give (``obs``, ``act``, ``info`` and ``returns``, the fields
Tianshou's ``DQN._update_with_batch`` reads; legal-action masks as 0/1 floats), checked by
``tests/plugins/tianshou/test_replay_round.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from tianshou.algorithm.algorithm_base import _nstep_return
from tianshou.data import Batch, ReplayBuffer

#: The networks' bootstrap values of next observations (features, legal-action mask or
#: None): ``[rows]`` (see :meth:`popmarl_tianshou.dqn.MaskedDQN.target_values`).
TargetValues = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]


class ReplayRound:
    """``steps`` batches of ``batch_size`` transitions from ``buffer``, as ``steps``
    calls of ``buffer.sample(batch_size)`` followed by Tianshou's n-step preprocessing
    (discount ``gamma``, horizon ``n_step``) would give them, for a buffer that holds
    masked observations (``Batch(obs=features, mask=legal)``, see
    :func:`popmarl_tianshou.batching.transitions`) or plain ones (``Batch(obs=features)``)."""

    def __init__(self, buffer: ReplayBuffer, *, steps: int, batch_size: int, gamma: float, n_step: int) -> None:
        self.steps, self.batch_size = steps, batch_size
        indices = buffer.sample_indices(steps * batch_size)
        stacked = [indices]
        for _ in range(n_step - 1):
            stacked.append(buffer.next(stacked[-1]))
        after = stacked[-1]
        end = buffer.done.copy()
        end[buffer.unfinished_index()] = True
        # Tianshou's return is target * gamma^k + rewards (float64): the rewards' part is
        # its kernel's value for targets of -0.0 (-0.0 * gamma^k + r == r exactly).
        rows = len(indices)
        self._rewards = _nstep_return(buffer.rew, end, np.full((rows, 1), -0.0), np.stack(stacked), gamma,
                                      n_step).reshape(rows)
        # k: the steps until the episode's end or n_step; the value mask zeroes the
        # target after a termination (as Tianshou multiplies it in before discounting).
        k = np.full(rows, n_step)
        for n in range(n_step - 1, -1, -1):
            k[end[stacked[n]] > 0] = n + 1
        powers = np.cumprod(np.r_[1.0, np.full(n_step, gamma)])  # as Tianshou's kernel multiplies them up
        self._discount = powers[k] * ~buffer.terminated[after]
        # The rows of every step, gathered once: a step's batch is a slice of them.
        obs, obs_next = buffer.obs, buffer.obs_next
        self._x = torch.from_numpy(obs.obs).index_select(0, torch.from_numpy(indices))
        self._x_next = torch.from_numpy(obs_next.obs).index_select(0, torch.from_numpy(after))
        # Masks as 0/1 float tensors: Tianshou's compute_q_value reads ``1 - mask`` as such
        # (from a bool array it converts that to one per call).
        mask, mask_next = getattr(obs, "mask", None), getattr(obs_next, "mask", None)
        self._mask = None if mask is None else torch.from_numpy(mask[indices]).float()
        self._mask_next = None if mask_next is None else torch.from_numpy(mask_next[after]).float()
        self._act = buffer.act[indices]

    def batch(self, step: int, target_values: TargetValues) -> Batch:
        """Step ``step``'s batch, with ``returns`` from the networks as they are now."""
        rows = slice(step * self.batch_size, (step + 1) * self.batch_size)
        with torch.no_grad():
            values = target_values(self._x_next[rows], None if self._mask_next is None else self._mask_next[rows])
            returns = (values.double() * torch.from_numpy(self._discount[rows]).to(values.device)
                       + torch.from_numpy(self._rewards[rows]).to(values.device)).float().reshape(-1, 1)
        x = self._x[rows]
        obs = Batch(obs=x) if self._mask is None else Batch(obs=x, mask=self._mask[rows])
        return Batch(obs=obs, act=self._act[rows], info=Batch(), returns=returns)


__all__ = ["ReplayRound", "TargetValues"]
