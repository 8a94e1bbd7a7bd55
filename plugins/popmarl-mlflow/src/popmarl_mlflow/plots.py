"""PNG plots of a run, drawn with matplotlib's Agg canvas (no pyplot, no global state)
and written atomically (temp file, then rename) so readers never see half a file.

- ``nash_conv.png``: NashConv over iterations and over wall time (log scale).
- ``payoffs.png``: the payoff table as a heat map (agent 0's payoffs; 2-agent tables).
- ``meta_strategies.png``: each population's meta-strategy over iterations (stacked).
- ``ratings.png``: the ``elo/<name>`` metrics over iterations (psro with ``evaluation.ratings:
  true``: each population's newest policy; league: each main agent, and the newest frozen
  players with ``evaluation.ratings``); drawn only where a run has them.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from popmarl.api import write_bytes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

NASH_CONV = "nash_conv.png"
PAYOFFS = "payoffs.png"
META_STRATEGIES = "meta_strategies.png"
RATINGS = "ratings.png"
#: The metrics lines' key prefix of an Elo rating (psro: a population's newest policy; league: a main agent).
ELO_PREFIX = "elo/"
#: Meta-strategy history: population -> iteration -> mixture over its pool.
MetaHistory = Mapping[str, Mapping[int, Sequence[float]]]

_ANNOTATE_CELLS = 12  # write the values into heat-map cells up to this many rows/columns
_TICK_LABELS = 10  # the most labelled ticks per heat-map axis (each costs milliseconds to draw)
_LEGEND_POLICIES = 10  # a legend entry per policy up to this many
#: The lowest NashConv drawn: smaller values (0 at an exact equilibrium) sit on it.
NASH_CONV_FLOOR = 1e-15


def prepare() -> None:
    """Import what drawing needs (half a second) and render a tiny figure once (fonts,
    text layout, log-axis labels, the PNG encoder: a tenth of a second less in the first
    drawing), ahead of the first drawing."""
    from matplotlib import colormaps  # noqa: F401
    from matplotlib.collections import PolyCollection  # noqa: F401

    figure = _figure(1.5, 1.5)
    ax = figure.subplots()
    ax.plot([1, 2], [1.0, 0.01])
    ax.set_yscale("log")
    ax.set_title("warm-up")
    figure.savefig(io.BytesIO(), format="png", pil_kwargs={"compress_level": 1})


def _figure(width: float, height: float, *, left: float = 0.8, right: float = 0.3, bottom: float = 0.6,
            top: float = 0.4, wspace: float = 0.3, hspace: float = 0.5) -> Figure:
    """A figure on an Agg canvas with fixed margins in inches (a layout engine would
    double the drawing time)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=72)
    FigureCanvasAgg(figure)
    figure.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                           top=1 - top / height, wspace=wspace, hspace=hspace)
    return figure


def save(figure: Figure, path: str | os.PathLike[str]) -> Path:
    """Render ``figure`` as PNG and replace ``path`` with it atomically."""
    buffer = io.BytesIO()
    # zlib level 1: a fifth of the encoding time of the default level, files ~10% larger.
    figure.savefig(buffer, format="png", pil_kwargs={"compress_level": 1})
    write_bytes(path, buffer.getvalue())
    return Path(path)


def _note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()


def nash_conv_figure(lines: Sequence[Mapping[str, Any]]) -> Figure:
    """NashConv against iteration (left) and wall time (right), from metrics lines, on a
    log axis (PSRO takes it down by many decades); values below
    :data:`NASH_CONV_FLOOR` (an exact equilibrium's 0 among them) are drawn at it."""
    from matplotlib.ticker import MaxNLocator, NullLocator

    points = [(m.get("iteration"), m.get("wall_time_s"), m.get("nash_conv")) for m in lines]
    points = [p for p in points if isinstance(p[2], (int, float))]
    figure = _figure(10, 4, wspace=0.25)
    left, right = figure.subplots(1, 2)
    if not points:
        _note(left, "NashConv is not computable for this environment")
        _note(right, "(no exact NashConv in metrics.jsonl)")
        return figure
    iterations, seconds, values = (np.array(column, dtype=float) for column in zip(*points, strict=True))
    values = np.maximum(values, NASH_CONV_FLOOR)
    for ax, x, label in ((left, iterations, "iteration"), (right, seconds, "wall time (s)")):
        ax.plot(x, values, marker="o", markersize=3)
        ax.set_xlabel(label)
        ax.set_ylabel("NashConv")
        ax.set_yscale("log")
        ax.yaxis.set_minor_locator(NullLocator())  # 8 a decade over up to 16 decades: slow, unread
        ax.grid(True, alpha=0.3)
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_title("NashConv over iterations")
    right.set_title("NashConv over wall time")
    return figure


def nash_conv(lines: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """:func:`nash_conv_figure` written to ``path``."""
    return save(nash_conv_figure(lines), path)


def ratings_history(lines: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Per ``elo/<name>`` metric (a population's newest policy, a league's main agent),
    ``(iteration, Elo)``, from metrics lines."""
    history: dict[str, list[tuple[float, float]]] = {}
    for line in lines:
        for key, value in line.items():
            if key.startswith(ELO_PREFIX) and isinstance(value, (int, float)) and isinstance(line.get("iteration"), int):
                history.setdefault(key[len(ELO_PREFIX):], []).append((float(line["iteration"]), float(value)))
    return history


def ratings(history: Mapping[str, Sequence[tuple[float, float]]], path: str | os.PathLike[str]) -> Path:
    """Each rated policy's Elo against iteration (the first initial policy at 0)."""
    from matplotlib.ticker import MaxNLocator

    figure = _figure(6, 4)
    ax = figure.subplots()
    for population, points in history.items():
        iterations, elos = zip(*points, strict=True)
        ax.plot(iterations, elos, marker="o", markersize=3, label=population)
    ax.set_xlabel("iteration")
    ax.set_ylabel("Elo (the first initial policy at 0)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set_title("Ratings over iterations")
    return save(figure, path)


def payoffs(payoffs_file: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """The payoff table of ``payoffs.npz`` as a heat map: agent 0's payoffs, rows its
    policies, columns agent 1's; unevaluated entries blank. Other agent counts: a note."""
    from popmarl.api import PayoffTable

    table, ids = PayoffTable.load(payoffs_file)
    if len(table.agents) != 2:
        figure = _figure(6, 2, left=0.2, bottom=0.2)
        _note(figure.subplots(), f"payoff table of {len(table.agents)} agents, shape {table.shape}: "
                                 "a heat map needs 2 agents; see payoffs.npz")
        return save(figure, path)
    values = np.ma.masked_where(~table.filled, table.values[0])
    rows, cols = table.shape
    label = 0.065 * max(len(i) for i in ids[0] + ids[1]) + 0.45  # inches for the tick labels and axis title
    figure = _figure(min(2.2 + label + 0.45 * cols, 16), min(1.0 + label + 0.4 * rows, 14),
                     left=label + 0.1, bottom=label + 0.1, right=0.9)
    ax = figure.subplots()
    bound = (float(np.abs(values).max()) if values.count() else 0.0) or 1.0
    image = ax.imshow(values, cmap="RdBu", vmin=-bound, vmax=bound, aspect="auto")
    figure.colorbar(image, ax=ax, label=f"payoff of {table.agents[0]}")
    for axis, labels, count in ((ax.set_yticks, ids[0], rows), (ax.set_xticks, ids[1], cols)):
        step = max(1, -(-count // _TICK_LABELS))
        ticks = list(range(0, count, step))
        axis(ticks, [labels[i] for i in ticks])
    ax.tick_params(axis="x", labelrotation=90)
    if rows <= _ANNOTATE_CELLS and cols <= _ANNOTATE_CELLS:
        for (i, j), value in np.ndenumerate(table.values[0]):
            if table.filled[i, j]:
                dark = abs(value) > 0.6 * bound
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
    ax.set_ylabel(f"{table.agents[0]} policies")
    ax.set_xlabel(f"{table.agents[1]} policies")
    ax.set_title("payoff table")
    return save(figure, path)


def meta_strategies(history: MetaHistory, path: str | os.PathLike[str]) -> Path:
    """Each population's meta-strategy over iterations, as a stacked area per policy
    (one polygon collection: a ``stackplot`` artist per policy costs ten times more)."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    populations = [p for p in history if history[p]]
    widest = max((len(m) for p in populations for m in history[p].values()), default=0)
    legend = widest <= _LEGEND_POLICIES
    figure = _figure(8, 1.2 + 2.3 * max(1, len(populations)), right=1.6 if legend else 0.3)
    if not populations:
        _note(figure.subplots(), "no meta-strategies recorded yet")
        return save(figure, path)
    axes = figure.subplots(len(populations), 1, squeeze=False)[:, 0]
    for ax, population in zip(axes, populations, strict=True):
        steps = sorted(history[population])
        width = max(len(history[population][s]) for s in steps)
        stack = np.zeros((width, len(steps)))
        for column, step in enumerate(steps):
            mixture = np.asarray(history[population][step], dtype=float)
            stack[: len(mixture), column] = mixture
        colors = _colors(width)
        top = np.cumsum(stack, axis=0)
        bottom = np.vstack([np.zeros((1, len(steps))), top[:-1]])
        x = np.asarray(steps, dtype=float)
        polygons = [np.column_stack([np.concatenate([x, x[::-1]]), np.concatenate([top[i], bottom[i][::-1]])])
                    for i in range(width)]
        ax.add_collection(PolyCollection(polygons, facecolors=colors, edgecolors="face", linewidths=0.3))
        ax.set_ylim(0, 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(steps[0], steps[-1] if len(steps) > 1 else steps[0] + 1)
        ax.set_ylabel("probability")
        ax.set_title(f"meta-strategy of {population}" + ("" if legend else f" ({width} policies; "
                                                          "colour = policy index, dark = early)"))
        if legend:
            handles = [Patch(facecolor=colors[i], label=f"{population}/{i}") for i in range(width)]
            ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    axes[-1].set_xlabel("iteration")
    return save(figure, path)


def _colors(count: int) -> np.ndarray:
    """``count`` colours from viridis, dark to light (one colormap look-up: each copies it)."""
    from matplotlib import colormaps

    return np.asarray(colormaps["viridis"](np.arange(count) / max(1, count - 1)))


def meta_history(lines: Sequence[Mapping[str, Any]]) -> dict[str, dict[int, list[float]]]:
    """The ``meta_strategy/<population>`` entries of metrics lines, where present."""
    history: dict[str, dict[int, list[float]]] = {}
    for line in lines:
        for key, value in line.items():
            if key.startswith("meta_strategy/") and isinstance(value, list):
                history.setdefault(key.split("/", 1)[1], {})[int(line["iteration"])] = value
    return history
