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

    Parameters
    ----------
    values
        ``values(start, stop)``: the floats for the rounds ``start, ..., stop - 1`` (the scalar
        function's, in order).

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
    >>> table = RoundTable(lambda start, stop: [math.sqrt(t) for t in range(start, stop)])
    >>> table(np.array([4, 9])).tolist()
    [2.0, 3.0]
    >>> table(np.array([10**12, 10**12 + 100])).tolist()   # far, in little memory
    [1000000.0, 1000000.00005]
    >>> len(table)
    1125

    """

    __slots__ = ("_base", "_table", "_values")

    def __init__(self, values: Callable[[int, int], Sequence[float]]) -> None:
        self._values = values
        self._base = 0
        self._table = np.empty(0)

    def __len__(self) -> int:
        """The values held."""
        return self._table.size

    def __call__(self, rounds: np.ndarray) -> np.ndarray:
        """The values at ``rounds`` (integers), in their shape."""
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
                    self._values(low, kept_from),
                    table[kept_from - base : kept_to - base],
                    self._values(kept_to, stop),
                ]
            else:
                parts = [self._values(low, stop)]
            base, table = low, np.concatenate([np.asarray(part, dtype=np.float64) for part in parts])
            self._base, self._table = base, table
        return table[rounds - base]
