"""The six component registries, built from entry points on first use."""

from __future__ import annotations

from popmarl.registry import KINDS, Registry


def get(kind: str) -> Registry:
    """The registry of ``kind`` as currently exposed as ``popmarl.<kind>``."""
    import popmarl

    if kind not in KINDS:
        raise ValueError(f"unknown registry kind {kind!r}; kinds: {', '.join(KINDS)}")
    return getattr(popmarl, kind)  # type: ignore[no-any-return]


def component(kind: str, name: str, params: object = None) -> object:
    """An instance of component ``name`` of ``kind`` configured with ``params``."""
    cls = get(kind).load(name)
    return cls(**dict(params or {}))  # type: ignore[call-overload]
