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

    Values are tabulated once, with :func:`math.log`, and shared by the scalar and vectorised
    paths so that both see the same floats.

    >>> LogExploration()(1), round(LogExploration()(3), 6)
    (0.0, 1.098612)

    """

    def __init__(self, f: Callable[[int], float] | None = None) -> None:
        self._f = f
        self._table: list[float] = [0.0]

    def _extend(self, t_max: int) -> None:
        table = self._table
        f = self._f
        for t in range(len(table), t_max + 1):
            value = float(t) if f is None else float(f(t))
            if not value >= 1.0:
                raise ValueError(f"f must satisfy f(t) >= 1 for t >= 1, got f({t}) = {value!r}")
            table.append(math.log(value))

    def __call__(self, t: int) -> float:
        if t >= len(self._table):
            self._extend(t)
        return self._table[t]

    def many(self, rounds: np.ndarray) -> np.ndarray:
        """``log f(t)`` for an array of rounds."""
        if rounds.size and int(rounds.max()) >= len(self._table):
            self._extend(int(rounds.max()))
        return np.asarray(self._table)[rounds]


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
