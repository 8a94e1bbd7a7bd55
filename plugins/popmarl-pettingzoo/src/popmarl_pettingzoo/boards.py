"""Text pictures of PettingZoo games for ``popmarl play`` (PettingZoo draws its board
games only as images), and the names of their moves.

Tic-tac-toe and connect four are drawn from the player's own observation (two planes:
its pieces, the opponent's), so nothing it cannot see is shown; their moves are named by
square (``a1`` .. ``c3``: column letter, row number from the top) and column (``a`` ..
``g``). Any other game shows its observation array and numbers its moves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
import numpy as np

#: The mark of the first seat, then the second's.
MARKS = ("X", "O")
_COLUMNS = "abcdefghijklmnopqrstuvwxyz"


def _planes(observation: np.ndarray, seat_index: int) -> tuple[np.ndarray, np.ndarray]:
    """The X plane and the O plane of a two-plane board observation (the observer's own
    pieces come first)."""
    own, other = observation[..., 0], observation[..., 1]
    return (own, other) if seat_index == 0 else (other, own)


def _grid(cells: Sequence[Sequence[str]], separator: str) -> str:
    """Rows of cells under column letters, each row numbered from 1 at the top."""
    pad = " " if separator != " " else ""

    def line(row: Sequence[str], between: str) -> str:
        return between.join(f"{pad}{cell}{pad}" for cell in row)

    lines = ["   " + line(_COLUMNS[:len(cells[0])], " ").rstrip()]
    lines += [f"{r + 1:>2} " + line(row, separator).rstrip() for r, row in enumerate(cells)]
    return "\n".join(lines)


@attrs.frozen
class Board:
    """How one game is drawn and its moves named, from a seat's observation array."""

    def draw(self, observation: np.ndarray, seat_index: int) -> str:
        array = np.asarray(observation)
        shape = "x".join(map(str, array.shape))
        flat = np.array2string(array.reshape(-1), threshold=64, edgeitems=8, max_line_width=88, precision=3)
        return f"observation ({shape}, flattened):\n{flat}"

    def move_name(self, action: int) -> str:
        return str(action)


@attrs.frozen
class TicTacToe(Board):
    """PettingZoo's ``tictactoe``: square ``a`` is ``3 * column + row``."""

    def draw(self, observation: np.ndarray, seat_index: int) -> str:
        x, o = (plane.T for plane in _planes(observation, seat_index))  # PettingZoo's [column, row]
        cells = [[MARKS[0] if x[r, c] else MARKS[1] if o[r, c] else "." for c in range(3)] for r in range(3)]
        return _grid(cells, "|")

    def move_name(self, action: int) -> str:
        return f"{_COLUMNS[action // 3]}{action % 3 + 1}"


@attrs.frozen
class ConnectFour(Board):
    """PettingZoo's ``connect_four``: a move drops a piece into column ``action``."""

    def draw(self, observation: np.ndarray, seat_index: int) -> str:
        x, o = _planes(observation, seat_index)
        cells = [[MARKS[0] if x[r, c] else MARKS[1] if o[r, c] else "." for c in range(x.shape[1])]
                 for r in range(x.shape[0])]
        return _grid(cells, " ")

    def move_name(self, action: int) -> str:
        return _COLUMNS[action]


_BOARDS = {"tictactoe": TicTacToe(), "connect_four": ConnectFour()}


def board_for(module: str) -> Board:
    """The board of the PettingZoo module ``module`` (e.g. ``pettingzoo.classic.tictactoe_v3``):
    a drawn one for tic-tac-toe and connect four, else the observation array."""
    name = re.sub(r"_v\d+$", "", module.split(":")[0].rsplit(".", 1)[-1])
    return _BOARDS.get(name, Board())
