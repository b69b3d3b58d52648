"""Optimistic estimates ``p̂_ij + Ψ_ij`` of the pairwise disagreement rates, scalar and vectorised.

``p̂_ij = D_ij / n_j`` and ``Ψ_ij = sqrt(a / n_j)`` with ``a = α·log f(t)`` (paper, USS-UCB lines
4-5); an unobserved pair (``n_j = 0``) gets ``+inf``. The scalar form is read lazily by the set
test (it runs once per event); the vectorised form evaluates the same floating-point operations
in the same order, so both give bit-identical bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["LogExploration", "disagreement_bound", "upper_bounds_many"]


class LogExploration:
    """``log f(t)`` for a positive exploration function ``f`` (default ``f(t) = t``).

    Both paths compute each value with :func:`math.log` so that they see the same floats. The
    streaming path keeps only the last value (constant memory over an endless stream); the
    vectorised path tabulates ``t = 1..max`` for the horizon it is asked about.

    >>> LogExploration()(1), round(LogExploration()(3), 6)
    (0.0, 1.098612)

    """

    def __init__(self, f: Callable[[int], float] | None = None) -> None:
        self._f = f
        self._last: tuple[int, float] = (0, math.nan)
        self._table = np.array([math.nan])

    def _log_f(self, t: int) -> float:
        value = float(t) if self._f is None else float(self._f(t))
        if not value >= 1.0:
            raise ValueError(f"f must satisfy f(t) >= 1 for t >= 1, got f({t}) = {value!r}")
        return math.log(value)

    def __call__(self, t: int) -> float:
        last_t, last_value = self._last
        if t != last_t:
            last_value = self._log_f(t)
            self._last = (t, last_value)
        return last_value

    def many(self, rounds: np.ndarray) -> np.ndarray:
        """``log f(t)`` for an array of rounds."""
        t_max = int(rounds.max()) if rounds.size else 0
        size = self._table.size
        if t_max >= size:
            # Grow geometrically so that a replay's increasing rounds cost O(horizon) in all.
            grown = range(size, max(t_max + 1, 2 * size))
            self._table = np.concatenate([self._table, [self._log_f(t) for t in grown]])
        return self._table[rounds]


def disagreement_bound(
    queried: list[int], disagreements: list[list[int]], scale: float
) -> Callable[[int, int], float]:
    """``U(i, j) = D_ij / n_j + sqrt(scale / n_j)`` (``+inf`` while ``n_j = 0``), read lazily.

    >>> bound = disagreement_bound([4, 4], [[0, 1], [0, 0]], scale=1.0)
    >>> bound(0, 1)
    0.75

    """
    sqrt = math.sqrt

    def bound(i: int, j: int) -> float:
        n = queried[j]
        if n:
            return disagreements[i][j] / n + sqrt(scale / n)
        return math.inf

    return bound


def upper_bounds_many(queried: np.ndarray, disagreements: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Vectorised :func:`disagreement_bound`: ``M x K x K`` bounds for ``M`` states.

    ``scale`` holds the ``M`` values of ``α·log f(t)``.
    """
    n = queried.astype(np.float64)[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = disagreements / n + np.sqrt(scale[:, None, None] / n)
    upper[np.broadcast_to(n == 0, upper.shape)] = np.inf
    return upper
