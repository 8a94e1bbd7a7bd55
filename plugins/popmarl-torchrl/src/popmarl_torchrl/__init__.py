"""popmarl-torchrl: centralized training for cooperative and mixed MARL on TorchRL 0.14.

Algorithms ``mappo`` (:mod:`popmarl_torchrl.mappo`), ``vdn`` and ``qmix``
(:mod:`popmarl_torchrl.value_mixing`), entry points in the group ``popmarl.algorithms``.
Each trains one learner over a team of seats from the joint view
(:class:`popmarl.JointEpisodes`); the policies it exports are the actors alone
(:mod:`popmarl_torchrl.policy`), while critics, mixers and target networks are trainer
state. Importing this package imports nothing heavy: the algorithms (and torch, TorchRL)
load when asked for by name.
"""

from __future__ import annotations
