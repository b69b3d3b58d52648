"""Optimistic estimates of the pairwise disagreement rates, scalar and vectorised.

**Hoeffding** (USS-UCB): ``p̂_ij = D_ij / n_j`` and ``Ψ_ij = sqrt(a / n_j)`` with ``a = α·log f(t)``
(paper, USS-UCB lines 4-5); an unobserved pair (``n_j = 0``) gets ``+inf``. The scalar form is
read lazily by the set test (it runs once per event); the vectorised form evaluates the same
floating-point operations in the same order, so both give bit-identical bounds.

**Kullback-Leibler** (USS-KL-UCB): ``U_ij = max{q in [p̂_ij, 1] : n_j·kl(p̂_ij, q) <= x}`` with
``kl`` the Bernoulli divergence. The set test only asks whether a cost gap ``g`` exceeds ``U``, and
as ``kl(p̂, ·)`` increases on ``[p̂, 1]``, ``g > U`` iff ``g > p̂`` and ``n·kl(p̂, g) > x``
(:func:`kl_beats`): no root finding per decision. Both forms take logarithms with
:func:`portable_log`, built from ``frexp``, ``+``, ``-``, ``*`` and ``/`` only, because numpy's SIMD
``log`` and the C library's ``log`` differ in the last bit on some machines; with these five
correctly rounded operations the two forms agree to the bit. :func:`kl_upper_bound` computes
``U`` itself by bisection, for display and tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from uss_stream.core.forgetting import effective_horizon
from uss_stream.core.round_table import RoundTable

__all__ = [
    "KLTest",
    "LogExploration",
    "disagreement_bound",
    "kl_beats",
    "kl_beats_many",
    "kl_count",
    "kl_test_many",
    "kl_upper_bound",
    "portable_log",
    "portable_log_many",
    "upper_bounds_many",
]

_LN2 = 0.6931471805599453
_SQRT_HALF = 0.7071067811865476
# log(m) = 2·atanh(s) = 2·s·Σ_k s^(2k) / (2k+1) with s = (m-1)/(m+1), |s| <= 0.1716 after the
# reduction to m in [√½, √2): the terms beyond k = 11 are below 1e-18 relative.
_ATANH = tuple(1.0 / (2 * k + 1) for k in range(12))


class LogExploration:
    """``log f(t)`` for a positive exploration function ``f`` (default ``f(t) = t``).

    Both paths compute each value with :func:`math.log` so that they see the same floats. The
    streaming path keeps only the last value (constant memory over an endless stream); the
    vectorised path tabulates the rounds it is asked about (a sliding
    :class:`~uss_stream.core.round_table.RoundTable`: memory follows the window, not the round). With a
    ``discount`` the round ``t`` is replaced by the effective horizon ``τ_t`` (a float,
    :func:`~uss_stream.core.forgetting.effective_horizon`), so ``f`` is called as ``f(τ_t)``.

    >>> LogExploration()(1), round(LogExploration()(3), 6), round(LogExploration(discount=0.5)(3), 6)
    (0.0, 1.098612, 0.559616)

    """

    def __init__(self, f: Callable[[int], float] | None = None, discount: float | None = None) -> None:
        self._f = f
        self._discount = discount
        self._last: tuple[int, float] = (0, math.nan)
        self._table = RoundTable()

    def _log_f(self, t: int) -> float:
        horizon = t if self._discount is None else effective_horizon(t, self._discount)
        value = float(horizon) if self._f is None else float(self._f(horizon))
        if not value >= 1.0:
            raise ValueError(f"f must satisfy f(t) >= 1 for t >= 1, got f({horizon}) = {value!r}")
        return math.log(value)

    def _logs(self, start: int, stop: int) -> list[float]:
        return [self._log_f(t) for t in range(start, stop)]

    def __call__(self, t: int) -> float:
        last_t, last_value = self._last
        if t != last_t:
            last_value = self._log_f(t)
            self._last = (t, last_value)
        return last_value

    def many(self, rounds: np.ndarray) -> np.ndarray:
        """``log f(t)`` for an array of rounds (a :class:`~uss_stream.core.round_table.RoundTable`)."""
        plain = self._f is None and self._discount is None
        return self._table(rounds, _plain_logs if plain else self._logs)


def _plain_logs(start: int, stop: int) -> list[float]:
    """``log t`` for ``t = start..stop-1``: the same ``math.log``, called from C."""
    return list(map(math.log, map(float, range(start, stop))))


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

    ``scale`` holds the ``M`` values of ``α·log f(t)``. Only the pairs ``i < j`` are computed (the
    set test reads nothing else); the other entries are ``+inf``. Each bound is the scalar form's
    ``D_ij / n_j + sqrt(scale / n_j)``, the same IEEE operations, one 1-D pass per pair.

    Examples
    --------
    >>> import numpy as np
    >>> upper = upper_bounds_many(np.array([[4, 4]]), np.array([[[0, 1], [0, 0]]]), np.array([1.0]))
    >>> upper[0].tolist()
    [[inf, 0.75], [inf, inf]]
    """
    n_states, n_stages = queried.shape
    # State index innermost (returned as an M x K x K view): every pass below is contiguous.
    upper = np.full((n_stages, n_stages, n_states), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(1, n_stages):
            n_j = queried[:, j].astype(np.float64)
            psi_j = np.sqrt(scale / n_j)
            never = n_j == 0
            for i in range(j):
                column = np.divide(disagreements[:, i, j], n_j, out=upper[i, j])
                column += psi_j
                column[never] = np.inf
    return upper.transpose(2, 0, 1)


def portable_log(x: float) -> float:
    """Natural logarithm of ``x > 0`` from ``frexp`` and basic arithmetic (see the module docstring).

    Within a few units in the last place of :func:`math.log`, and bit-identical to
    :func:`portable_log_many` on every platform.

    >>> portable_log(1.0), abs(portable_log(10.0) - math.log(10.0)) < 1e-15
    (0.0, True)

    """
    m, e = math.frexp(x)
    if m < _SQRT_HALF:
        m *= 2.0
        e -= 1
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    poly = _ATANH[-1]
    for c in _ATANH[-2::-1]:
        poly = poly * z + c
    return e * _LN2 + 2.0 * s * poly


def portable_log_many(x: np.ndarray) -> np.ndarray:
    """:func:`portable_log` of a float array (entries ``<= 0`` give meaningless finite values)."""
    m, e = np.frexp(x)
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)
    e -= low
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    # The scalar form's operations in its order, in place: ((c11·z + c10)·z + ...)·z + c0.
    poly = z * _ATANH[-1]
    for c in _ATANH[-2:0:-1]:
        poly += c
        poly *= z
    poly += _ATANH[0]
    term = 2.0 * s
    term *= poly
    log = e * _LN2
    log += term
    return log


def kl_count(d: float, n: float, log_gap: float, log_rest: float) -> float:
    """``n·kl(d/n, g)`` for ``0 < n``, ``0 <= d <= n`` and ``0 < g < 1``, given ``log g`` and ``log(1-g)``.

    >>> round(kl_count(1, 10, portable_log(0.3), portable_log(0.7)), 4)   # 10·kl(0.1, 0.3)
    1.1632

    """
    rest = n - d
    total = 0.0
    if d > 0.0:
        total += d * (portable_log(d / n) - log_gap)
    if rest > 0.0:
        total += rest * (portable_log(rest / n) - log_rest)
    return total


def kl_beats(d: float, n: float, gap: float, x: float, divergence: Callable[[], float]) -> bool:
    """Whether ``gap > U`` for ``U = max{q in [p̂, 1] : n·kl(p̂, q) <= x}`` and ``p̂ = d / n``.

    Parameters
    ----------
    d, n
        Disagreements and observations of the pair (``0 <= d <= n``; floats if discounted).
        ``n = 0`` means unobserved: ``U = inf``.
    gap
        The cost gap ``C_j - C_i``.
    x
        The exploration level ``>= 0``.
    divergence
        Returns ``n·kl(p̂, gap)`` (:func:`kl_count`); called only when the shortcuts below do not
        decide, so a caller may compute it lazily or cache it.

    Notes
    -----
    The answer is ``n > 0 and gap > p̂ and (gap >= 1 or x == 0 or 2n(gap - p̂)² > x or
    n·kl(p̂, gap) > x)``, which is ``n·kl(p̂, gap) > x`` in exact arithmetic (Pinsker:
    ``kl(p̂, g) >= 2(g - p̂)²``); the shortcuts skip the logarithms in settled states and are taken
    in the same order by :func:`kl_beats_many`.

    >>> def divergence(d, n, g):
    ...     return lambda: kl_count(d, n, portable_log(g), portable_log(1.0 - g))
    >>> kl_beats(1, 10, 0.3, 1.0, divergence(1, 10, 0.3))     # 10·kl(0.1, 0.3) = 1.16
    True
    >>> kl_beats(1, 10, 0.25, 1.0, divergence(1, 10, 0.25))   # 10·kl(0.1, 0.25) = 0.72
    False

    """
    if not n > 0.0:
        return False
    p_hat = d / n
    if not gap > p_hat:
        return False
    if gap >= 1.0 or x <= 0.0:
        return True
    diff = gap - p_hat
    if 2.0 * n * diff * diff > x:
        return True
    return divergence() > x


def kl_beats_many(
    d: np.ndarray, n: np.ndarray, gap: np.ndarray, log_gap: np.ndarray, log_rest: np.ndarray, x: np.ndarray
) -> np.ndarray:
    """Vectorised :func:`kl_beats` (with :func:`kl_count`) over broadcastable float arrays.

    The same operations in the same order. The logarithms are taken only for the entries that the
    shortcuts leave undecided (about a fifth of them in a settled K = 5 stream): the divergence is
    elementwise, so each of those entries gets the value it would get among all of them.

    >>> d, n = np.array([[1.0, 0.0], [9.0, 1.0]]), np.array([[10.0, 0.0], [10.0, 10.0]])
    >>> gap = np.array([0.3, 0.25])
    >>> kl_beats_many(d, n, gap, np.log(gap), np.log(1.0 - gap), np.array([[1.0], [1.0]]))
    array([[ True, False],
           [False, False]])
    """
    observed = n > 0.0
    safe_n = np.where(observed, n, 1.0)
    p_hat = d / safe_n
    above = observed & (gap > p_hat)
    diff = gap - p_hat
    quick = (gap >= 1.0) | (x <= 0.0) | (2.0 * safe_n * diff * diff > x)
    beats = above & quick
    undecided = above & ~quick
    if not undecided.any():
        return beats
    taken = _taker(undecided)
    d, n, p_hat, log_gap, log_rest, x = (taken(a) for a in (d, safe_n, p_hat, log_gap, log_rest, x))
    beats[undecided] = _kl_counts(d, n, p_hat, log_gap, log_rest) > x
    return beats


class KLTest(NamedTuple):
    """The parts of :func:`kl_beats_many`'s test that do not depend on the level ``x``
    (:func:`kl_test_many`); :meth:`beats` applies it at any level.

    Attributes
    ----------
    above
        ``n > 0`` and ``gap > p̂``.
    certain
        ``gap >= 1``: beaten at any level once above.
    pinsker
        ``2n(gap - p̂)²``, the shortcut's bound of the divergence.
    divergence
        ``n·kl(p̂, gap)`` where ``above`` and ``gap < 1``, else ``NaN`` (never compared true).
    """

    above: np.ndarray
    certain: np.ndarray
    pinsker: np.ndarray
    divergence: np.ndarray

    def beats(self, x: np.ndarray) -> np.ndarray:
        """:func:`kl_beats_many` at the levels ``x`` (broadcast against the parts): the same test
        with the same values, the divergence taken once for every level."""
        return self.above & (self.certain | (x <= 0.0) | (self.pinsker > x) | (self.divergence > x))


def kl_test_many(
    d: np.ndarray, n: np.ndarray, gap: np.ndarray, log_gap: np.ndarray, log_rest: np.ndarray
) -> KLTest:
    """The :class:`KLTest` of ``M x P`` counts ``d``, ``n`` against the gaps (as :func:`kl_beats_many`).

    >>> d, n = np.array([[1.0, 0.0], [9.0, 1.0]]), np.array([[10.0, 0.0], [10.0, 10.0]])
    >>> gap = np.array([0.3, 0.25])
    >>> test = kl_test_many(d, n, gap, np.log(gap), np.log(1.0 - gap))
    >>> bool((test.beats(np.array([[1.0], [1.0]])) == kl_beats_many(
    ...     d, n, gap, np.log(gap), np.log(1.0 - gap), np.array([[1.0], [1.0]]))).all())
    True
    """
    observed = n > 0.0
    safe_n = np.where(observed, n, 1.0)
    p_hat = d / safe_n
    gap = np.broadcast_to(gap, d.shape)
    above = observed & (gap > p_hat)
    diff = gap - p_hat
    certain = gap >= 1.0
    divergence = np.full(d.shape, np.nan)
    needed = above & ~certain
    if needed.any():
        taken = _taker(needed)
        divergence[needed] = _kl_counts(*(taken(a) for a in (d, safe_n, p_hat, log_gap, log_rest)))
    return KLTest(above, certain, 2.0 * safe_n * diff * diff, divergence)


def _kl_counts(
    d: np.ndarray, n: np.ndarray, p_hat: np.ndarray, log_gap: np.ndarray, log_rest: np.ndarray
) -> np.ndarray:
    """:func:`kl_count` of 1-D arrays (``n > 0``, ``p̂ = d / n``): the same operations in its order."""
    rest = n - d
    term_d = np.where(d > 0.0, d * (portable_log_many(np.where(d > 0.0, p_hat, 1.0)) - log_gap), 0.0)
    ratio = np.where(rest > 0.0, rest / n, 1.0)
    term_rest = np.where(rest > 0.0, rest * (portable_log_many(ratio) - log_rest), 0.0)
    return 0.0 + term_d + term_rest


def _taker(mask: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``a -> broadcast_to(a, mask.shape)[mask]``, in mask order.

    For a 2-D mask, by the row and column indices of its entries: a boolean mask over a broadcast
    view (the cost gaps, one row for every state) is NumPy's slow path, and the arrays need not be
    C-ordered (the kernel passes transposed views).
    """
    if mask.ndim != 2:
        return lambda a: np.broadcast_to(a, mask.shape)[mask]
    rows, columns = np.nonzero(mask)

    def take(a: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        if a.shape == mask.shape:
            return a[rows, columns]
        if a.shape == (mask.shape[1],):
            return a[columns]
        return np.broadcast_to(a, mask.shape)[mask]

    return take


def kl_upper_bound(d: float, n: float, x: float, *, tolerance: float = 1e-12) -> float:
    """``U = max{q in [p̂, 1] : n·kl(p̂, q) <= x}`` by bisection (``inf`` if ``n = 0``); for display.

    >>> round(kl_upper_bound(1, 10, 1.0), 4)   # between the two gaps of kl_beats' examples
    0.2824

    """
    if not n > 0.0:
        return math.inf
    p_hat = min(d / n, 1.0)
    low, high = p_hat, 1.0
    if n * _kl(p_hat, high) <= x:
        return high
    while high - low > tolerance:
        middle = 0.5 * (low + high)
        if n * _kl(p_hat, middle) <= x:
            low = middle
        else:
            high = middle
    return low


def _kl(p: float, q: float) -> float:
    """Bernoulli ``kl(p, q)`` for ``0 <= p <= q <= 1``."""
    if q >= 1.0:
        return 0.0 if p >= 1.0 else math.inf
    total = p * math.log(p / q) if p > 0.0 else 0.0
    return total + ((1.0 - p) * math.log((1.0 - p) / (1.0 - q)) if p < 1.0 else 0.0)
