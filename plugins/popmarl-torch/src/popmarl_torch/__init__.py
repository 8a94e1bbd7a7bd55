"""popmarl-torch: the torch layer popmarl's torch plugins share.

popmarl-tianshou and popmarl-torchrl build their policies, networks and trainer state
from these modules, each piece defined once; this package registers the network models
(``popmarl.models``: ``mlp``, ``cnn``, ``module``) and no other component.

- :mod:`popmarl_torch.threads`: how many threads torch computes with;
- :mod:`popmarl_torch.seeding`: seeded torch code that leaves the global generator alone;
- :mod:`popmarl_torch.features`: observations as flat features, observation and action widths, seat ids;
- :mod:`popmarl_torch.mlp`: multilayer perceptrons, and many of one layout run at once;
- :mod:`popmarl_torch.models`: network models by name (``mlp``, ``cnn``, a user's ``module``);
- :mod:`popmarl_torch.nets`: the Q-net, actors and critic (Tianshou's module conventions);
- :mod:`popmarl_torch.policies`: the Q, categorical and Gaussian policies, weights as arrays;
- :mod:`popmarl_torch.grouped`: policies of one network layout acting together;
- :mod:`popmarl_torch.state`: torch files of a trainer's state, generators as JSON;
- :mod:`popmarl_torch.devices`, :mod:`~popmarl_torch.timing`, :mod:`~popmarl_torch.auto`,
  :mod:`~popmarl_torch.placement`: the ``device`` and ``acting_device`` settings, ``auto``
  timed, and where a trainer's modules live.

Importing this package imports nothing; each module imports torch.
"""

from __future__ import annotations

POPMARL_API = "2.0"  # the popmarl.api version this package is built against
