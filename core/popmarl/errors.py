"""Error classes. A :class:`UserError` is the user's to fix: the CLI prints its one-line
message and exits 2, with no traceback."""

from __future__ import annotations


class PopmarlError(Exception):
    """Base class of every error popmarl raises on purpose."""


class UserError(PopmarlError):
    """Bad input (config, command line, files): one clear line, exit status 2."""


class ConfigError(UserError):
    """An invalid configuration; ``problems`` lists every ``path: what is allowed``."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


class UnknownComponentError(UserError, KeyError):
    """A component name that no installed plugin registers."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class PluginError(PopmarlError):
    """A plugin failed to import (raised only with ``POPMARL_STRICT_PLUGINS=1``)."""


class SolverError(PopmarlError):
    """A meta-solver's answer that is not a meta-strategy: the solver's bug, not bad input
    (exit status 1). ``seat`` is the payoff tensor's axis at fault, if one is."""

    def __init__(self, problem: str, *, seat: int | None = None) -> None:
        self.problem, self.seat = problem, seat
        super().__init__(problem if seat is None else f"seat {seat}: {problem}")


class ResumeError(UserError):
    """A ``--resume`` directory that is missing, corrupt or made by another config."""


class CheckpointError(UserError):
    """A checkpoint or saved file that is corrupt, truncated or of an unknown format."""


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM (``popmarl run`` raises it from its handler): stopped like
    Ctrl-C, so the run still writes its summary and its trackers end their runs."""
