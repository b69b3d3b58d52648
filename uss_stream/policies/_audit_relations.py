"""What a decision of :class:`~uss_stream.policies.AuditedUSS` rests on: the relations of pairs of stages.

For stages ``i < j``: ``i`` *beats* ``j`` label-free (USS-KL-UCB's test) or by the labels
(``C_j - C_i > δ^U_ij``), the deeper ``j`` is *worth* its cost over ``i`` (``δ^L_ij > C_j - C_i``),
and from these the contradictions, audits and plausible stages of :class:`Relations`, each computed
once per decision, on demand. :func:`label_relation` compares the cost gap with the ``δ`` bounds
of :func:`~uss_stream.policies.label_evidence.delta_bounds` to the bit; :class:`PairBounds` caches
each pair's ``e`` bounds between label arrivals and level changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from uss_stream.policies.label_evidence import LabelEvidence, delta_bounds_many, e_bounds, e_upper, pair_level
from uss_stream.policies.selection_rule import select_depth_by, select_depth_many_by

__all__ = ["PairBounds", "Relations", "label_relation", "label_relations_many", "plausible_many"]


def label_relation(
    d: float, n: float, e_lower: float, e_upper: float, gap: float, level: float, log_kn: Callable[[], float]
) -> tuple[bool, bool]:
    """``(C_j - C_i > δ^U, δ^L > C_j - C_i)`` of :func:`~.label_evidence.delta_bounds`, to the bit.

    ``d`` of ``n >= 1`` disagreements, the pair's ``e`` bounds, ``gap = C_j - C_i``, the level
    ``L_t`` and ``log_kn()`` giving ``log(K·n)``. ``δ^U <= e^U`` and ``δ^U >= p̂·e^U``
    (``e^U >= 0``), ``δ^U <= 0`` (``e^U < 0``), and ``δ^L <= p̂·e^L`` (``e^L >= 0``), ``δ^L <= 0``
    (``e^L < 0``), with IEEE rounding monotone: the Hoeffding radius (a logarithm and a square
    root) is computed only when these leave a side open.

    >>> from uss_stream.policies.confidence import portable_log
    >>> from uss_stream.policies.label_evidence import delta_bounds
    >>> lower, upper = delta_bounds(20, 100, 0.5, 1.0, 6.0, 3)
    >>> label_relation(20, 100, 0.5, 1.0, 0.2, 6.0, lambda: portable_log(300.0)) == (0.2 > upper, lower > 0.2)
    True

    """
    p_hat = d / n
    if e_upper >= 0.0:
        beaten = True if gap > e_upper else (False if p_hat * e_upper >= gap else None)
    else:
        beaten = True if gap > 0.0 else None
    worth = False if e_lower < 0.0 or p_hat * e_lower <= gap else None
    if beaten is None or worth is None:
        radius = math.sqrt(max(level - log_kn(), 1.0) / (2.0 * n))
        p_upper = min(p_hat + radius, 1.0)
        p_lower = max(p_hat - radius, 0.0)
        if beaten is None:
            beaten = gap > (p_upper * e_upper if e_upper >= 0.0 else p_lower * e_upper)
        if worth is None:
            worth = (p_lower * e_lower if e_lower >= 0.0 else p_upper * e_lower) > gap
    return beaten, worth


def label_relations_many(
    kl: np.ndarray,
    pair_counts: np.ndarray,
    n_pairs: np.ndarray,
    log_kn: np.ndarray,
    level: np.ndarray,
    labels: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    gap: np.ndarray,
    upper_j: np.ndarray,
    n_stages: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``beats``, ``worth``, ``audit`` and ``decisive`` (``M x P`` booleans) of :class:`Relations`
    for ``M`` states, to the bit.

    ``kl``: the label-free test; ``pair_counts``, ``n_pairs``: ``D_ij`` and ``n_j`` per pair;
    ``log_kn``: ``log(K·n_j)`` per pair; ``level``: ``L_t`` per state; ``labels``: ``has_labels``
    and the ``e`` bounds ``e^L``, ``e^U`` and ``e^U`` at ``L_t`` itself, all ``M x P``; ``gap``:
    ``C_j - C_i`` and ``upper_j``: ``j`` per pair.
    """
    has_labels, e_lower, e_upper, e_strict = labels
    level = level[:, None]
    lower, upper = delta_bounds_many(pair_counts, n_pairs, e_lower, e_upper, level, n_stages, log_kn)
    by_labels = has_labels & (gap > upper) & ~kl
    beats = kl | by_labels
    decisive = np.zeros_like(by_labels)
    some = np.flatnonzero(by_labels.any(axis=1))
    if some.size:
        label_free = select_depth_many_by(kl[some], n_stages)
        changed = label_free != select_depth_many_by(beats[some], n_stages)
        paid = upper_j[None, :] < label_free[:, None]
        decisive[some] = by_labels[some] & (paid | changed[:, None])
    audit = np.zeros_like(by_labels)
    state, pair = np.nonzero(decisive)
    if state.size:
        strict = delta_bounds_many(
            pair_counts[state, pair],
            n_pairs[state, pair],
            -1.0,
            e_strict[state, pair],
            level[state, 0],
            n_stages,
            log_kn[state, pair],
        )[1]
        audit[state, pair] = ~(gap[pair] > strict)
    return beats, has_labels & (lower > gap), audit, decisive


def plausible_many(
    beats: np.ndarray, worth: np.ndarray, pairs: Sequence[tuple[int, int]], n_stages: int
) -> np.ndarray:
    """``M x K`` booleans: stage ``i`` is plausible (:meth:`Relations.plausible`) in each of ``M`` states.

    >>> beats = np.array([[False, False, True]])   # pairs (0, 1), (0, 2), (1, 2): stage 2 beats 3
    >>> plausible_many(beats, np.zeros_like(beats), [(0, 1), (0, 2), (1, 2)], 3).tolist()
    [[True, True, False]]
    """
    plausible = np.ones((beats.shape[0], n_stages), dtype=bool)
    for p, (i, j) in enumerate(pairs):
        plausible[:, j] &= ~beats[:, p]
        plausible[:, i] &= ~worth[:, p]
    return plausible


class PairBounds:
    """Each pair's label bounds on ``e_j - e_i``, recomputed only when its label counts or the level change.

    ``loose``: ``(e^L, e^U)`` at the pair's share of the level; ``strict``: ``e^U`` at the level
    ``L_t`` itself (no discount for the pair's share).
    """

    __slots__ = ("_loose", "_n_stages", "_strict")

    def __init__(self, n_pairs: int, n_stages: int) -> None:
        self._n_stages = n_stages
        # Per pair: (m, w+, w-, level) the cached bounds were computed for, and the bounds.
        self._loose: list[tuple[int, int, int, float, float, float]] = [(-1, 0, 0, 0.0, -1.0, 1.0)] * n_pairs
        self._strict: list[tuple[int, int, int, float, float]] = [(-1, 0, 0, 0.0, 1.0)] * n_pairs

    def loose(self, evidence: LabelEvidence, pair: int, level: float) -> tuple[float, float]:
        m = evidence.labelled[pair]
        plus = evidence.deeper_right[pair]
        minus = evidence.shallower_right[pair]
        cached = self._loose[pair]
        if cached[0] != m or cached[1] != plus or cached[2] != minus or cached[3] != level:
            lower, upper = e_bounds(m, plus, minus, pair_level(level, m, self._n_stages))
            cached = self._loose[pair] = (m, plus, minus, level, lower, upper)
        return cached[4], cached[5]

    def strict(self, evidence: LabelEvidence, pair: int, level: float) -> float:
        m = evidence.labelled[pair]
        plus = evidence.deeper_right[pair]
        minus = evidence.shallower_right[pair]
        cached = self._strict[pair]
        if cached[0] != m or cached[1] != plus or cached[2] != minus or cached[3] != level:
            upper = e_upper(m, plus, minus, level)
            cached = self._strict[pair] = (m, plus, minus, level, upper)
        return cached[4]


class Relations:
    """What one decision of :class:`~uss_stream.policies.AuditedUSS` rests on, each relation computed once.

    ``beats(i, j)``: stage ``i`` beats the deeper ``j`` label-free (``kl``) or by the labels
    (``C_j - C_i > δ^U_ij``); ``worth(i, j)``: ``δ^L_ij > C_j - C_i``; ``open(i, j)``: neither;
    ``contradicted``: some pair is beaten by the labels and not label-free; ``audit(i, j)``: that
    pair is such a pair and not confirmed at the level ``L_t`` itself (``strict`` bounds);
    ``plausible(i)``: no cheaper stage beats ``i`` and no deeper stage is worth its cost over it.
    """

    __slots__ = (
        "_bounds",
        "_by_labels",
        "_decisive",
        "_informed_depth",
        "_kl",
        "_kl_known",
        "_label_free_depth",
        "_pairs",
        "_plausible",
        "_worth",
        "n_stages",
    )

    def __init__(
        self,
        n_stages: int,
        pairs: list[tuple[int, int]],
        kl: Callable[[int, int], bool],
        bounds: Callable[[int, int, int, bool], tuple[bool, bool] | None],
    ) -> None:
        self.n_stages = n_stages
        self._pairs = pairs
        self._kl = kl
        self._bounds = bounds
        self._kl_known: dict[int, bool] = {}
        self._by_labels: dict[int, bool] = {}
        self._worth: dict[int, bool] = {}
        self._plausible: dict[int, bool] = {}
        self._decisive: list[tuple[int, int]] | None = None
        self._label_free_depth: int | None = None
        self._informed_depth: int | None = None

    def kl(self, i: int, j: int) -> bool:
        """Stage ``i`` beats ``j`` label-free (USS-KL-UCB's test, asked once per pair)."""
        pair = j * (j - 1) // 2 + i
        known = self._kl_known.get(pair)
        if known is None:
            known = self._kl_known[pair] = self._kl(i, j)
        return known

    def by_labels(self, i: int, j: int) -> bool:
        pair = j * (j - 1) // 2 + i
        known = self._by_labels.get(pair)
        if known is None:
            found = self._bounds(pair, i, j, False)
            known = self._by_labels[pair] = found is not None and found[0]
            self._worth[pair] = found is not None and found[1]
        return known

    def beats(self, i: int, j: int) -> bool:
        return self.kl(i, j) or self.by_labels(i, j)

    def worth(self, i: int, j: int) -> bool:
        self.by_labels(i, j)
        return self._worth[j * (j - 1) // 2 + i]

    def open(self, i: int, j: int) -> bool:
        return not self.beats(i, j) and not self.worth(i, j)

    @property
    def informed_depth(self) -> int:
        """The set test's depth on ``beats`` (label-free or by the labels)."""
        if self._informed_depth is None:
            self._informed_depth = select_depth_by(self.n_stages, self.beats)
        return self._informed_depth

    def is_decisive(self, i: int, j: int) -> bool:
        """``(i, j)`` is beaten by the labels, not label-free (a contradiction), and the
        contradiction concerns the decision: the label-free depth queries ``j``, or the labels
        change the depth."""
        if not self.by_labels(i, j) or self.kl(i, j):
            return False
        if self._label_free_depth is None:
            self._label_free_depth = select_depth_by(self.n_stages, self.kl)
        return j < self._label_free_depth or self._label_free_depth != self.informed_depth

    @property
    def decisive(self) -> list[tuple[int, int]]:
        """The decisive pairs (:meth:`is_decisive`)."""
        if self._decisive is None:
            self._decisive = [(i, j) for i, j in self._pairs if self.is_decisive(i, j)]
        return self._decisive

    def audit(self, i: int, j: int) -> bool:
        """``(i, j)`` is decisive and not confirmed at the level ``L_t`` itself."""
        return self.is_decisive(i, j) and not self._bounds(j * (j - 1) // 2 + i, i, j, True)[0]

    @property
    def contradicted(self) -> bool:
        return bool(self.decisive)

    def plausible(self, i: int) -> bool:
        known = self._plausible.get(i)
        if known is None:
            known = self._plausible[i] = not any(self.beats(h, i) for h in range(i)) and not any(
                self.worth(i, j) for j in range(i + 1, self.n_stages)
            )
        return known
