"""PettingZoo environments for popmarl: env ``pettingzoo`` (AEC and Parallel, batched)."""

from popmarl_pettingzoo.env import PettingZooConfig, PettingZooEnv

POPMARL_API = "2.0"  # the popmarl.api version this plugin is built against (popmarl plugins --check)

__all__ = ["PettingZooConfig", "PettingZooEnv"]
