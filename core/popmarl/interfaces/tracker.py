"""The Tracker base: a configurable component whose methods are hook implementations."""

from __future__ import annotations

from popmarl.interfaces.component import Component


class Tracker(Component):
    """Subclass, decorate methods named after hooks with :data:`popmarl.hookimpl`, and
    register under ``popmarl.trackers``; each run registers its configured trackers."""
