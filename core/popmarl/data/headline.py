"""What tells a run's progress, read from its metrics lines: the figures the console prints
on each iteration's line and at the end, and ``popmarl show`` under ``progress``.

Exact NashConv where the env computes it (every iteration, so no iteration is shown),
and nothing else then. Otherwise every figure the lines hold, each labelled and with the
iteration it was measured at (a figure measured every few iterations is carried to the
later lines until it is measured again):

* ``approx nash_conv`` (or ``approx cce_gap``): the latest approximate NashConv from fresh
  best responses (psro's ``evaluation.approx_nash_conv_every``);
* ``gain``: what the newest policies gained against the meta-strategy they answered
  (psro's ``oracle_gain``, or ``oracle_gain/<population>`` per population);
* ``cce_gap`` / ``ce_gap``: a joint meta-strategy's gaps, where computed;
* ``elo``: the league's main agents' Elo (else each population's newest policy's);
* ``vs random``: the newest policies' win / draw / loss shares against uniformly random
  play (``versus_random/<population>/...``), or a team's return against random play's;
* ``return``: a marl run's mean return per population, with its win rate where one seat
  can beat another, or ``team return`` where one team plays every seat (``team_return``):
  a cooperative task has no win rate to show.

A line that holds none of them shows ``progress –``: never a bare ``nash_conv –``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

Line = Mapping[str, Any]

#: The prefix of the versus-random measure's keys (``versus_random/<population>/win``...).
VERSUS_RANDOM = "versus_random/"
#: The most lines looked back for a figure measured only every few iterations.
LOOKBACK = 500


@attrs.frozen(kw_only=True)
class ProgressFigure:
    """One labelled figure: ``label`` (what it is), ``text`` (its value as printed),
    ``iteration`` (when it was measured; None: not known) and ``values`` (the metrics keys
    it shows, for JSON readers)."""

    label: str
    text: str
    iteration: int | None = None
    values: Mapping[str, Any] = attrs.field(factory=dict)

    def __str__(self) -> str:
        return f"{self.label} {self.text}" + ("" if self.iteration is None else f" (it {self.iteration})")

    def to_json(self) -> dict[str, Any]:
        return {"figure": self.label, "text": self.text, "iteration": self.iteration, "values": dict(self.values)}


def format_nash_conv(value: float | None) -> str:
    """Six decimals, or scientific notation below 1e-4 (an exact equilibrium's 1e-12)."""
    if value is None:
        return "–"
    return format(value, ".2e" if 0 < abs(value) < 1e-4 else ".6f")


def headline(lines: Sequence[Line]) -> list[ProgressFigure]:
    """The figures that tell the progress at the last of ``lines`` (a run's metrics lines
    in order; the earlier ones give the figures measured only every few iterations)."""
    if not lines:
        return [ProgressFigure(label="progress", text="–")]
    last = lines[-1]
    if last.get("nash_conv") is not None:
        # Computed every iteration, never carried: always the line's own, so no iteration shown.
        return [ProgressFigure(label="nash_conv", text=format_nash_conv(last["nash_conv"]),
                               values={"nash_conv": last["nash_conv"]})]
    figures = [figure for read in _READERS if (figure := _latest(lines, read)) is not None]
    return figures or [ProgressFigure(label="progress", text="–", iteration=_iteration(last))]


def _latest(lines: Sequence[Line], read: Callable[[Line], ProgressFigure | None]) -> ProgressFigure | None:
    """``read``'s figure from the newest line that has one."""
    for line in reversed(lines[-LOOKBACK:]):
        figure = read(line)
        if figure is not None:
            return figure
    return None


def _iteration(line: Line) -> int | None:
    iteration = line.get("iteration")
    return int(iteration) if isinstance(iteration, int | float) else None


def _known(line: Line, prefix: str) -> dict[str, Any]:
    """The line's keys under ``prefix`` (the prefix removed) whose value is a number."""
    return {k[len(prefix):]: v for k, v in line.items()
            if k.startswith(prefix) and isinstance(v, int | float) and not isinstance(v, bool)}


def _approx(line: Line) -> ProgressFigure | None:
    for kind in ("nash_conv", "cce_gap"):
        value = line.get(f"approx_{kind}")
        if value is not None:
            return ProgressFigure(label=f"approx {kind}", text=f"{value:.4f}", iteration=_iteration(line),
                          values={f"approx_{kind}": value})
    return None


def _gains(line: Line) -> ProgressFigure | None:
    per_population = _known(line, "oracle_gain/")
    if per_population:
        text = ", ".join(f"{p} {v:.4f}" for p, v in per_population.items())
        return ProgressFigure(label="gain", text=text, iteration=_iteration(line),
                      values={f"oracle_gain/{p}": v for p, v in per_population.items()})
    gain = line.get("oracle_gain")
    if gain is None:
        return None
    return ProgressFigure(label="gain", text=f"{gain:.4f}", iteration=_iteration(line), values={"oracle_gain": gain})


def _gaps(line: Line) -> ProgressFigure | None:
    gaps = {k: line[k] for k in ("cce_gap", "ce_gap") if line.get(k) is not None}
    if not gaps:
        return None
    return ProgressFigure(label=" / ".join(gaps), text=" / ".join(f"{v:.4f}" for v in gaps.values()),
                  iteration=_iteration(line), values=gaps)


def _elo(line: Line) -> ProgressFigure | None:
    ratings = _known(line, "elo/")
    main = {k: v for k, v in ratings.items() if ".main_agent" in k}
    shown = main or ratings
    if not shown:
        return None
    return ProgressFigure(label="elo", text=", ".join(f"{k} {v:.0f}" for k, v in shown.items()), iteration=_iteration(line),
                  values={f"elo/{k}": v for k, v in shown.items()})


def _versus_random(line: Line) -> ProgressFigure | None:
    measured = _known(line, VERSUS_RANDOM)
    populations = list(dict.fromkeys(k.rsplit("/", 1)[0] for k in measured))
    team = [p for p in populations if f"{p}/team_return" in measured]
    if team:
        p = team[0]
        baseline = measured.get(f"{p}/random_team_return")
        text = f"{measured[f'{p}/team_return']:.3f}" + ("" if baseline is None else f" vs random {baseline:.3f}")
        return ProgressFigure(label="team return", text=text, iteration=_iteration(line),
                      values={VERSUS_RANDOM + k: v for k, v in measured.items() if k.startswith(f"{p}/")})
    shares = [p for p in populations if all(f"{p}/{o}" in measured for o in ("win", "draw", "loss"))]
    if not shares:
        return None
    cells = [("" if len(shares) == 1 else f"{p} ") + " ".join(
        f"{o[0].upper()} {measured[f'{p}/{o}']:.0%}" for o in ("win", "draw", "loss")) for p in shares]
    return ProgressFigure(label="vs random", text=", ".join(cells), iteration=_iteration(line),
                  values={VERSUS_RANDOM + k: v for k, v in measured.items() if k.rsplit("/", 1)[0] in shares})


def _returns(line: Line) -> ProgressFigure | None:
    """A marl line's mean returns: the team's where one team plays every seat, else each
    population's with its win rate where it has one."""
    returns = _known(line, "mean_return/")
    team = line.get("team_return")
    if team is not None:
        return ProgressFigure(label="team return", text=f"{team:.3f}", iteration=_iteration(line),
                      values={"team_return": team})
    if not returns:
        return None
    cells = []
    for p, value in returns.items():
        win = line.get(f"win_rate/{p}")
        cells.append(f"{p} {value:.3f}" + ("" if win is None else f" (win {win:.0%})"))
    return ProgressFigure(label="return", text=", ".join(cells), iteration=_iteration(line),
                  values={f"mean_return/{p}": v for p, v in returns.items()})


#: The figures a line without exact NashConv shows, in order.
_READERS: tuple[Callable[[Line], ProgressFigure | None], ...] = (_approx, _gains, _gaps, _elo, _versus_random, _returns)
