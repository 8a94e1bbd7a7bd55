"""Lemke–Howson for bimatrix games, in floating point and in exact integer arithmetic.

Both versions follow von Stengel's formulation (Handbook of Game Theory vol. 3, ch. 45):
with positive payoffs ``A, B`` (m×n), the tableaux ``A y + r = 1`` (rows = player 1's
strategies) and ``B^T x + s = 1`` (rows = player 2's) have one column per *label*
``0..m+n-1`` (``x_i``/``r_i`` carry label ``i``, ``y_j``/``s_j`` carry ``m + j``). From the
artificial equilibrium (0, 0) a label is dropped and complementary pivoting alternates
between the tableaux until the dropped label is picked up again.

The minimum-ratio test is *lexicographic* (ties broken by the rows of the basis inverse),
which makes the path well defined on degenerate games — duplicate strategies, ties,
all-equal payoffs. In floating point, ties are decided with a tolerance, so its answer is
checked by the caller; :func:`lemke_howson_exact` runs the same path with Bareiss
integer pivoting on payoffs rounded to 2^-48 of their range, where every comparison is
exact, so it always ends at an equilibrium of that game. Both follow several starting
labels in lock-step and report each path's end as it comes, because path lengths from
different labels differ by orders of magnitude.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fractions import Fraction

import numpy as np

_ROUNDING_BITS = 48


class _FloatTableau:
    """One LH tableau in floating point; columns are labels then the right-hand side."""

    def __init__(self, matrix: np.ndarray, slack_labels: np.ndarray, basis: list[int]) -> None:
        self.t = np.hstack([matrix, np.ones((matrix.shape[0], 1))])
        self.keys = np.concatenate([[matrix.shape[1]], slack_labels])  # rhs, then basis inverse
        self.basis = basis

    def pivot(self, entering: int, eps: float = 1e-11, tie: float = 1e-9) -> int | None:
        """Bring ``entering`` into the basis; return the label that leaves (None: no pivot)."""
        col = self.t[:, entering]
        rows = np.flatnonzero(col > eps)
        if rows.size == 0:
            return None
        for key in self.keys:  # lexicographic minimum ratio
            ratios = self.t[rows, key] / col[rows]
            best = ratios.min()
            rows = rows[ratios <= best + tie * max(1.0, abs(best))]
            if rows.size == 1:
                break
        r = int(rows[0])
        self.t[r] /= self.t[r, entering]
        factors = self.t[:, entering].copy()
        factors[r] = 0.0
        self.t -= np.outer(factors, self.t[r])
        leaving, self.basis[r] = self.basis[r], entering
        return leaving

    def values(self, labels: range) -> np.ndarray:
        """Values of the variables with ``labels`` (zero when non-basic)."""
        out = np.zeros(len(labels))
        for row, label in enumerate(self.basis):
            if label in labels:
                out[label - labels.start] = max(0.0, self.t[row, -1])
        return out


class _IntegerTableau:
    """One LH tableau with Bareiss integer pivoting: ``t / det`` is the exact tableau."""

    def __init__(self, matrix: np.ndarray, slack_labels: np.ndarray, basis: list[int]) -> None:
        rows = matrix.shape[0]
        self.t = np.empty((rows, matrix.shape[1] + 1), dtype=object)
        self.t[:, :-1] = matrix
        self.t[:, -1] = 1
        self.keys = [matrix.shape[1], *(int(k) for k in slack_labels)]
        self.basis = basis
        self.det = 1

    def pivot(self, entering: int) -> int | None:
        """Bring ``entering`` into the basis; return the label that leaves (None: no pivot)."""
        col = self.t[:, entering]
        rows = [i for i in range(len(col)) if col[i] > 0]
        if not rows:
            return None
        for key in self.keys:  # exact lexicographic minimum ratio by cross-multiplication
            best = rows[0]
            for i in rows[1:]:
                if self.t[i, key] * col[best] < self.t[best, key] * col[i]:
                    best = i
            rows = [i for i in rows if self.t[i, key] * col[best] == self.t[best, key] * col[i]]
            if len(rows) == 1:
                break
        r = rows[0]
        p = self.t[r, entering]
        pivot_row = self.t[r].copy()
        self.t = (p * self.t - np.outer(self.t[:, entering], pivot_row)) // self.det
        self.t[r] = pivot_row
        self.det = p
        leaving, self.basis[r] = self.basis[r], entering
        return leaving

    def values(self, labels: range) -> list[Fraction]:
        """Exact values of the variables with ``labels`` (zero when non-basic)."""
        out = [Fraction(0)] * len(labels)
        for row, label in enumerate(self.basis):
            if label in labels:
                out[label - labels.start] = Fraction(self.t[row, -1], self.det)
        return out


Tableau = _FloatTableau | _IntegerTableau


def _tableaux(a: np.ndarray, b: np.ndarray, tableau: type[Tableau]) -> tuple[Tableau, Tableau]:
    """The two tableaux of the game ``(a, b)`` (positive payoffs) at the origin."""
    m, n = a.shape
    eye_m = np.eye(m, dtype=a.dtype) if a.dtype != object else _int_eye(m)
    eye_n = np.eye(n, dtype=b.dtype) if b.dtype != object else _int_eye(n)
    t1 = tableau(np.hstack([eye_m, a]), np.arange(m), list(range(m)))  # A y + r = 1
    t2 = tableau(np.hstack([b.T, eye_n]), np.arange(m, m + n), list(range(m, m + n)))  # B^T x + s = 1
    return t1, t2


def _int_eye(k: int) -> np.ndarray:
    eye = np.zeros((k, k), dtype=object)
    for i in range(k):
        eye[i, i] = 1
    return eye


class _Path:
    """One Lemke–Howson path: complementary pivoting from (0, 0) dropping ``label``."""

    def __init__(self, t1: Tableau, t2: Tableau, m: int, label: int) -> None:
        self.t1, self.t2, self.m, self.label = t1, t2, m, label
        self.tableau = t2 if label < m else t1  # x_label enters tableau 2, y enters tableau 1
        self.entering = label
        self.pivots = 0

    def step(self) -> bool | None:
        """One pivot: True when the dropped label is picked up again, False if the path
        broke off (no pivot row), None to go on."""
        leaving = self.tableau.pivot(self.entering)
        self.pivots += 1
        if leaving is None:
            return False
        if leaving == self.label:
            return True
        self.entering = leaving
        self.tableau = self.t1 if self.tableau is self.t2 else self.t2
        return None

    def mixtures(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The normalised ``(x, y)`` at the end of the path (None if degenerate to 0)."""
        n = self.t1.t.shape[1] - 1 - self.m
        x = np.asarray(self.t2.values(range(0, self.m)), dtype=object)
        y = np.asarray(self.t1.values(range(self.m, self.m + n)), dtype=object)
        sx, sy = x.sum(), y.sum()
        if sx <= 0 or sy <= 0:
            return None
        return np.array([float(v / sx) for v in x]), np.array([float(v / sy) for v in y])


def _race(paths: list[_Path], max_pivots: int) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """Advance the paths in turn, one pivot each, and yield each one's end as it comes.

    Path lengths from different labels differ by orders of magnitude (6 pivots from one
    label, 15 000 from another on the same 100×100 game), so lock-step costs at most
    ``len(paths)`` times the shortest path instead of betting on one label.
    """
    running = list(paths)
    while running:
        for path in list(running):
            done = path.step()
            if done is None and path.pivots < max_pivots:
                continue
            running.remove(path)
            found = path.mixtures() if done else None
            if found is not None:
                yield found[0], found[1], path.pivots


def _positive(matrix: np.ndarray) -> np.ndarray:
    """Rescale to [1, 2]: equilibria are invariant under positive affine maps per player."""
    spread = float(np.ptp(matrix))
    if spread == 0.0:
        return np.ones_like(matrix, dtype=float)
    return 1.0 + (matrix - matrix.min()) / spread


def _positive_integers(matrix: np.ndarray) -> np.ndarray:
    """Rescale to integers in [1, 2^48 + 1], rounding to 2^-48 of the payoff range."""
    spread = float(np.ptp(matrix))
    out = np.ones(matrix.shape, dtype=object)
    if spread == 0.0:
        return out
    scaled = np.rint((matrix - matrix.min()) / spread * 2.0**_ROUNDING_BITS)
    for idx, v in np.ndenumerate(scaled):
        out[idx] = int(v) + 1
    return out


def lemke_howson(
    a: np.ndarray, b: np.ndarray, labels: Sequence[int] = (0,), max_pivots: int = 20_000
) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """Floating-point LH from each of ``labels`` in lock-step: ``(x, y, pivots)`` for each
    path that ends, shortest first. Ties are decided with a tolerance: check the answers."""
    m, _ = a.shape
    pa, pb = _positive(a), _positive(b)
    paths = [_Path(*_tableaux(pa, pb, _FloatTableau), m, label) for label in labels]
    return _race(paths, max_pivots)


def lemke_howson_exact(
    a: np.ndarray, b: np.ndarray, labels: Sequence[int] = (0,), max_pivots: int = 20_000
) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """Exact LH (integer pivoting) from each of ``labels`` in lock-step, on the payoffs
    rounded to 2^-48 of their range: every path that ends gives an equilibrium of that
    game, whose regret in the original is below 4e-15 of the payoff range."""
    m, _ = a.shape
    pa, pb = _positive_integers(a), _positive_integers(b)
    paths = [_Path(*_tableaux(pa, pb, _IntegerTableau), m, label) for label in labels]
    return _race(paths, max_pivots)
