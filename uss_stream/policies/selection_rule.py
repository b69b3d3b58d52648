"""The set test shared by the confidence-bound policies, in scalar and vectorised form.

For stages ``i < j`` (0-based here) let ``U[i][j]`` be an optimistic estimate of how much stage
``j`` improves on stage ``i`` (for USS-UCB: ``p̂_ij + Ψ_ij``) and ``C`` the cumulative costs.
Stage ``i`` *beats* a deeper stage ``j`` when ``C_j - C_i > U_ij`` (the deeper stage is not worth
its extra cost). The paper's sets (eq. 8) are

* ``B^l = {i : for all j < i, C_i - C_j <= U_ji} ∪ {1}``: no cheaper stage beats ``i``,
* ``B^h = {i : for all j > i, C_j - C_i > U_ij} ∪ {K}``: ``i`` beats every deeper stage,

and the depth is ``min(B^l ∩ B^h ∪ {K})``. Hanawal et al.'s Algorithm 2 uses ``>=`` in ``B^h``
and no ``B^l`` (``check_lower=False``). ``U = inf`` marks a pair never observed: such a pair is
never beaten, so round 1 (nothing observed) queries all ``K`` stages.

Both forms evaluate the same IEEE-754 comparisons on the same operands, so for equal inputs they
return equal depths; the test suite checks this on random states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["cost_gaps", "select_depth", "select_depth_many"]


def select_depth(
    costs: Sequence[float],
    upper: Callable[[int, int], float],
    *,
    strict: bool = True,
    check_lower: bool = True,
) -> int:
    """Depth (1-based) chosen by the set test for one state.

    Parameters
    ----------
    costs
        Cumulative costs ``C_1..C_K``.
    upper
        ``upper(i, j)`` returns ``U_ij`` for 0-based ``i < j``. It is called lazily, only for the
        pairs the test reaches (a converged shallow policy reads ``K - 1`` of them).
    strict
        Use ``>`` (USS-UCB) rather than ``>=`` (Hanawal et al.'s Algorithm 2) in ``B^h``.
    check_lower
        Require membership of ``B^l`` as well (USS-UCB).

    Examples
    --------
    Costs ``C = (0, 0.3, 0.5)``; stage 1 beats stage 2 (0.3 > 0.2) and stage 3 (0.5 > 0.4):

    >>> bounds = {(0, 1): 0.2, (0, 2): 0.4, (1, 2): 0.1}
    >>> select_depth([0.0, 0.3, 0.5], lambda i, j: bounds[i, j])
    1

    Nothing observed yet: no stage is beaten, only ``K`` is in ``B^h``:

    >>> select_depth([0.0, 0.3, 0.5], lambda i, j: float("inf"))
    3

    """
    n_stages = len(costs)
    for i in range(n_stages):
        cost_i = costs[i]
        if check_lower:
            lower_ok = True
            for j in range(i):
                if cost_i - costs[j] > upper(j, i):
                    lower_ok = False
                    break
            if not lower_ok:
                continue
        high_ok = True
        for j in range(i + 1, n_stages):
            gap = costs[j] - cost_i
            if (gap <= upper(i, j)) if strict else (gap < upper(i, j)):
                high_ok = False
                break
        if high_ok:
            return i + 1
    return n_stages


def cost_gaps(costs: Sequence[float]) -> np.ndarray:
    """``G[i, j] = C_j - C_i`` as a ``K x K`` float array (the operands of both forms)."""
    n_stages = len(costs)
    gaps = np.zeros((n_stages, n_stages))
    for i in range(n_stages):
        for j in range(n_stages):
            gaps[i, j] = costs[j] - costs[i]
    return gaps


def select_depth_many(
    gaps: np.ndarray,
    upper: np.ndarray,
    *,
    strict: bool = True,
    check_lower: bool = True,
) -> np.ndarray:
    """Vectorised :func:`select_depth` over ``M`` states.

    Parameters
    ----------
    gaps
        ``K x K`` array from :func:`cost_gaps`.
    upper
        ``M x K x K`` array; entries with ``i >= j`` are ignored.

    Returns
    -------
    numpy.ndarray
        ``M`` depths in ``1..K`` (int64).

    Examples
    --------
    >>> import numpy as np
    >>> inf = np.inf
    >>> upper = np.array([[[inf, 0.2, 0.4], [inf, inf, 0.1], [inf, inf, inf]],
    ...                   [[inf] * 3] * 3])
    >>> select_depth_many(cost_gaps([0.0, 0.3, 0.5]), upper).tolist()
    [1, 3]

    """
    n_stages = gaps.shape[0]
    # One comparison per pair over all M states (strided 1-D views): far fewer and smaller
    # temporaries than broadcasting M x K x K masks, and the same IEEE comparisons.
    beats: dict[tuple[int, int], np.ndarray] = {}
    for i in range(n_stages):
        for j in range(i + 1, n_stages):
            column = upper[:, i, j]
            beats[i, j] = (gaps[i, j] > column) if strict else (gaps[i, j] >= column)
    depth = np.full(upper.shape[0], n_stages, dtype=np.int64)
    for i in range(n_stages - 2, -1, -1):
        admissible = np.ones(upper.shape[0], dtype=bool)
        for j in range(i + 1, n_stages):
            admissible &= beats[i, j]
        if check_lower:
            # For j < i the lower test C_i - C_j <= U_ji is the negation of `j beats i` (strict).
            for j in range(i):
                admissible &= gaps[j, i] <= upper[:, j, i]
        depth[admissible] = i + 1
    return depth
