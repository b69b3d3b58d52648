"""What a decision of :class:`~uss_stream.policies.AuditedUSS` rests on: the relations of pairs of stages.

For stages ``i < j``: ``i`` *beats* ``j`` label-free (USS-KL-UCB's test) or by the labels
(``C_j - C_i > δ^U_ij``), the deeper ``j`` is *worth* its cost over ``i`` (``δ^L_ij > C_j - C_i``),
and from these the contradictions, audits and plausible stages. The streaming form holds one
round's relations as pair bit masks (:class:`Relations`, set-test depths from :class:`PairMasks`);
the vectorised form (:func:`label_relations_many`) computes them for ``M`` states, to the bit.
:func:`label_relation` compares the cost gap with the ``δ`` bounds of
:func:`~uss_stream.labels.evidence.delta_bounds` to the bit; :class:`PairBounds` caches each
pair's ``e`` bounds and relation until its labels, the level or its disagreement counts change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from uss_stream.labels.evidence import (
    LabelEvidence,
    delta_from_p,
    e_bounds,
    e_upper,
    p_bounds_many,
    pair_level,
)
from uss_stream.rules.selection_rule import select_depth_by, select_depth_many_by

__all__ = [
    "PairBounds",
    "PairMasks",
    "Relations",
    "label_masks",
    "label_relation",
    "ManyRelations",
    "label_relations_many",
    "deepest_many",
    "plausible_many",
    "stage_columns",
]


def label_relation(
    d: float,
    n: float,
    j: int,
    e_lower: float,
    e_upper: float,
    gap: float,
    level: float,
    log_count: Callable[[int, float], float],
) -> tuple[bool, bool]:
    """``(C_j - C_i > δ^U, δ^L > C_j - C_i)`` of :func:`~.label_evidence.delta_bounds`, to the bit.

    ``d`` of ``n >= 1`` disagreements of the pair ``(i, j)``, its ``e`` bounds, ``gap = C_j - C_i``,
    the level ``L_t`` and ``log_count(j, n)`` giving ``log(K·n)``. ``δ^U <= e^U`` and
    ``δ^U >= p̂·e^U`` (``e^U >= 0``), ``δ^U <= 0`` (``e^U < 0``), and ``δ^L <= p̂·e^L``
    (``e^L >= 0``), ``δ^L <= 0`` (``e^L < 0``), with IEEE rounding monotone: the Hoeffding radius
    (a logarithm and a square root) is computed only when these leave a side open.

    >>> from uss_stream.rules.confidence import portable_log
    >>> from uss_stream.labels.evidence import delta_bounds
    >>> lower, upper = delta_bounds(20, 100, 0.5, 1.0, 6.0, 3)
    >>> log_count = lambda j, n: portable_log(3 * n)
    >>> label_relation(20, 100, 2, 0.5, 1.0, 0.2, 6.0, log_count) == (0.2 > upper, lower > 0.2)
    True

    """
    p_hat = d / n
    if e_upper >= 0.0:
        beaten = True if gap > e_upper else (False if p_hat * e_upper >= gap else None)
    else:
        beaten = True if gap > 0.0 else None
    worth = False if e_lower < 0.0 or p_hat * e_lower <= gap else None
    if beaten is None or worth is None:
        radius = math.sqrt(max(level - log_count(j, n), 1.0) / (2.0 * n))
        p_upper = min(p_hat + radius, 1.0)
        p_lower = max(p_hat - radius, 0.0)
        if beaten is None:
            beaten = gap > (p_upper * e_upper if e_upper >= 0.0 else p_lower * e_upper)
        if worth is None:
            worth = (p_lower * e_lower if e_lower >= 0.0 else p_upper * e_lower) > gap
    return beaten, worth


def label_masks(
    evidence: LabelEvidence,
    bounds: PairBounds,
    queried: Sequence[float],
    disagreements: Sequence[Sequence[float]],
    level: float,
    log_count: Callable[[int, float], float],
) -> tuple[int, int]:
    """The masks ``(by_labels, worth)`` of :class:`Relations` from the labelled pairs' bounds at ``L_t``."""
    if not evidence.labels:
        return 0, 0
    by_labels = worth = 0
    labelled = evidence.labelled
    relation = bounds.relation
    for p, (i, j) in enumerate(bounds.pairs):
        if labelled[p]:
            beaten, worth_it = relation(evidence, p, disagreements[i][j], queried[j], level, log_count)
            if beaten:
                by_labels |= 1 << p
            if worth_it:
                worth |= 1 << p
    return by_labels, worth


class ManyRelations(NamedTuple):
    """The relations of ``M`` states (:func:`label_relations_many`): ``M x P`` booleans ``beats``,
    ``worth``, ``audit`` and ``decisive`` as in :class:`Relations`, the set test's depth on
    ``beats`` (``informed``, ``M``), ``plausible`` (``M x K``) and ``contradicted`` (``M``: some
    pair is decisive)."""

    beats: np.ndarray
    worth: np.ndarray
    audit: np.ndarray
    decisive: np.ndarray
    informed: np.ndarray
    plausible: np.ndarray
    contradicted: np.ndarray


def label_relations_many(
    kl: np.ndarray,
    pair_counts: np.ndarray,
    n_pairs: np.ndarray,
    log_kn: np.ndarray,
    level: np.ndarray,
    labels: tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray]
    ],
    gap: np.ndarray,
    pairs: Sequence[tuple[int, int]],
    n_stages: int,
) -> ManyRelations:
    """The relations of :class:`Relations` for ``M`` states, to the bit.

    ``kl``: the label-free test; ``pair_counts``, ``n_pairs``: ``D_ij`` and ``n_j`` per pair;
    ``log_kn``: ``log(K·n_j)`` per pair; ``level``: ``L_t`` per state; ``labels``: ``has_labels``
    and the ``e`` bounds ``e^L``, ``e^U`` and ``e^U`` at ``L_t`` itself, all ``M x P`` (the last
    may be a function of the state and pair indices of the entries read, only those of decisive
    pairs); ``gap``: ``C_j - C_i`` per pair.
    """
    has_labels, e_lower, e_upper, e_strict = labels
    decisive = np.zeros_like(kl)
    if not has_labels.any():
        informed = select_depth_many_by(kl, n_stages)
        plausible = plausible_many(kl, decisive, pairs, n_stages)
        contradicted = np.zeros(kl.shape[0], dtype=bool)
        return ManyRelations(kl, decisive, decisive, decisive, informed, plausible, contradicted)
    upper_j = np.array([j for _, j in pairs])
    # The p bounds serve both the loose e bounds of every entry and the strict ones of the decisive.
    p_lower, p_upper = p_bounds_many(pair_counts, n_pairs, level[:, None], n_stages, log_kn)
    lower, upper = delta_from_p(p_lower, p_upper, e_lower, e_upper)
    by_labels = has_labels & (gap > upper) & ~kl
    beats = kl | by_labels
    worth = has_labels & (lower > gap)
    informed = select_depth_many_by(beats, n_stages)
    if by_labels.any():
        # A state without a pair beaten by the labels has none decisive, whatever these say.
        label_free = select_depth_many_by(kl, n_stages)
        paid = (upper_j[:, None] < label_free).T
        decisive = by_labels & paid
    n_states = kl.shape[0]
    # The decisive entries, pair-major (``pair·M + state``: the flat index of the pair-major
    # layout the replay's arrays have, where numpy's nonzero and gathers are 1-D), and from them
    # the states with a decisive pair (numpy's any along a short axis is slow).
    entry = np.flatnonzero(decisive.T)
    pair, state = np.divmod(entry, n_states)
    audit = np.zeros((len(pairs), n_states), dtype=bool)
    contradicted = np.zeros(n_states, dtype=bool)
    contradicted[state] = True
    if entry.size:
        strict = e_strict(state, pair) if callable(e_strict) else e_strict[state, pair]
        p_strict = np.where(strict >= 0.0, p_upper.T.take(entry), p_lower.T.take(entry))
        audit.reshape(-1)[entry] = ~(gap[pair] > p_strict * strict)
    audit = audit.T
    plausible = plausible_many(beats, worth, pairs, n_stages)
    return ManyRelations(beats, worth, audit, decisive, informed, plausible, contradicted)


def stage_columns(values: np.ndarray, stages: np.ndarray) -> np.ndarray:
    """``values[:, stages]`` of an ``M x K`` array (an ``M x P`` one for the pairs' stages), gathered
    stage-major: one contiguous copy per column where the replay's arrays have the state index
    innermost (numpy's fancy indexing of a column takes an element at a time), which the result keeps.

    >>> stage_columns(np.array([[1, 2, 3], [4, 5, 6]]), np.array([2, 0, 2])).tolist()
    [[3, 1, 3], [6, 4, 6]]
    """
    return values.T.take(stages, axis=0).T


def deepest_many(audited: np.ndarray, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """``M``: one more than the deeper stage ``j`` of each state's deepest marked pair (0: none).

    >>> marked = np.array([[True, False, True], [False, False, False]])   # pairs (0, 1), (0, 2), (1, 2)
    >>> deepest_many(marked, [(0, 1), (0, 2), (1, 2)]).tolist()
    [3, 0]
    """
    deepest = np.zeros(audited.shape[0], dtype=np.int64)
    # Pairs are ordered by their deeper stage: the last one written is the deepest (a column at a
    # time: numpy's reductions along a short axis are slow).
    for p, (_, j) in enumerate(pairs):
        deepest[audited[:, p]] = j + 1
    return deepest


def plausible_many(
    beats: np.ndarray, worth: np.ndarray, pairs: Sequence[tuple[int, int]], n_stages: int
) -> np.ndarray:
    """``M x K`` booleans: stage ``i`` is plausible (:meth:`Relations.plausible`) in each of ``M`` states.

    >>> beats = np.array([[False, False, True]])   # pairs (0, 1), (0, 2), (1, 2): stage 2 beats 3
    >>> plausible_many(beats, np.zeros_like(beats), [(0, 1), (0, 2), (1, 2)], 3).tolist()
    [[True, True, False]]
    """
    # Stage-major (K x M, transposed back): the columns of the pair relations are read whole.
    plausible = np.ones((n_stages, beats.shape[0]), dtype=bool)
    for p, (i, j) in enumerate(pairs):
        plausible[j] &= ~beats[:, p]
        plausible[i] &= ~worth[:, p]
    return plausible.T


#: A pair's cached bounds: ``(m, w+, w-, level)`` they were computed for, and ``(lower, upper)``.
_CachedBounds = tuple[int, int, int, float, tuple[float, float]]
#: A pair's cached relation: ``(d, n, level, labels)``, ``(beats, worth)`` and the evidence.
_CachedRelation = tuple[tuple, tuple[bool, bool], LabelEvidence]


class PairBounds:
    """Each pair's label bounds on ``e_j - e_i`` and relations, recomputed only when their inputs change.

    Loose bounds: ``(e^L, e^U)`` at the pair's share of the level; strict: ``e^U`` at the level
    ``L_t`` itself (no discount for the pair's share). :meth:`relation` and :meth:`confirmed` are
    :func:`label_relation` on them, cached on the evidence (its count of labels: each recorded
    label counts), the level and the pair's disagreement counts ``(d, n)``, which stay put while
    its deeper stage is not queried.

    >>> evidence = LabelEvidence(2)
    >>> for _ in range(40):
    ...     evidence.record([0, 1], label=1)   # stage 2 always right where they disagree
    >>> log_count = lambda j, n: math.log(2 * n)
    >>> # p̂ = 60/200 ± 0.05, e in [0.92, 1]: δ in [0.23, 0.35]
    >>> [PairBounds(2, [gap]).relation(evidence, 0, 60, 200, 6.0, log_count) for gap in (0.5, 0.3, 0.1)]
    [(True, False), (False, False), (False, True)]

    """

    __slots__ = ("_confirmed", "_gap", "_loose", "_n_stages", "_relations", "_strict", "pairs")

    def __init__(self, n_stages: int, gap: Sequence[float]) -> None:
        self._n_stages = n_stages
        self._gap = list(gap)
        self.pairs = [(i, j) for j in range(n_stages) for i in range(j)]
        n_pairs = len(self.pairs)
        # Per pair: (m, w+, w-, level) the cached bounds were computed for, and the bounds.
        self._loose: list[_CachedBounds] = [(-1, 0, 0, 0.0, (-1.0, 1.0))] * n_pairs
        self._strict: list[_CachedBounds] = list(self._loose)
        # Per pair: ((d, n, level, labels), the relation, the evidence) of the last call.
        self._relations: list[_CachedRelation | None] = [None] * n_pairs
        self._confirmed: list[_CachedRelation | None] = [None] * n_pairs

    def _bounds(self, evidence: LabelEvidence, pair: int, level: float, strict: bool) -> tuple[float, float]:
        """``pair``'s loose bounds ``(e^L, e^U)``, or its strict ones ``(-1, e^U)`` (no lower bound)."""
        m = evidence.labelled[pair]
        plus = evidence.deeper_right[pair]
        minus = evidence.shallower_right[pair]
        cache = self._strict if strict else self._loose
        cached = cache[pair]
        if cached[0] != m or cached[1] != plus or cached[2] != minus or cached[3] != level:
            if strict:
                bounds = (-1.0, e_upper(m, plus, minus, level))
            else:
                bounds = e_bounds(m, plus, minus, pair_level(level, m, self._n_stages))
            cached = cache[pair] = (m, plus, minus, level, bounds)
        return cached[4]

    def relation(
        self,
        evidence: LabelEvidence,
        pair: int,
        d: float,
        n: float,
        level: float,
        log_count: Callable[[int, float], float],
    ) -> tuple[bool, bool]:
        """:func:`label_relation` of ``pair`` (``d`` of ``n >= 1`` disagreements) on the loose bounds."""
        key = (d, n, level, evidence.labels)
        cached = self._relations[pair]  # the cache's test inline: most calls find their answer
        if cached is None or cached[0] != key or cached[2] is not evidence:
            cached = self._relate(evidence, pair, key, log_count, strict=False)
        return cached[1]

    def confirmed(
        self,
        evidence: LabelEvidence,
        pair: int,
        d: float,
        n: float,
        level: float,
        log_count: Callable[[int, float], float],
    ) -> bool:
        """``C_j - C_i > δ^U`` on the strict bound: the labels' "beats" holds at the level ``L_t`` itself."""
        key = (d, n, level, evidence.labels)
        cached = self._confirmed[pair]
        if cached is None or cached[0] != key or cached[2] is not evidence:
            cached = self._relate(evidence, pair, key, log_count, strict=True)
        return cached[1][0]

    def _relate(
        self,
        evidence: LabelEvidence,
        pair: int,
        key: tuple,
        log_count: Callable[[int, float], float],
        strict: bool,
    ) -> _CachedRelation:
        """:func:`label_relation` at ``key = (d, n, level, labels)`` on the loose or the strict bounds,
        cached for :meth:`relation` or :meth:`confirmed`."""
        d, n, level, _ = key
        lower, upper = self._bounds(evidence, pair, level, strict)
        found = label_relation(d, n, self.pairs[pair][1], lower, upper, self._gap[pair], level, log_count)
        cache = self._confirmed if strict else self._relations
        cached = cache[pair] = (key, found, evidence)
        return cached


class PairMasks:
    """Bit masks over the pairs of ``K`` stages (bit ``j(j-1)/2 + i`` is the pair ``(i, j)``, ``i < j``)
    and the set test's depth of a mask of ``beats`` (memoised: few masks recur).

    >>> masks = PairMasks(3)
    >>> masks.depth(0b100), masks.depth(0b011)   # stage 2 beats 3; stage 1 beats 2 and 3
    (2, 1)
    >>> bin(masks.below[2]), bin(masks.above[0]), bin(masks.shallower[2])   # (·, 3); (1, ·); j < 2
    ('0b110', '0b11', '0b1')

    """

    __slots__ = ("_depths", "above", "all", "below", "bits", "n_stages", "pairs", "shallower")

    _MEMO = 1 << 12

    def __init__(self, n_stages: int) -> None:
        self.n_stages = n_stages
        self.pairs = [(i, j) for j in range(n_stages) for i in range(j)]
        bits = [1 << p for p in range(len(self.pairs))]
        #: ``(bit, i, j)`` per pair.
        self.bits = [(bit, i, j) for bit, (i, j) in zip(bits, self.pairs)]
        #: ``below[j]``: the pairs ``(·, j)``; ``above[i]``: the pairs ``(i, ·)``; ``shallower[d]``:
        #: the pairs whose deeper stage is among the first ``d`` (queried at depth ``d``).
        self.below = [sum(b for b, (_, j) in zip(bits, self.pairs) if j == k) for k in range(n_stages)]
        self.above = [sum(b for b, (i, _) in zip(bits, self.pairs) if i == k) for k in range(n_stages)]
        self.shallower = [sum(b for b, (_, j) in zip(bits, self.pairs) if j < d) for d in range(n_stages + 1)]
        self.all = (1 << len(self.pairs)) - 1
        self._depths: dict[int, int] = {}

    def depth(self, beats: int) -> int:
        """:func:`~uss_stream.rules.selection_rule.select_depth_by` on the mask ``beats``."""
        depth = self._depths.get(beats)
        if depth is None:
            depth = select_depth_by(self.n_stages, lambda i, j: bool(beats >> (j * (j - 1) // 2 + i) & 1))
            if len(self._depths) < self._MEMO:
                self._depths[beats] = depth
        return depth


class Relations:
    """What one decision of :class:`~uss_stream.policies.AuditedUSS` rests on, as pair bit masks.

    ``kl``: stage ``i`` beats the deeper ``j`` label-free (USS-KL-UCB's test); ``by_labels``:
    it does by the labels (``C_j - C_i > δ^U_ij``); ``worth``: ``δ^L_ij > C_j - C_i``; ``beats``:
    ``kl | by_labels``; ``open``: neither beats nor worth; ``decisive``: beaten by the labels and
    not label-free, where the label-free depth queries ``j`` (pays for it);
    ``contradicted``: some pair is decisive; ``audit(i, j)``: a decisive pair not confirmed at the
    level ``L_t`` itself (``confirmed(pair)``, asked once per decisive pair, on demand);
    ``plausible(i)``: no cheaper stage beats ``i`` and no deeper stage is worth its cost over it.

    >>> relations = Relations(PairMasks(3), kl=0, by_labels=0b100, worth=0, confirmed=lambda p: False)
    >>> relations.label_free_depth, relations.informed_depth, bin(relations.decisive)
    (3, 2, '0b100')
    >>> relations.audit(1, 2), relations.plausible(2), relations.open(0, 2)
    (True, False, True)

    """

    __slots__ = (
        "_audit",
        "_confirmed",
        "_masks",
        "beats",
        "by_labels",
        "decisive",
        "informed_depth",
        "kl",
        "label_free_depth",
        "worth",
    )

    def __init__(
        self, masks: PairMasks, kl: int, by_labels: int, worth: int, confirmed: Callable[[int], bool]
    ) -> None:
        self._masks = masks
        self.kl = kl
        self.by_labels = by_labels
        self.worth = worth
        self.beats = beats = kl | by_labels
        self.label_free_depth = masks.depth(kl)
        contradictions = by_labels & ~kl
        if contradictions:
            self.informed_depth = masks.depth(beats)
            self.decisive = contradictions & masks.shallower[self.label_free_depth]
        else:
            self.informed_depth = self.label_free_depth
            self.decisive = 0
        self._confirmed = confirmed
        self._audit: int | None = None if self.decisive else 0

    @property
    def contradicted(self) -> bool:
        return self.decisive != 0

    @property
    def decisive_pairs(self) -> list[tuple[int, int]]:
        """The decisive pairs ``(i, j)``."""
        return [pair for p, pair in enumerate(self._masks.pairs) if self.decisive >> p & 1]

    @property
    def audited(self) -> int:
        """The mask of the decisive pairs not confirmed at the level ``L_t`` itself."""
        if self._audit is None:
            decisive = self.decisive
            self._audit = sum(
                1 << p for p in range(decisive.bit_length()) if decisive >> p & 1 and not self._confirmed(p)
            )
        return self._audit

    def audit(self, i: int, j: int) -> bool:
        return bool(self.audited >> (j * (j - 1) // 2 + i) & 1)

    def open(self, i: int, j: int) -> bool:
        return not (self.beats | self.worth) >> (j * (j - 1) // 2 + i) & 1

    def plausible(self, i: int) -> bool:
        masks = self._masks
        return not (self.beats & masks.below[i] or self.worth & masks.above[i])
