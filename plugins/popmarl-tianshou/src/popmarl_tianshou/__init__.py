"""popmarl-tianshou: deep RL oracles for popmarl on Tianshou 2.0.

Algorithms ``dqn`` (double DQN), ``ppo`` and ``a2c`` (masked for games with legal
actions), ``sac`` and ``td3`` (Box actions, squashed into the bounds), entry points in the
group ``popmarl.algorithms``, plus policy checkpoints
(:func:`save_checkpoint`, :func:`load_checkpoint`). The policies, networks and device
choice are popmarl-torch's (:mod:`popmarl_torch`), re-exported here as the policies this
plugin makes. Importing this package imports only the torch-side modules; the algorithms
(and Tianshou) load when asked for by name.
"""

from __future__ import annotations

from popmarl_tianshou.checkpoint import load_checkpoint, save_checkpoint
from popmarl_torch.policies import CategoricalPolicy, GaussianPolicy, QPolicy, TorchPolicy

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)

__all__ = ["CategoricalPolicy", "GaussianPolicy", "QPolicy", "TorchPolicy", "load_checkpoint", "save_checkpoint"]
