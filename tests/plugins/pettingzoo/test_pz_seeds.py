"""PettingZoo games get 31-bit seeds (:func:`popmarl.api.seed32`) from seeds of any size:
some keep theirs in a C ``int``, and the seeds popmarl derives take 64 bits."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from popmarl.api import seed32
from popmarl_pettingzoo import PettingZooEnv

pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The seeds rock-paper-scissors games are reset with, from module ``pz_seeds``."""
    from pettingzoo.classic import rps_v2
    from pettingzoo.utils.wrappers import BaseParallelWrapper

    seeds: list[int | None] = []

    class Recording(BaseParallelWrapper):  # type: ignore[misc]
        def reset(self, seed: int | None = None, options: Any = None) -> Any:
            seeds.append(seed)
            return self.env.reset(seed=seed, options=options)

    monkeypatch.setitem(sys.modules, "pz_seeds", types.SimpleNamespace(parallel_env=lambda: Recording(rps_v2.parallel_env())))
    return seeds


@pytest.mark.parametrize("seed", [0, 2**63 + 1, 2**64 - 1])
def test_copies_are_seeded_in_31_bits(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    seeds = _recording(monkeypatch)
    env = PettingZooEnv(module="pz_seeds")
    seeds.clear()  # the env reads its spaces from a game of its own
    env.vector(num_envs=3, seed=seed).reset()
    assert seeds == [seed32(seed + i) for i in range(3)]
    assert all(s is not None and 0 <= s < 2**31 for s in seeds)


def test_a_match_is_seeded_in_31_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = _recording(monkeypatch)
    env = PettingZooEnv(module="pz_seeds")
    seeds.clear()
    env.match("player_0", seed=2**64 - 1)
    assert seeds == [seed32(2**64 - 1)]
