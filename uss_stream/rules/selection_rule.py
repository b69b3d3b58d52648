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

Policies whose comparison is not "gap above a number" (USS-KL-UCB compares KL divergences, USS-TS
posterior probabilities) give the outcome of each comparison instead: :func:`select_depth_by` and
:func:`select_depth_many_by` take ``beats(i, j)`` (``True`` iff stage ``i`` beats the deeper stage
``j``) and apply the same sets, with ``B^l`` the strict test's complement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "cost_gaps",
    "pair_gaps",
    "pair_index",
    "select_depth",
    "select_depth_by",
    "select_depth_many",
    "select_depth_many_by",
]


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


def select_depth_by(n_stages: int, beats: Callable[[int, int], bool], *, check_lower: bool = True) -> int:
    """Depth (1-based) chosen by the set test from the outcomes of its comparisons, for one state.

    ``beats(i, j)`` (0-based ``i < j``) says whether stage ``i`` beats the deeper stage ``j``;
    ``B^h = {i : beats(i, j) for all j > i} ∪ {K}``, ``B^l = {i : not beats(j, i) for all j < i}``
    (when ``check_lower``) and the depth is ``min(B^l ∩ B^h ∪ {K})``. ``beats`` is called lazily.

    >>> select_depth_by(3, lambda i, j: (i, j) == (1, 2))   # only stage 2 beats a deeper one
    2
    >>> select_depth_by(3, lambda i, j: (i, j) in {(0, 1), (1, 2)})   # 1 beats 2: 2 not in B^l
    3
    >>> select_depth_by(3, lambda i, j: (i, j) in {(0, 1), (1, 2)}, check_lower=False)
    2

    """
    for i in range(n_stages):
        if check_lower:
            lower_ok = True
            for j in range(i):
                if beats(j, i):
                    lower_ok = False
                    break
            if not lower_ok:
                continue
        high_ok = True
        for j in range(i + 1, n_stages):
            if not beats(i, j):
                high_ok = False
                break
        if high_ok:
            return i + 1
    return n_stages


def select_depth_many_by(beats: np.ndarray, n_stages: int, *, check_lower: bool = True) -> np.ndarray:
    """Vectorised :func:`select_depth_by` over ``M`` states.

    ``beats`` is an ``M x P`` boolean array, ``P = K(K-1)/2``, one column per pair ``(i, j)``
    (0-based ``i < j``) at index ``pair_index(i, j) = j(j-1)/2 + i`` (pairs ordered by ``j``, then
    ``i``, as :func:`uss_stream.policies.kernel.pair_order`).

    >>> import numpy as np
    >>> beats = np.zeros((2, 3), dtype=bool)   # pairs (0, 1), (0, 2), (1, 2)
    >>> beats[0, 2] = True                     # state 0: stage 2 beats stage 3
    >>> select_depth_many_by(beats, 3).tolist()
    [2, 3]

    """
    n_states = beats.shape[0]
    depth = np.full(n_states, n_stages, dtype=np.int64)
    for i in range(n_stages - 2, -1, -1):
        admissible = np.ones(n_states, dtype=bool)
        for j in range(i + 1, n_stages):
            admissible &= beats[:, pair_index(i, j)]
        if check_lower:
            for j in range(i):
                admissible &= ~beats[:, pair_index(j, i)]
        depth[admissible] = i + 1
    return depth


def pair_index(i: int, j: int) -> int:
    """Column of the pair ``(i, j)``, ``0 <= i < j``, when pairs are ordered by ``j`` then ``i``.

    >>> [pair_index(i, j) for j in range(3) for i in range(j)]
    [0, 1, 2]

    """
    return j * (j - 1) // 2 + i


def cost_gaps(costs: Sequence[float]) -> np.ndarray:
    """``G[i, j] = C_j - C_i`` as a ``K x K`` float array (the operands of both forms)."""
    n_stages = len(costs)
    gaps = np.zeros((n_stages, n_stages))
    for i in range(n_stages):
        for j in range(n_stages):
            gaps[i, j] = costs[j] - costs[i]
    return gaps


def pair_gaps(costs: Sequence[float]) -> np.ndarray:
    """``C_j - C_i`` per pair ``i < j``, in :func:`pair_index` order (the entries of :func:`cost_gaps`).

    >>> pair_gaps([0.0, 0.25, 0.5]).tolist()
    [0.25, 0.5, 0.25]
    """
    n_stages = len(costs)
    return np.array([costs[j] - costs[i] for j in range(n_stages) for i in range(j)], dtype=np.float64)


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
