"""popmarl-torchrl: centralized training for cooperative and mixed MARL on TorchRL 0.14.

Algorithms ``mappo`` (:mod:`popmarl_torchrl.mappo`), ``vdn`` and ``qmix``
(:mod:`popmarl_torchrl.value_mixing`) and ``masac`` (:mod:`popmarl_torchrl.masac`), entry
points in the group ``popmarl.algorithms``.
Each trains one learner over a team of seats from the joint view
(:class:`popmarl.api.JointEpisodes`); the policies it exports are the actors alone
(popmarl-torch's :mod:`popmarl_torch.policies`, made without the ``uniform`` mark and
grouped acting of popmarl-tianshou's), while critics, mixers, target networks and replay buffers are
trainer state. Importing this package imports nothing heavy: the algorithms (and torch, TorchRL)
load when asked for by name.
"""

from __future__ import annotations

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)
