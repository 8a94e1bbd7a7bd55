"""What lifecycle hooks receive about the run they observe (:class:`RunInfo`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class RunInfo:
    """What hooks receive about the run."""

    run_dir: str
    scenario: str
    seed: int
    config: Mapping[str, Any]
    start_iteration: int = 0
    populations: tuple[str, ...] = ()
    resumed: bool = False
