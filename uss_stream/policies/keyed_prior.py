"""The pool prior of a keyed policy: how much a key trusts the other keys' counts against its own.

A :class:`~uss_stream.policies.keyed.KeyedPolicy` keeps one row of counts per key and one pooled
row for all keys. Rows share one layout (:class:`CountLayout`): the key's rounds ``t``, then
``n_1..n_K`` (the rounds each stage was queried), then ``D_ij`` of the pairs in
:func:`~uss_stream.policies.kernel.pair_order`, the counts of
:class:`~uss_stream.core.stats.DisagreementStats` in one vector.

A key decides on its **effective counts**: its own counts plus a *prior* drawn from the pool.
With ``S`` the pool's counts as of its last refresh and ``O = max(S - own, 0)`` the other keys'
part of them (fieldwise), the prior for a key with ``t`` own rounds is

* the strength ``s(t) = floor(m·h / (h + t))`` rounds (``s = m`` without a half-life ``h``): ``m``
  at the key's first event, half of it after ``h`` own rounds, vanishing as the key's own counts
  grow, so that a key with many events decides on its own counts, as an independent learner;
* rounds ``min(O_t, s)`` and, per stage, ``a_j = min(O_n_j, s)`` queries: the other keys' counts
  truncated to at most ``s`` rounds' worth, stage by stage (a stage the pool rarely queries keeps
  its few counts, so the prior is no more sure of it than the pool is);
* per pair, ``b_ij = min(a_j, floor(O_D_ij · a_j / O_n_j))``: the pool's disagreement rate on the
  truncated queries.

The effective counts are ``own + prior`` in every field, a valid state of the base policy (plain
integers with plain counts), so any policy decides on them with its own rule. A key with no other
key's counts to lean on (a single key, the first events of a stream) decides exactly as the base
policy on its own counts.

Examples
--------
>>> import numpy as np
>>> layout = CountLayout(2)                  # K = 2: rounds, n_1, n_2, D_12
>>> prior = PoolPrior(strength=100, half_life=None)
>>> pool = np.array([1000, 1000, 50, 20])    # the other keys: 1000 rounds, stage 2 queried 50 times
>>> prior.effective(np.zeros((1, 4), dtype=np.int64), pool).tolist()   # a new key
[[100, 100, 50, 20]]
>>> own = np.array([[300, 300, 10, 1]])     # a key with 300 rounds: s = floor(100·100 / 400) = 25
>>> PoolPrior(strength=100, half_life=100).effective(own, pool + own[0]).tolist()
[[325, 325, 35, 11]]

"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from uss_stream.policies.kernel import pair_order
from uss_stream.rules.confidence import kl_count, portable_log_many

__all__ = ["MAX_HALF_LIFE", "MAX_STRENGTH", "CountLayout", "PoolPrior"]

#: Bounds of the prior's parameters (their product stays exact in 64-bit arithmetic).
MAX_STRENGTH = 10**6
MAX_HALF_LIFE = 10**9


class CountLayout:
    """The columns of one row of counts: ``t``, ``n_1..n_K``, then ``D_ij`` in pair order.

    >>> layout = CountLayout(3)
    >>> layout.width, layout.pairs
    (7, 3)
    >>> layout.step_of(2, np.array([1, 0, 1])).tolist()   # depth 2 observes pair (1, 2) only
    [1, 1, 1, 0, 1, 0, 0]
    """

    def __init__(self, n_stages: int) -> None:
        self.n_stages = n_stages
        self.pairs = n_stages * (n_stages - 1) // 2
        self.width = 1 + n_stages + self.pairs
        self.upper_i, self.upper_j = pair_order(n_stages)
        seen = np.zeros((n_stages + 1, self.width), dtype=np.int8)
        for depth in range(1, n_stages + 1):
            seen[depth, 0] = 1
            seen[depth, 1 : 1 + n_stages] = np.arange(n_stages) < depth
            seen[depth, 1 + n_stages :] = self.upper_j < depth
        #: ``seen[d]``: the columns a depth-``d`` round adds to (its pairs' indicators aside).
        self.seen = seen

    def step_of(self, depth: int, indicators: np.ndarray) -> np.ndarray:
        """The row a round at ``depth`` adds, its pairs' disagreement ``indicators`` (``P`` 0/1)."""
        step = self.seen[depth].astype(np.int64)
        step[1 + self.n_stages :] *= indicators
        return step

    def steps(self, depths: np.ndarray, indicators: np.ndarray) -> np.ndarray:
        """``(M, width)`` int64: the rows ``M`` rounds at ``depths`` add, their ``M x P`` indicators."""
        step = self.seen.take(depths, axis=0).astype(np.int64)
        step[:, 1 + self.n_stages :] *= indicators
        return step

    def matrices(self, rows: np.ndarray) -> np.ndarray:
        """``(M, K, K)`` disagreement matrices (``D_ij`` above the diagonal) of ``(M, width)`` rows."""
        k = self.n_stages
        matrix = np.zeros((rows.shape[0], k, k), dtype=rows.dtype)
        matrix[:, self.upper_i, self.upper_j] = rows[:, 1 + k :]
        return matrix

    def queried(self, rows: np.ndarray) -> np.ndarray:
        """``(M, K)`` counts ``n_j`` of ``(M, width)`` rows."""
        return rows[:, 1 : 1 + self.n_stages]


@dataclass(frozen=True)
class PoolPrior:
    """The prior of the module docstring: strength ``m`` rounds, half-life ``h`` own rounds.

    Parameters
    ----------
    strength
        ``m``, the rounds' worth of the other keys' counts a new key starts from (``0``: none,
        independent learners).
    half_life
        ``h``: the prior's strength halves after ``h`` own rounds of the key (``None``: it never
        decays, a fixed prior).
    tolerance
        ``c``: a key whose own counts put the cost test of some pair ``(i, j)`` on the other side
        from the other keys' rate gets no prior (``None``: no test). The test of a pair compares
        its disagreement rate with the cost gap ``g = C_j - C_i``; it is contradicted when the
        others' rate ``r_ij`` and the key's ``p̂_ij = d_ij / n_j`` lie on opposite sides of ``g``
        and ``n_j·kl(p̂_ij, g) > c`` (the key is sure of its side at level ``c``, as USS-KL-UCB's
        bound). Keys whose rates differ from the pool's without changing a test keep the prior; a
        key whose best depth differs stops leaning on the pool as soon as its counts show it.
    cumulative_costs
        ``C_1..C_K``, needed with a tolerance.
    """

    strength: int
    half_life: int | None
    tolerance: float | None = None
    cumulative_costs: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        strength, half_life = self.strength, self.half_life
        if isinstance(strength, bool) or not isinstance(strength, int) or not 0 <= strength <= MAX_STRENGTH:
            raise ValueError(f"prior_strength must be an integer in 0..{MAX_STRENGTH}, got {strength!r}")
        if half_life is not None and (
            isinstance(half_life, bool)
            or not isinstance(half_life, int)
            or not 1 <= half_life <= MAX_HALF_LIFE
        ):
            raise ValueError(
                f"prior_half_life must be None or an integer in 1..{MAX_HALF_LIFE}, got {half_life!r}"
            )
        tolerance = self.tolerance
        if tolerance is not None and (
            isinstance(tolerance, bool)
            or not isinstance(tolerance, (int, float))
            or not 0 < tolerance < math.inf
        ):
            raise ValueError(f"prior_tolerance must be None or a finite number > 0, got {tolerance!r}")

    def strength_at(self, rounds: np.ndarray) -> np.ndarray:
        """``s(t)`` (float64, whole numbers) for an array of own rounds ``t``.

        >>> PoolPrior(strength=300, half_life=100).strength_at(np.array([0, 100, 200])).tolist()
        [300.0, 150.0, 100.0]
        """
        m = float(self.strength)
        if self.half_life is None:
            return np.full(np.shape(rounds), m)
        h = float(self.half_life)
        return np.floor(m * h / (h + np.asarray(rounds, dtype=np.float64)))

    def effective(self, own: np.ndarray, snapshot: np.ndarray) -> np.ndarray:
        """The effective counts ``own + prior`` of ``(M, width)`` own rows, the pool ``snapshot``
        (``width``); integer rows give integer counts, float rows (discounted) float counts."""
        own_f = np.asarray(own, dtype=np.float64)
        others = np.maximum(np.asarray(snapshot, dtype=np.float64)[None, :] - own_f, 0.0)
        strength = self.strength_at(own_f[:, 0])[:, None]
        width = own_f.shape[1]
        k = _stages_of(width)
        upper_j = pair_order(k)[1]
        if self.tolerance is not None:
            strength = np.where(self._contradicted(own_f, others, k, upper_j)[:, None], 0.0, strength)
        prior = np.minimum(others, strength)  # rounds and queries, truncated to s rounds' worth
        n_other = others[:, 1 + upper_j]
        a = prior[:, 1 + upper_j]
        with np.errstate(divide="ignore", invalid="ignore"):
            rate_part = others[:, 1 + k :] * a / n_other
        pairs = np.where(n_other > 0.0, np.minimum(a, rate_part), 0.0)
        prior[:, 1 + k :] = pairs if own.dtype.kind == "f" else np.floor(pairs)
        if own.dtype.kind != "f":
            return own + prior.astype(np.int64)
        return own_f + prior

    def effective_one(self, own: list[float], snapshot: list[float], plain: bool) -> list[float]:
        """:meth:`effective` of one row, in Python: the same floating-point operations in the same
        order, so the same counts (the streaming loop's path; :meth:`effective` is the batch's).

        >>> PoolPrior(100, 100).effective_one([300, 300, 10, 1], [1300, 1300, 60, 21], plain=True)
        [325, 325, 35, 11]
        """
        k = _stages_of(len(own))
        others = [max(float(a) - float(b), 0.0) for a, b in zip(snapshot, own)]
        t = float(own[0])
        m = float(self.strength)
        strength = (
            m
            if self.half_life is None
            else float(math.floor(m * float(self.half_life) / (float(self.half_life) + t)))
        )
        upper_j = pair_order(k)[1].tolist()
        if self.tolerance is not None and self._contradicted_one(own, others, k, upper_j):
            strength = 0.0
        prior = [min(value, strength) for value in others]
        for p, j in enumerate(upper_j, start=1 + k):
            n_other = others[1 + j]
            a = prior[1 + j]
            pairs = min(a, others[p] * a / n_other) if n_other > 0.0 else 0.0
            prior[p] = float(math.floor(pairs)) if plain else pairs
        if plain:
            return [int(a) + int(b) for a, b in zip(own, prior)]
        return [float(a) + b for a, b in zip(own, prior)]

    def _gaps(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per pair in pair order: the cost gap ``C_j - C_i``, whether it is inside ``(0, 1)`` (only
        then can a disagreement rate fall on either side), and its portable logarithms."""
        costs = self.cumulative_costs
        if len(costs) != k:
            raise ValueError(f"the prior's tolerance needs the {k} cumulative costs, got {len(costs)}")
        upper_i, upper_j = pair_order(k)
        gap = np.array([costs[j] - costs[i] for i, j in zip(upper_i.tolist(), upper_j.tolist())])
        inside = (gap > 0.0) & (gap < 1.0)
        safe = np.where(inside, gap, 0.5)
        return gap, inside, portable_log_many(safe), portable_log_many(1.0 - safe)

    def _contradicted(self, own: np.ndarray, others: np.ndarray, k: int, upper_j: np.ndarray) -> np.ndarray:
        """``(M,)``: whether a key's own counts put some pair's cost test on the other side from
        the other keys' rate, at level ``tolerance`` (see the class docstring)."""
        gap, inside, log_gap, log_rest = self._gaps(k)
        n, d = own[:, 1 + upper_j], own[:, 1 + k :]
        n_other = others[:, 1 + upper_j]
        with np.errstate(divide="ignore", invalid="ignore"):
            rate, mine = others[:, 1 + k :] / n_other, d / n
            rest = n - d
            total = np.where(d > 0.0, d * (portable_log_many(np.where(d > 0.0, mine, 1.0)) - log_gap), 0.0)
            total = total + np.where(
                rest > 0.0, rest * (portable_log_many(np.where(rest > 0.0, rest / n, 1.0)) - log_rest), 0.0
            )
        opposite = ((rate < gap) & (gap < mine)) | ((mine < gap) & (gap < rate))
        sure = (n > 0.0) & (n_other > 0.0) & inside & opposite & (total > float(self.tolerance))
        return sure.any(axis=1)

    def _contradicted_one(self, own: list[float], others: list[float], k: int, upper_j: list[int]) -> bool:
        """:meth:`_contradicted` of one key, in Python: the same operations in the same order."""
        gap, inside, log_gap, log_rest = (values.tolist() for values in self._gaps(k))
        for pair, j in enumerate(upper_j):
            p = 1 + k + pair
            n, d, n_other = float(own[1 + j]), float(own[p]), others[1 + j]
            if not (n > 0.0 and n_other > 0.0 and inside[pair]):
                continue
            rate, mine, g = others[p] / n_other, d / n, gap[pair]
            if not ((rate < g < mine) or (mine < g < rate)):
                continue
            if kl_count(d, n, log_gap[pair], log_rest[pair]) > float(self.tolerance):
                return True
        return False


def _stages_of(width: int) -> int:
    """``K`` of a row of ``width = 1 + K + K(K-1)/2`` columns."""
    k = 1
    while 1 + k + k * (k - 1) // 2 < width:
        k += 1
    return k
