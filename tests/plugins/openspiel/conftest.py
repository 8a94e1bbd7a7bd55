"""Fixtures of the openspiel plugin tests (helpers live in openspiel_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from popmarl_openspiel.env import OpenSpielEnv


@pytest.fixture(scope="session")
def make_env() -> Callable[..., OpenSpielEnv]:
    """``make_env(game, **params)``, cached per arguments (trees are built once)."""
    cache: dict[str, OpenSpielEnv] = {}

    def make(game: str, **params: object) -> OpenSpielEnv:
        key = repr((game, sorted(params.items())))
        if key not in cache:
            cache[key] = OpenSpielEnv(game=game, **params)
        return cache[key]

    return make
