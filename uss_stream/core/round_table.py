"""A sliding table of a function of the round, for the vectorised decision paths.

``decide_many`` evaluates functions of the round (``log f(t)``, the effective horizon ``τ_t``) for
windows of rounds; each value must be the scalar function's float, so that the vectorised path
decides exactly as ``select``. A window's rounds are consecutive and move forward with the stream:
the connector's speculation asks for the next few thousand rounds after the restored ones, the
replay for the rounds of its repetitions. :class:`RoundTable` keeps the values from the lowest
round last asked to some way beyond the highest, so its memory follows the span of rounds asked at
once, not the round: a service restored at round ``10^9`` tabulates a window, not ``10^9`` values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["RoundTable"]

#: Rounds tabulated beyond the highest one asked, at least (besides as many as the span asked).
MIN_AHEAD = 1024


class RoundTable:
    """``value(t)`` for arrays of rounds, each computed once while it stays in the window.

    The table holds plain data (its first round and a float array); the owner passes the function
    at each call, so copying or comparing the owner never meets a callable.

    Notes
    -----
    A call asking for rounds outside the table rebuilds it from the lowest round asked to
    ``MIN_AHEAD`` rounds, and as many again as the span asked, beyond the highest one; the values
    the old table holds are kept. Increasing rounds therefore cost each value about once, whether
    one stream moves forward (the table holds a few windows) or many repetitions do (the replay:
    it grows geometrically up to the horizon).

    Examples
    --------
    >>> import math
    >>> def roots(start, stop):
    ...     return [math.sqrt(t) for t in range(start, stop)]
    >>> table = RoundTable()
    >>> table(np.array([4, 9]), roots).tolist()
    [2.0, 3.0]
    >>> table(np.array([10**12, 10**12 + 100]), roots).tolist()   # far, in little memory
    [1000000.0, 1000000.00005]
    >>> len(table)
    1125

    """

    __slots__ = ("_base", "_table")

    def __init__(self) -> None:
        self._base = 0
        self._table = np.empty(0)

    def __len__(self) -> int:
        """The values held."""
        return self._table.size

    def __call__(self, rounds: np.ndarray, values: Callable[[int, int], Sequence[float]]) -> np.ndarray:
        """The values at ``rounds`` (integers), in their shape.

        ``values(start, stop)`` returns the floats for the rounds ``start, ..., stop - 1`` (the
        scalar function's, in order); the same function at every call.
        """
        if not rounds.size:
            return np.empty(rounds.shape)
        low, high = int(rounds.min()), int(rounds.max())
        base, table = self._base, self._table
        end = base + table.size
        if low < base or high >= end:
            stop = high + 1 + max(high + 1 - low, MIN_AHEAD)
            kept_from, kept_to = max(low, base), min(stop, end)
            if kept_from < kept_to:
                parts = [
                    values(low, kept_from),
                    table[kept_from - base : kept_to - base],
                    values(kept_to, stop),
                ]
            else:
                parts = [values(low, stop)]
            base, table = low, np.concatenate([np.asarray(part, dtype=np.float64) for part in parts])
            self._base, self._table = base, table
        return table[rounds - base]
