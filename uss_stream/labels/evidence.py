"""What labels say about pairs of stages: counts on disagreement rounds and confidence bounds.

For stages ``i < j`` the error-rate difference is ``δ_ij = γ_i - γ_j = p_ij · e_ij`` with ``p_ij``
the disagreement rate (label-free) and ``e_ij = E[z | i, j disagree]``, ``z = 1{j right} - 1{i right}``
(``docs/audited.md``; a label on a round where the two agree says nothing about them). A pair's
label counts are ``m`` (labelled disagreement rounds), ``w⁺`` (only the deeper stage right) and
``w⁻`` (only the shallower one right): ``ê = (w⁺ - w⁻) / m``.

Confidence bounds: ``x = (z + 1) / 2`` lies in ``[0, 1]``, so the Bernoulli KL bounds on its mean
(Garivier & Cappé 2011) hold, ``x^U = max{q >= x̄ : m·kl(x̄, q) <= L}`` and ``x^L`` likewise
below, ``e = 2x - 1``, at the level ``L = pair_level(L_t, m, K)``; ``p`` gets Hoeffding's
``p̂ ± sqrt(x / 2n)`` at ``x = pair_level(L_t, n, K)`` (``n >> m``, so its share of the uncertainty
is small), and ``δ^U = p^U·e^U`` (``p^L·e^U`` if ``e^U < 0``), ``δ^L`` symmetrically. ``L_t`` is a
function of the round's power of two (:func:`label_level`), so a pair's ``e`` bounds change only
when its label counts do or ``t`` passes a power of two: every user (streaming policy, replay,
monitor) computes them with the one scalar :func:`e_bounds` and may cache them. The ``δ`` bounds
have a scalar and a vectorised form that agree to the bit (the operations of
:func:`~uss_stream.rules.confidence.portable_log` only).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from uss_stream.core.schema import is_count, state_count
from uss_stream.rules.confidence import portable_log, portable_log_many

__all__ = [
    "EVIDENCE_FORMAT",
    "LabelEvidence",
    "delta_bounds",
    "delta_bounds_many",
    "delta_from_p",
    "e_bounds",
    "e_upper",
    "label_level",
    "label_level_many",
    "pair_level",
    "pair_level_many",
    "p_bounds_many",
]

EVIDENCE_FORMAT = "uss-stream/label-evidence/v1"
_LN2 = 0.6931471805599453
_STEPS = 28
# _certified's margin 4κ (κ = 2^-46), its least distance from x̄, the Halley iterations it allows
# and the step (relative to q·(1 - q)) after which the root is taken as found.
_MARGIN = 2.0**-44
_NEAR = 2.0**-50
_HALLEY = 40
_SETTLED = 2.0**-24
# Counts beyond which a midpoint might come within 2^-50 of x̄ (not certified there).
_LARGEST = 1 << 20


def label_level(t: int) -> float:
    """``L_t = (k + 1)·log 2`` with ``2**k`` the smallest power of two ``>= t``: at least ``log 2t``.

    >>> label_level(1), label_level(2), round(label_level(3), 4), label_level(4) == label_level(3)
    (0.6931471805599453, 1.3862943611198906, 2.0794, True)

    """
    return ((int(t) - 1).bit_length() + 1) * _LN2


def label_level_many(rounds: np.ndarray) -> np.ndarray:
    """:func:`label_level` of an integer array (``frexp`` gives the bit length)."""
    _, exponent = np.frexp(np.asarray(rounds, dtype=np.float64) - 1.0)
    return (exponent + 1) * _LN2


def pair_level(level: float, count: float, n_stages: int) -> float:
    """``max(L_t - log(K·count), 1)``: the level of a bound from ``count >= 1`` observations.

    As USS-KL-UCB's ``log₊(t / (K·n))`` (KL-UCB++), the level falls as a pair's share of the
    rounds grows, with a floor of 1 (so that few observations never give a tight bound).

    >>> pair_level(label_level(1000), 10, 3) == max(11 * 0.6931471805599453 - portable_log(30.0), 1.0)
    True

    """
    return max(level - portable_log(n_stages * count), 1.0)


def pair_level_many(level: np.ndarray, count: np.ndarray, n_stages: int) -> np.ndarray:
    """:func:`pair_level` of arrays (entries with ``count = 0`` are meaningless)."""
    count = np.asarray(count, dtype=np.float64)
    return np.maximum(level - portable_log_many(n_stages * np.where(count > 0.0, count, 1.0)), 1.0)


def e_bounds(m: int, w_plus: int, w_minus: int, level: float) -> tuple[float, float]:
    """``(e^L, e^U)`` of a pair with ``m >= 1`` labelled disagreements; ``(-1, 1)`` for ``m = 0``.

    >>> [round(b, 3) for b in e_bounds(20, 20, 0, 3.0)]   # the deeper stage always right
    [0.721, 1.0]
    """
    if m <= 0:
        return -1.0, 1.0
    return _e_side(m, w_plus, w_minus, level, False), _e_side(m, w_plus, w_minus, level, True)


def e_upper(m: int, w_plus: int, w_minus: int, level: float) -> float:
    """``e^U`` of :func:`e_bounds` alone (to the bit).

    >>> e_upper(30, 12, 9, 2.5) == e_bounds(30, 12, 9, 2.5)[1]
    True
    """
    if m <= 0:
        return 1.0
    return _e_side(m, w_plus, w_minus, level, True)


def _e_side(m: int, w_plus: int, w_minus: int, level: float, upper: bool) -> float:
    """One side of the KL bound on ``e``: a bisection on ``x = (e + 1) / 2`` of :data:`_STEPS` steps.

    Each step tests ``m·kl(x̄, q) <= level`` at the midpoint ``q`` of the bracket (the float
    :func:`_divergence`); the bracket starts at ``[x̄, 1]`` (upper side) or ``[0, x̄]`` and its end
    gives the bound. The answer is that of evaluating every step; most steps are decided without
    their logarithms (:func:`_certified`), the others evaluate them.
    """
    mean = (w_plus - w_minus + m) / (2 * m)
    if upper and mean >= 1.0:
        return 1.0
    if not upper and mean <= 0.0:
        return -1.0
    log_p = math.log(mean) if mean > 0.0 else 0.0
    rest = 1.0 - mean
    log_rest = math.log(rest) if mean < 1.0 else 0.0
    inside, outside = _certified(m, mean, log_p, rest, log_rest, level, upper)
    if upper:
        low, high = mean, 1.0
        for _ in range(_STEPS):
            middle = 0.5 * (low + high)
            if middle <= inside:
                low = middle
            elif middle >= outside or _divergence(m, mean, log_p, rest, log_rest, middle) > level:
                high = middle
            else:
                low = middle
        return 2.0 * high - 1.0
    low, high = 0.0, mean
    for _ in range(_STEPS):
        middle = 0.5 * (low + high)
        if middle >= inside:
            high = middle
        elif middle <= outside or _divergence(m, mean, log_p, rest, log_rest, middle) > level:
            low = middle
        else:
            high = middle
    return 2.0 * low - 1.0


def _divergence(m: int, mean: float, log_p: float, rest: float, log_rest: float, q: float) -> float:
    """The float ``m·kl(x̄, q) = m·(x̄·(log x̄ - log q) + (1 - x̄)·(log(1 - x̄) - log(1 - q)))``
    (a term dropped where ``x̄`` is 0 or 1), given ``x̄``, ``log x̄``, ``1 - x̄`` and ``log(1 - x̄)``."""
    total = 0.0
    if mean > 0.0:
        total += mean * (log_p - math.log(q))
    if mean < 1.0:
        total += rest * (log_rest - math.log(1.0 - q))
    return m * total


def _certified(
    m: int,
    mean: float,
    log_p: float,
    rest: float,
    log_rest: float,
    level: float,
    upper: bool,
) -> tuple[float, float]:
    """``(inside, outside)``: the float ``m·kl(x̄, q)`` is ``<= level`` at every midpoint ``q`` of
    :func:`_e_side`'s bisection on ``inside``'s side of it (towards ``x̄``, ``inside`` included), and
    ``> level`` at every midpoint ``q`` on the far side of ``outside`` (included). A side that cannot
    be certified is returned as a point no midpoint reaches (``-1`` or ``2``).

    **Why.** Let ``G(q)`` be ``m·kl`` in exact arithmetic on the float constants ``x̄``, ``log x̄``,
    ``1 - x̄``, ``log(1 - x̄)``, and ``F(q)`` the float :func:`_divergence`. Rounding analysis of
    ``F`` (seven roundings of at most ``u = 2^-53`` relative each, each logarithm within one unit in
    the last place, ``1 - q`` rounded) gives ``|F - G| <= 7u·(S + m)`` with
    ``S = m·(x̄·(|log x̄| + |log q|) + (1 - x̄)·(|log(1 - x̄)| + |log(1 - q)|))``, and on either side
    of ``x̄`` ``S <= G + 3m·(x̄·|log x̄| + (1 - x̄)·|log(1 - x̄)|) + m``: so ``|F - G| <= κ·(G + X)``
    with ``X = 3m·(...) + 2m`` and ``κ = 2^-46`` (twenty times the analysis' constant, so that a
    logarithm off by a few units still fits). ``G`` is monotone on either side of
    ``x̄ / (x̄ + (1 - x̄))``, within ``2^-52`` of ``x̄``; a certified point lies more than ``2^-50``
    beyond ``x̄`` and (for ``m < 2^20``) every midpoint more than ``2^-49`` (half the last bracket,
    at least ``2^-29 / m``), so ``G`` is monotone between them. Hence if
    ``F(a) > level + 4κ·(level + X)``, then ``G(a) > level + 3κ·(level + X)`` and every midpoint
    beyond ``a`` has ``F > level``; if ``F(a) < level - 4κ·(level + X)``, every midpoint between
    ``x̄`` and ``a`` has ``F < level``. The points ``a`` are placed a few margins either side of
    the root of ``G = level`` found by Halley's method (from a point beyond it, in floats, not
    certified itself): a midpoint rarely falls between them, and then its step is evaluated.
    """
    # Sentinels no midpoint reaches: the side is then decided by evaluating each step.
    inside, outside = (-1.0, 2.0) if upper else (2.0, -1.0)
    if not (level > 0.0 and m < _LARGEST):
        return inside, outside
    tau = _MARGIN * (level + 3.0 * m * (mean * abs(log_p) + rest * abs(log_rest)) + 2.0 * m)
    # A start beyond the root: Pinsker's bound, or where the far term alone reaches the level.
    target = level / m
    pinsker = math.sqrt(0.5 * target)
    if upper:
        q = min(mean + pinsker, 1.0 - rest * math.exp((mean * log_p - target) / rest))
    else:
        q = max(mean - pinsker, mean * math.exp((rest * log_rest - target) / mean))
    # Halley's iterations on kl(x̄, q) = level / m (approximate: only the certificates are exact).
    log = math.log
    for _ in range(_HALLEY):
        if not 0.0 < q < 1.0:
            return inside, outside
        complement = 1.0 - q
        inner, outer = mean / q, rest / complement
        slope = outer - inner
        if not slope:
            return inside, outside
        step = (mean * (log_p - log(q)) + rest * (log_rest - log(complement)) - target) / slope
        damping = 1.0 - 0.5 * step * (outer / complement + inner / q) / slope
        if damping > 0.5:
            step /= damping
        q -= step
        settled = _SETTLED * q * (1.0 - q)
        if -settled <= step <= settled:
            break
    else:
        return inside, outside
    spread = 8.0 * tau / (m * abs(slope)) + step * step + _NEAR
    if upper:
        near, far = q - spread, q + spread
        if near - mean > _NEAR and _divergence(m, mean, log_p, rest, log_rest, near) < level - tau:
            inside = near
        if far < 1.0 and _divergence(m, mean, log_p, rest, log_rest, far) > level + tau:
            outside = far
    else:
        near, far = q + spread, q - spread
        if mean - near > _NEAR and _divergence(m, mean, log_p, rest, log_rest, near) < level - tau:
            inside = near
        if far > 0.0 and _divergence(m, mean, log_p, rest, log_rest, far) > level + tau:
            outside = far
    return inside, outside


class LabelEvidence:
    """Per-pair label counts ``m``, ``w⁺``, ``w⁻`` (plain integers, JSON, mergeable).

    Pairs ``(i, j)``, ``i < j`` (0-based), are indexed ``j(j-1)/2 + i``
    (:func:`~uss_stream.rules.selection_rule.pair_index`).

    >>> evidence = LabelEvidence(3)
    >>> evidence.record([0, 1, 1], label=1)          # pairs (1,2), (1,3) disagree; stage 1 wrong
    >>> evidence.labelled, evidence.deeper_right, evidence.shallower_right
    ([1, 1, 0], [1, 1, 0], [0, 0, 0])
    >>> evidence.record([0, 1], label=0, pairs=1)    # only pair (1,2) (bit 0) was asked about
    >>> evidence.labelled, evidence.shallower_right
    ([2, 1, 0], [1, 0, 0])

    """

    __slots__ = ("deeper_right", "labelled", "labels", "n_stages", "shallower_right")

    def __init__(self, n_stages: int) -> None:
        if isinstance(n_stages, bool) or not isinstance(n_stages, int) or n_stages < 1:
            raise ValueError(f"n_stages must be an integer >= 1, got {n_stages!r}")
        self.n_stages = n_stages
        n_pairs = n_stages * (n_stages - 1) // 2
        self.labels = 0
        self.labelled = [0] * n_pairs
        self.deeper_right = [0] * n_pairs
        self.shallower_right = [0] * n_pairs

    @property
    def n_pairs(self) -> int:
        return len(self.labelled)

    def record(self, outputs: Sequence[Any], label: Hashable, pairs: int | None = None) -> None:
        """Count one labelled round: the disagreeing pairs among ``outputs`` (all, or the bits of ``pairs``).

        A pair named in ``pairs`` must have been queried (``j < len(outputs)``) and disagree.
        """
        if label is None or (isinstance(label, float) and label != label):
            raise ValueError("label is missing (None/NaN)")
        depth = len(outputs)
        if pairs is not None:
            if isinstance(pairs, bool) or not isinstance(pairs, (int, np.integer)) or pairs < 0:
                raise ValueError(f"pairs must be a bit mask (an integer >= 0), got {pairs!r}")
            if int(pairs) >> (depth * (depth - 1) // 2):
                raise ValueError(f"pairs {pairs:#x} names a pair beyond the {depth} queried stage(s)")
        chosen = []
        for j in range(1, depth):
            for i in range(j):
                index = j * (j - 1) // 2 + i
                if pairs is None:
                    if outputs[i] != outputs[j]:
                        chosen.append((index, i, j))
                elif pairs >> index & 1:
                    if outputs[i] == outputs[j]:
                        raise ValueError(f"pair ({i + 1}, {j + 1}) of pairs {pairs:#x} does not disagree")
                    chosen.append((index, i, j))
        for index, i, j in chosen:
            right_i = outputs[i] == label
            right_j = outputs[j] == label
            self.labelled[index] += 1
            if right_j and not right_i:
                self.deeper_right[index] += 1
            elif right_i and not right_j:
                self.shallower_right[index] += 1
        self.labels += 1

    def merge(self, other: LabelEvidence) -> LabelEvidence:
        """The evidence of both streams (the counts add up)."""
        if not isinstance(other, LabelEvidence) or other.n_stages != self.n_stages:
            raise ValueError("can only merge LabelEvidence of the same number of stages")
        merged = LabelEvidence(self.n_stages)
        merged.labels = self.labels + other.labels
        for name in ("labelled", "deeper_right", "shallower_right"):
            setattr(merged, name, [a + b for a, b in zip(getattr(self, name), getattr(other, name))])
        return merged

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": EVIDENCE_FORMAT,
            "n_stages": self.n_stages,
            "labels": self.labels,
            "labelled": list(self.labelled),
            "deeper_right": list(self.deeper_right),
            "shallower_right": list(self.shallower_right),
        }

    @classmethod
    def from_dict(cls, document: Any) -> LabelEvidence:
        """Load and validate (``w⁺ + w⁻ <= m`` per pair, counts non-negative integers)."""
        if not isinstance(document, dict) or document.get("format") != EVIDENCE_FORMAT:
            raise ValueError(f"label evidence must be a {EVIDENCE_FORMAT!r} object")
        field = "label evidence field"
        n_stages = state_count(
            document.get("n_stages"), "n_stages", 1, None, expected="an integer >= 1", field=field
        )
        evidence = cls(n_stages)
        evidence.labels = state_count(
            document.get("labels"), "labels", high=None, expected="a non-negative integer", field=field
        )
        for name in ("labelled", "deeper_right", "shallower_right"):
            values = document.get(name)
            if (
                not isinstance(values, list)
                or len(values) != evidence.n_pairs
                or not all(is_count(value, high=None) for value in values)
            ):
                raise ValueError(
                    f"label evidence field {name!r} must be a list of {evidence.n_pairs} "
                    "non-negative integers"
                )
            setattr(evidence, name, list(values))
        for p, (m, plus, minus) in enumerate(
            zip(evidence.labelled, evidence.deeper_right, evidence.shallower_right)
        ):
            if plus + minus > m:
                raise ValueError(
                    f"label evidence of pair {p}: deeper_right + shallower_right exceeds labelled"
                )
        return evidence

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelEvidence):
            return NotImplemented
        return self.to_dict() == other.to_dict()


def delta_bounds(
    d: float, n: float, e_lower: float, e_upper: float, level: float, n_stages: int
) -> tuple[float, float]:
    """``(δ^L, δ^U)`` from the pair's disagreement counts ``d`` of ``n >= 1`` and its ``e`` bounds.

    ``p`` gets Hoeffding's radius ``sqrt(x / 2n)`` at ``x = pair_level(level, n, K)``:

    >>> [round(v, 4) for v in delta_bounds(20, 100, 0.5, 1.0, 2.0 + portable_log(300.0), 3)]
    [0.05, 0.3]

    """
    p_hat = d / n
    radius = math.sqrt(pair_level(level, n, n_stages) / (2.0 * n))
    p_upper = min(p_hat + radius, 1.0)
    p_lower = max(p_hat - radius, 0.0)
    upper = p_upper * e_upper if e_upper >= 0.0 else p_lower * e_upper
    lower = p_lower * e_lower if e_lower >= 0.0 else p_upper * e_lower
    return lower, upper


def p_bounds_many(
    d: np.ndarray, n: np.ndarray, level: np.ndarray, n_stages: int, log_kn: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(p^L, p^U)``: Hoeffding's ``p̂ ± sqrt(x / 2n)`` of :func:`delta_bounds`, vectorised (``n``
    must be ``>= 1`` where the result is read); ``log_kn``, if given, is ``portable_log_many(K·n)``
    (``n = 0`` read as 1), already computed."""
    safe = np.where(n > 0.0, n, 1.0)
    p_hat = d / safe
    x = pair_level_many(level, safe, n_stages) if log_kn is None else np.maximum(level - log_kn, 1.0)
    radius = np.sqrt(x / (2.0 * safe))
    return np.maximum(p_hat - radius, 0.0), np.minimum(p_hat + radius, 1.0)


def delta_bounds_many(
    d: np.ndarray,
    n: np.ndarray,
    e_lower: np.ndarray,
    e_upper: np.ndarray,
    level: np.ndarray,
    n_stages: int,
    log_kn: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`delta_bounds` on the ``p`` bounds of :func:`p_bounds_many` (same arguments)."""
    p_lower, p_upper = p_bounds_many(d, n, level, n_stages, log_kn)
    return delta_from_p(p_lower, p_upper, e_lower, e_upper)


def delta_from_p(
    p_lower: np.ndarray, p_upper: np.ndarray, e_lower: np.ndarray | float, e_upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(δ^L, δ^U)`` from the ``p`` and ``e`` bounds: the operand of each product is chosen by the
    sign of the ``e`` bound, then multiplied (the products of :func:`delta_bounds`, to the bit)."""
    upper = np.where(e_upper >= 0.0, p_upper, p_lower) * e_upper
    lower = np.where(e_lower >= 0.0, p_lower, p_upper) * e_lower
    return lower, upper
