"""Certificates that a decision cannot change over a window of rounds, whatever the outputs.

A batch decider that knows a state's depth ``d`` asks whether each of the next ``W`` rounds
decides ``d`` again when every one of them queries ``d`` stages. Over such a window only known
things move: the round ``t`` grows by one per round; the counts ``n_j`` of the stages a depth-``d``
query observes (``j < d``) grow by one per round and their disagreement counts ``D_ij`` by zero or
one; every other count stays put. If the answer is yes for the window's first state, it is yes for
all of them (each state's counts are those of the previous one after a depth-``d`` round), so
``W`` rounds take depth ``d`` and their counts follow by sums: no decision is evaluated.

**Why the ranges are exact bounds of the computed values.** Each quantity the set test compares is
a composition of correctly rounded IEEE-754 operations (``+``, ``-``, ``*``, ``/``, ``sqrt``), each
monotone in each argument over the ranges used, applied to the counts and to a logarithm of the
round. Evaluated at the window's extreme counts, in the order the policies evaluate them, these
operations therefore bound every value the policy computes inside the window, to the bit. The
logarithm is the one input that is not correctly rounded (``math.log`` for USS-UCB, the
:func:`~uss_stream.rules.confidence.portable_log` of USS-KL-UCB, both within a few units in the last
place of the true logarithm, and neither proven monotone): :func:`log_range` widens the true
logarithms of a window's first and last rounds by :data:`LOG_SLACK` (thousands of units in the last
place), which contains every value either function takes in between.

**The three-valued set test.** A comparison "stage ``i`` beats stage ``j``" is *sure* when it holds
at every state of the window and *possible* when it may hold at some; :func:`certain_depth_many`
runs the set test on these and returns the depth when it is the same at every state (else 0).

Examples
--------
USS-UCB's bound of a pair never observed at depth 1 (``n_2 = 100``, ``D_12 = 10``) over rounds
``1000..1099``: only ``log t`` moves.

>>> import numpy as np
>>> window = window_ranges(np.array([1000]), np.array([[100, 100]]), np.array([[[0, 10], [0, 0]]]),
...                        np.array([1]), np.array([[100]]))
>>> low, high = hoeffding_ranges(window, alpha=0.51)
>>> import math
>>> bound = [0.1 + math.sqrt(0.51 * math.log(t) / 100) for t in (1000, 1099)]   # D/n + sqrt(α log t / n)
>>> bool(low[0, 0, 0] <= bound[0] < bound[1] <= high[0, 0, 0]), round(float(high[0, 0, 0] - low[0, 0, 0]), 6)
(True, 0.001278)
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from uss_stream.rules.confidence import KLTest, kl_test_many, portable_log_many
from uss_stream.rules.selection_rule import pair_index

__all__ = [
    "LOG_SLACK",
    "PairRanges",
    "certain_depth_many",
    "hoeffding_ranges",
    "kl_beats_ranges",
    "log_range",
    "pair_ranges",
    "window_ranges",
    "WindowRanges",
]

#: Relative widening of a logarithm's range (about 4 000 units in the last place of a double):
#: far beyond the error of ``math.log`` and of the portable logarithm.
LOG_SLACK = 2.0**-40


def log_range(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``[low, high]`` of any computed ``log x`` for ``1 <= first <= x <= last``.

    The true logarithms of ``first`` and ``last``, widened by :data:`LOG_SLACK`; ``low`` is at least
    0 (the logarithms of ``x >= 1`` are).

    >>> low, high = log_range(np.array([1.0, 10.0]), np.array([1.0, 20.0]))
    >>> low.tolist(), bool(high[1] > np.log(20.0))
    ([0.0, 2.302585092991...], True)
    """
    with np.errstate(divide="ignore"):
        low = np.log(np.asarray(first, dtype=np.float64))
        high = np.log(np.asarray(last, dtype=np.float64))
    low = np.maximum(low - LOG_SLACK * (1.0 + low), 0.0)
    high += LOG_SLACK * (1.0 + high)
    return low, high


class PairRanges(NamedTuple):
    """The counts and disagreement rates the windows of ``M`` states can reach, per state and pair
    (``M x P`` arrays, pairs in :func:`~uss_stream.policies.kernel.pair_order`) and, for what moves
    with the window's width, per state, width and pair (``M x L x P``).

    Attributes
    ----------
    observed
        Whether the windows' queries observe the pair (``j < d``): its counts move.
    disagreements
        ``D_ij`` at the windows' first round (floats).
    n_low
        ``n_j`` at the windows' first round, the smallest (floats).
    n_high
        The largest ``n_j`` (``M x L x P``; ``n_low`` for a pair not observed).
    rate_low, rate_high
        The smallest and largest computed ``D_ij / n_j`` (``M x L x P``; meaningless where
        ``n_low`` is 0).
    """

    observed: np.ndarray
    disagreements: np.ndarray
    n_low: np.ndarray
    n_high: np.ndarray
    rate_low: np.ndarray
    rate_high: np.ndarray


def pair_ranges(
    queried: np.ndarray, disagreements: np.ndarray, depths: np.ndarray, widths: np.ndarray
) -> PairRanges:
    """The :class:`PairRanges` of ``M`` states, each querying ``depths`` over windows of each of its
    ``L`` ``widths`` (``M x L``).

    At the window's ``k``-th round (``k = 0..W-1``) an observed pair has ``n_j = n + k`` and
    ``D_ij`` in ``D..D+k``: the rate ``(D + m) / (n + k)`` is smallest at ``(D, n + W - 1)`` and
    largest at ``(D, n)`` or ``(D + W - 1, n + W - 1)`` (it is monotone in ``k`` when ``m = k``).
    Correctly rounded division keeps these orders.

    >>> ranges = pair_ranges(np.array([[10, 10]]), np.array([[[0, 2], [0, 0]]]), np.array([2]),
    ...                      np.array([[5]]))
    >>> ranges.n_low.tolist(), ranges.n_high.tolist(), ranges.rate_low.tolist(), ranges.rate_high.tolist()
    ([[10.0]], [[[14.0]]], [[[0.14285714285714285]]], [[[0.42857142857142855]]])
    """
    upper_i, upper_j = _pairs(queried.shape[1])
    d = np.asarray(disagreements, dtype=np.float64)[:, upper_i, upper_j]
    n = np.asarray(queried, dtype=np.float64)[:, upper_j]
    observed = upper_j < np.asarray(depths)[:, None]
    grown = observed[:, None, :] * (np.asarray(widths, dtype=np.float64) - 1.0)[:, :, None]
    n_high = n[:, None, :] + grown
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_low = d[:, None, :] / n_high
        rate_high = np.maximum((d / n)[:, None, :], (d[:, None, :] + grown) / n_high)
    return PairRanges(observed, d, n, n_high, rate_low, rate_high)


@functools.cache
def _pairs(n_stages: int) -> tuple[np.ndarray, np.ndarray]:
    """Stage pairs ``(i, j)``, ``i < j``, in pair-index order (by ``j``, then ``i``)."""
    upper_i = [i for j in range(n_stages) for i in range(j)]
    upper_j = [j for j in range(n_stages) for _ in range(j)]
    return np.array(upper_i, dtype=np.int64), np.array(upper_j, dtype=np.int64)


class WindowRanges(NamedTuple):
    """What the windows of ``M`` states can reach: their :class:`PairRanges` and the range of the
    logarithm of their rounds (``log_low``, ``M x 1``; ``log_high``, ``M x L``: :func:`log_range`)."""

    pairs: PairRanges
    log_low: np.ndarray
    log_high: np.ndarray


def window_ranges(
    rounds: np.ndarray, queried: np.ndarray, disagreements: np.ndarray, depths: np.ndarray, widths: np.ndarray
) -> WindowRanges:
    """The :class:`WindowRanges` of ``M`` states at ``rounds``, each querying ``depths`` over
    windows of each of its ``widths`` (``M x L``).

    >>> window = window_ranges(np.array([10]), np.array([[9, 9]]), np.array([[[0, 1], [0, 0]]]),
    ...                        np.array([1]), np.array([[1, 100]]))
    >>> window.log_low.shape, window.log_high.shape, window.pairs.n_high.shape
    ((1, 1), (1, 2), (1, 2, 1))
    """
    first = np.asarray(rounds, dtype=np.float64)[:, None]
    log_low, log_high = log_range(first, first + (widths - 1))
    return WindowRanges(pair_ranges(queried, disagreements, depths, widths), log_low, log_high)


def hoeffding_ranges(window: WindowRanges, *, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``(low, high)`` (``M x L x P``) of USS-UCB's ``U_ij = D_ij / n_j + sqrt(α·log f(t) / n_j)``
    over the ``window``'s, with ``log f(t) = log t``.

    The operations of :func:`~uss_stream.rules.confidence.upper_bounds_many` in its order, at the
    window's extreme counts; ``+inf`` where ``n_j`` is 0 (``high`` where it is 0 at the window's
    first round, ``low`` too where it stays 0).
    """
    ranges = window.pairs
    scale_low = (alpha * window.log_low)[:, :, None]
    scale_high = (alpha * window.log_high)[:, :, None]
    n_low = ranges.n_low[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        low = ranges.rate_low + np.sqrt(scale_low / ranges.n_high)
        high = ranges.rate_high + np.sqrt(scale_high / n_low)
    low[ranges.n_high == 0.0] = np.inf
    high[np.broadcast_to(n_low == 0.0, high.shape)] = np.inf
    return low, high


def kl_beats_ranges(
    window: WindowRanges, n_stages: int, *, alpha: float, gaps: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """``(sure, possible)`` (``M x L x P``) outcomes of USS-KL-UCB's ``beats(i, j)`` over the ``window``'s
    of a cascade of ``n_stages``; ``gaps`` are the policy's ``(g, log g, log(1-g))``.

    The level ``x_j = α·max(log t - log(K·n_j), 0)`` grows with ``t`` and shrinks with ``n_j``, and
    the computed test (:func:`~uss_stream.rules.confidence.kl_beats_many`) is monotone in it. A pair
    the window does not observe keeps its counts: its outcome is the test's at the largest level
    (sure) and at the smallest (possible), with the divergence of its fixed counts
    (:func:`~uss_stream.rules.confidence.kl_test_many`, taken once per state). An observed pair is
    *surely not* beaten when ``g <= D/n`` at its smallest rate, and *surely* beaten when one of the
    test's shortcuts (``g >= 1``, ``x <= 0``, ``2n(g - p̂)² > x``) holds at its extreme counts and
    largest level; anything else is left open.
    """
    gap, log_gap, log_rest = gaps
    ranges, log_low, log_high = window
    n = ranges.n_low
    log_count = portable_log_many(n_stages * np.where(n > 0.0, n, 1.0))[:, None, :]
    # A pair the window does not observe: the test at the largest level (sure), the smallest (possible).
    test = kl_test_many(ranges.disagreements, n, gap, log_gap, log_rest)
    test = KLTest(*(part[:, None, :] for part in test))
    fixed_sure = test.beats(alpha * np.maximum(log_high[:, :, None] - log_count, 0.0))
    fixed_possible = test.beats(alpha * np.maximum(log_low[:, :, None] - log_count, 0.0))
    # An observed pair: the level is largest at the smallest log(K·n_j) the window reaches, which
    # is at least that of its first round less the slack.
    level_top = alpha * np.maximum(log_high[:, :, None] - (log_count - LOG_SLACK * (1.0 + log_count)), 0.0)
    known = n[:, None, :] > 0.0
    with np.errstate(invalid="ignore"):
        diff = gap - ranges.rate_high
        quick = (gap >= 1.0) | (level_top <= 0.0) | (2.0 * n[:, None, :] * diff * diff > level_top)
        moving_sure = known & (gap > ranges.rate_high) & quick
        moving_never = (ranges.n_high == 0.0) | (known & (gap <= ranges.rate_low))
    observed = ranges.observed[:, None, :]
    sure = np.where(observed, moving_sure, fixed_sure)
    possible = np.where(observed, ~moving_never, fixed_possible)
    return sure, possible


def certain_depth_many(
    sure: np.ndarray, possible: np.ndarray, n_stages: int, *, check_lower: bool = True
) -> np.ndarray:
    """The set test in three-valued logic: the depth of each state when every state of its window
    decides it, else 0.

    ``sure`` and ``possible`` hold booleans per pair in their last axis (pair index
    :func:`~uss_stream.rules.selection_rule.pair_index`): "stage ``i`` beats stage ``j``" holds at
    every state of the window, or may hold at some (``sure`` implies ``possible``). Stage ``i`` is
    surely admissible when every comparison its sets need surely goes its way, possibly admissible
    when none surely goes against it; the depth is certain when some stage is surely admissible
    and no cheaper one possibly is (or none is possibly admissible: depth ``K``). The result has the
    shape of the other axes.

    >>> sure = np.array([[True, True, False], [True, False, False]])
    >>> possible = np.array([[True, True, False], [True, True, False]])
    >>> certain_depth_many(sure, possible, 3).tolist()   # state 1: stage 1 may or may not beat 3
    [1, 0]
    """
    shape = sure.shape[:-1]
    certain = np.full(shape, n_stages, dtype=np.int64)
    for i in range(n_stages - 2, -1, -1):
        surely = np.ones(shape, dtype=bool)
        maybe = np.ones(shape, dtype=bool)
        for j in range(i + 1, n_stages):
            surely &= sure[..., pair_index(i, j)]
            maybe &= possible[..., pair_index(i, j)]
        if check_lower:
            for j in range(i):
                surely &= ~possible[..., pair_index(j, i)]
                maybe &= ~sure[..., pair_index(j, i)]
        certain = np.where(surely, i + 1, np.where(maybe, 0, certain))
    return certain
