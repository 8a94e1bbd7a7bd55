"""The version of the plugin API (:mod:`popmarl.api`), and how a plugin says which one it was built against.

``MAJOR.MINOR``: the major version changes when a name is removed from the API or changes
meaning, the minor one when names are added. A plugin declares the version it was built
against as a string literal in its top-level package (or single module), for example
``POPMARL_API = "2.0"`` in ``popmarl_solvers/__init__.py``, written out rather than read from
:data:`popmarl.api.API_VERSION`, which would always match. ``popmarl plugins --check``
imports every entry point and reads the declaration of its top-level package
(:func:`verdict`): another major version fails the check, a package that declares none is
reported as such, and the core's own components are of this API by definition.

The definition lives here, in the plugins layer that checks it; :mod:`popmarl.api.version`
re-exports it for plugin authors.
"""

from __future__ import annotations

import re

import attrs

#: The version of :mod:`popmarl.api` this popmarl provides.
API_VERSION = "2.0"
#: The module-level name under which a plugin's top-level package declares its API version.
DECLARATION = "POPMARL_API"

_VERSION = re.compile(r"(\d+)\.(\d+)")


@attrs.frozen(kw_only=True)
class Verdict:
    """What a plugin's declared API version means here: ``ok`` (False fails the check) and
    ``text``, the one line that says why, or a note beside an ok (``""``: nothing to say)."""

    ok: bool
    text: str = ""


def verdict(declared: object, *, distribution: str, version: str, provided: str = API_VERSION) -> Verdict:
    """Whether a plugin of ``distribution`` ``version`` that declares ``declared`` (the
    value of its :data:`DECLARATION`, None where it has none) works with API ``provided``:
    a different major version fails; a later minor one, or none declared, is noted."""
    if declared is None:
        return Verdict(ok=True, text=f"API version undeclared ({DECLARATION})")
    found = _parts(declared)
    if found is None:
        return Verdict(ok=False, text=f"{distribution} {version} declares {DECLARATION} = {declared!r}, not a version "
                                      f"like \"{provided}\"")
    mine = _parts(provided)
    if mine is None:
        raise ValueError(f"provided: not a MAJOR.MINOR version, got {provided!r}")
    if found[0] != mine[0]:
        return Verdict(ok=False, text=f"{distribution} {version} is built against popmarl API {declared}; this popmarl "
                                      f"provides API {provided}, another major version (names it uses may be gone "
                                      "or mean other things)")
    if found[1] > mine[1]:
        return Verdict(ok=True, text=f"built against API {declared}, newer than this popmarl's {provided}: "
                                     "names it uses may be missing")
    return Verdict(ok=True)


def _parts(text: object) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``MAJOR.MINOR`` string; None for anything else."""
    found = _VERSION.fullmatch(text) if isinstance(text, str) else None
    return None if found is None else (int(found.group(1)), int(found.group(2)))
