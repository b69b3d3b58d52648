"""Membership of every stage in the sets ``B^l`` and ``B^h`` of the selection rule, for introspection.

:func:`~uss_stream.rules.selection_rule.select_depth` stops at the first admissible stage; this
module evaluates both sets for all ``K`` stages with the same comparisons, so that
``min({i : in_B_l[i] and in_B_h[i]} ∪ {K})`` equals the depth ``select_depth`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["set_membership"]


def set_membership(
    costs: Sequence[float],
    upper: Sequence[Sequence[float]] | np.ndarray,
    *,
    strict: bool = True,
    check_lower: bool = True,
) -> tuple[list[bool], list[bool]]:
    """Which stages are in ``B^l`` and in ``B^h`` (0-based lists of ``K`` booleans).

    Parameters
    ----------
    costs
        Cumulative costs ``C_1..C_K``.
    upper
        ``K x K`` matrix of ``U_ij`` (e.g. :meth:`USSUCB.upper_bounds`); only ``i < j`` is read.
    strict
        ``B^h`` compares with ``>`` (USS-UCB) rather than ``>=`` (Hanawal et al.'s Algorithm 2).
    check_lower
        Whether the rule uses ``B^l`` at all; without it every stage counts as a member.

    Examples
    --------
    The state of :func:`~uss_stream.rules.selection_rule.select_depth`'s first example: stage 1
    beats both deeper stages, stage 2 beats stage 3, and stage 3 is not worth its cost over stage 1.

    >>> inf = float("inf")
    >>> set_membership([0.0, 0.3, 0.5], [[inf, 0.2, 0.4], [inf, inf, 0.1], [inf, inf, inf]])
    ([True, False, False], [True, True, True])

    """
    n_stages = len(costs)
    in_low = [True] * n_stages
    in_high = [True] * n_stages
    for i in range(n_stages):
        if check_lower:
            in_low[i] = all(costs[i] - costs[j] <= upper[j][i] for j in range(i))
        for j in range(i + 1, n_stages):
            gap = costs[j] - costs[i]
            if (gap <= upper[i][j]) if strict else (gap < upper[i][j]):
                in_high[i] = False
                break
    return in_low, in_high
