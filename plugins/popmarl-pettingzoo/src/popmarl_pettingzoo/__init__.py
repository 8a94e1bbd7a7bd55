"""PettingZoo environments for popmarl: env ``pettingzoo`` (AEC and Parallel, batched)."""

from popmarl_pettingzoo.env import PettingZooConfig, PettingZooEnv

__all__ = ["PettingZooConfig", "PettingZooEnv"]
