"""AuditedUSS: USS-KL-UCB that asks for a few late labels where they pay, and trusts them over the proxy."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from uss_stream.policies.confidence import kl_beats_many, portable_log_many
from uss_stream.policies.label_evidence import (
    LabelEvidence,
    delta_bounds_many,
    e_bounds,
    e_upper,
    label_level,
    label_level_many,
    pair_level,
)
from uss_stream.policies.selection_rule import select_depth_by, select_depth_many_by
from uss_stream.policies.uss_kl_ucb import USSKLUCB
from uss_stream.validation import check_outputs, check_positive

__all__ = ["AuditedUSS"]


class AuditedUSS(USSKLUCB):
    """Label-free selection (USS-KL-UCB) audited by a vanishing budget of late labels.

    **Deciding.** Stage ``i`` *beats* a deeper stage ``j`` when USS-KL-UCB says so (``C_j - C_i``
    above the KL upper bound of ``p_ij``) **or** when the labels say so: ``C_j - C_i > δ^U_ij``,
    the upper confidence bound of ``δ_ij = γ_i - γ_j`` from the pair's labelled disagreement rounds
    (:mod:`~uss_stream.policies.label_evidence`). The depth is the set test's
    ``min(B^l ∩ B^h ∪ {K})`` on that relation. Without labels this is exactly USS-KL-UCB. As
    ``δ_ij <= p_ij`` always, the label-free "beats" is sound with or without weak dominance; what WD
    protects is ``B^l``, where the disagreement rate overstates what a deeper stage gains. A label
    bound below the cost gap removes that overstatement for its pair: the label-free choice is then
    contradicted and the policy decides on the label-informed relation, until the bounds say
    otherwise.

    **Contradictions that count.** A pair ``(i, j)`` beaten by the labels and not label-free
    contradicts the label-free rule. It is *decisive* when it concerns the decision: the label-free
    depth queries ``j`` (it pays for the stage the labels show not worth it), or the labels change
    the depth. An overstated pair beyond the chosen depth is neither, and costs nothing.

    **Asking.** After a round's outputs are known (:meth:`update`, or :meth:`request_label` for an
    asynchronous report) the policy asks for the event's label when a queried pair ``(i, j)``
    disagrees on this event that is *open* or *audited*, and fewer labels were requested so far
    than ``label_budget·sqrt(t)``; beyond that and below ``contradicted_budget·sqrt(t)``, only when
    such a pair has its ``i`` *contested* (the shallower stage of a decisive pair: the extra labels
    go where a contradiction can change the decision). Stage ``i`` must be *plausible* (no cheaper
    stage beats it and no label bound shows a deeper stage to be worth its cost over it); *open*
    means neither "``i`` beats ``j``" nor "``j`` is worth its cost over ``i``"
    (``δ^L_ij > C_j - C_i``) is established; *audited* means the pair is decisive but a bound at
    the level ``L_t`` itself (no discount for the pair's share of the labels) does not confirm it
    yet. The request is the bit mask of those pairs; when the label arrives (:meth:`learn_label`,
    any number of rounds later) it counts for exactly those pairs, whose labelled rounds are then an
    unbiased sample of their disagreement rounds. A round whose stages all agree is never labelled.

    **Auditing.** A decisive pair ``(i, j)`` takes the policy to a depth below ``j``, where ``j``
    is no longer queried: a wrong label bound would then stand until ``t`` doubles. So while an
    audited pair of a plausible ``i`` exists and the budget allows a request, the policy plays
    depth ``j`` (the deepest such), which keeps labelling the pair until the strict bound confirms
    it or the labels undo it. Decisions and requests are functions of the counts, the labels
    requested and ``t``, so the streaming loop and the replay engine request the same labels.

    By construction at most ``contradicted_budget·sqrt(t)`` labels are requested in ``t`` rounds
    (``label_budget·sqrt(t)`` while no contradiction is decisive); where every open pair gets settled
    requests stop after ``O(log T)`` labels per pair. See ``docs/audited.md`` for the argument
    and its limits.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    alpha
        Scale of USS-KL-UCB's exploration level.
    label_budget
        ``c > 0``: at most ``c·sqrt(t)`` labels requested in the first ``t`` rounds while no
        contradiction of the label-free rule is decisive.
    contradicted_budget
        The budget's ``c`` while one is (``>= label_budget``; ``None``: ``3·label_budget``); the
        labels beyond ``label_budget·sqrt(t)`` are asked about the contested stages' pairs only.

    Examples
    --------
    BSC case 5 (Table 1 of the paper): stage 2 is the best (``C + γ`` = 0.40, 0.21, 0.27), but
    stages 2 and 3 disagree on 12% of the events, more than the 0.11 that stage 3 costs on top, so
    the label-free USS-KL-UCB stays at depth 3. AuditedUSS, with labels 100 events late:

    >>> import numpy as np
    >>> from uss_stream.datasets.bsc import generate_bsc
    >>> from uss_stream.policies import USSKLUCB, AuditedUSS
    >>> outputs, labels = generate_bsc(20_000, seed=1)
    >>> costs = [0.0, 0.11, 0.11]
    >>> np.bincount(USSKLUCB(costs).run(outputs)[-5000:], minlength=4)[1:].tolist()
    [0, 0, 5000]
    >>> policy = AuditedUSS(costs)
    >>> depths = policy.run(outputs, labels=labels, label_delay=100)
    >>> np.bincount(depths[-5000:], minlength=4)[1:].tolist(), policy.labels_requested
    ([0, 5000, 0], 275)

    """

    def __init__(
        self,
        stage_costs: Sequence[float],
        alpha: float = 1.0,
        label_budget: float = 3.0,
        contradicted_budget: float | None = None,
    ) -> None:
        super().__init__(stage_costs, alpha=alpha)
        check_positive(label_budget, "label_budget")
        if contradicted_budget is not None:
            check_positive(contradicted_budget, "contradicted_budget")
            if contradicted_budget < label_budget:
                raise ValueError(
                    f"contradicted_budget must be >= label_budget ({label_budget}), got {contradicted_budget}"
                )
        self.label_budget = label_budget
        self.contradicted_budget = contradicted_budget
        self._raised = 3.0 * label_budget if contradicted_budget is None else float(contradicted_budget)
        self._evidence = LabelEvidence(self.n_stages)
        self._requested = 0
        self._last_request = 0
        self._label_bounds = _PairBounds(len(self._pairs), self.n_stages)
        self._relations_key: tuple[int, int, int] | None = None
        self._relations_cache: _Relations | None = None

    # -- capabilities and read-only views --------------------------------------------------------
    @property
    def asks_for_labels(self) -> bool:
        """This policy requests labels (:meth:`update` sets :attr:`label_request`)."""
        return True

    @property
    def vectorised(self) -> bool:
        """``False``: its decisions also depend on the label evidence, outside the kernel's counts."""
        return False

    @property
    def evidence(self) -> LabelEvidence:
        """The label counts per pair (a live reference: do not modify)."""
        return self._evidence

    @property
    def labels_requested(self) -> int:
        """Labels requested so far."""
        return self._requested

    @property
    def labels_received(self) -> int:
        """Labels learned from so far."""
        return self._evidence.labels

    @property
    def label_request(self) -> int:
        """The bit mask of pairs whose label the last :meth:`update` asked for (0: no request)."""
        return self._last_request

    # -- the decision ----------------------------------------------------------------------------
    def _relations(self, t: int) -> _Relations:
        """The relations of round ``t``'s decision (see :class:`_Relations`), reused by the request
        of the same round while the counts are unchanged."""
        stats = self._stats
        key = (t, stats.queried[0], self._evidence.labels)
        if self._relations_key == key:
            return self._relations_cache
        queried = stats.queried
        disagreements = stats.disagreements
        gap = self._gap
        labelled = self._evidence.labelled
        level = label_level(t)
        k = self.n_stages

        def bounds(pair: int, i: int, j: int, strict: bool) -> tuple[bool, bool] | None:
            if not labelled[pair]:
                return None
            if strict:
                upper = self._label_bounds.strict(self._evidence, pair, level)
                return self._label_relation(disagreements[i][j], queried[j], j, -1.0, upper, gap[pair], level)
            lower, upper = self._label_bounds.loose(self._evidence, pair, level)
            return self._label_relation(disagreements[i][j], queried[j], j, lower, upper, gap[pair], level)

        relations = _Relations(k, self._pairs, self._beats(t), bounds)
        self._relations_key, self._relations_cache = key, relations
        return relations

    def _label_relation(
        self, d: float, n: float, j: int, e_lower: float, e_upper: float, gap: float, level: float
    ) -> tuple[bool, bool]:
        """``(C_j - C_i > δ^U, δ^L > C_j - C_i)`` of :func:`delta_bounds`, to the bit.

        ``δ^U <= e^U`` and ``δ^U >= p̂·e^U`` (``e^U >= 0``), ``δ^U <= 0`` (``e^U < 0``), and
        ``δ^L <= p̂·e^L`` (``e^L >= 0``), ``δ^L <= 0`` (``e^L < 0``), with IEEE rounding monotone: the
        Hoeffding radius (a logarithm and a square root) is computed only when these leave a side open.
        """
        p_hat = d / n
        if e_upper >= 0.0:
            beaten = True if gap > e_upper else (False if p_hat * e_upper >= gap else None)
        else:
            beaten = True if gap > 0.0 else None
        worth = False if e_lower < 0.0 or p_hat * e_lower <= gap else None
        if beaten is None or worth is None:
            radius = math.sqrt(max(level - self._log_count(j, n), 1.0) / (2.0 * n))
            p_upper = min(p_hat + radius, 1.0)
            p_lower = max(p_hat - radius, 0.0)
            if beaten is None:
                beaten = gap > (p_upper * e_upper if e_upper >= 0.0 else p_lower * e_upper)
            if worth is None:
                worth = (p_lower * e_lower if e_lower >= 0.0 else p_upper * e_lower) > gap
        return beaten, worth

    def _allowed(self, t: int, relations: _Relations) -> bool:
        """Fewer labels requested than the budget (``contradicted_budget`` once contradicted)."""
        root = math.sqrt(t)
        if self._requested < self.label_budget * root:
            return True
        return self._requested < self._raised * root and relations.contradicted

    def _decide(self, t: int) -> int:
        relations = self._relations(t)
        depth = relations.informed_depth
        audited = [
            j
            for j in range(depth, self.n_stages)
            for i in range(j)
            if relations.audit(i, j) and relations.plausible(i)
        ]
        if audited and self._allowed(t, relations):
            return max(audited) + 1
        return depth

    def label_free_depth_many(
        self, rounds: np.ndarray, queried: np.ndarray, disagreements: np.ndarray
    ) -> np.ndarray:
        """:meth:`label_free_depth` for ``M`` states (USS-KL-UCB's vectorised rule)."""
        return USSKLUCB.decide_many(self, rounds, queried, disagreements)

    def label_free_depth(self) -> int:
        """The depth USS-KL-UCB would choose next on the same counts (what the audit checks)."""
        return USSKLUCB._decide(self, self._stats.decisions + 1)

    # -- asking for and learning from labels -----------------------------------------------------
    def request_label(self, t: int, outputs: Sequence[Any]) -> int:
        """Whether to ask for the label of round ``t``'s event with these outputs: the pair bit mask.

        Decided on the current counts (before the outputs are recorded); a non-zero mask counts as
        a requested label. :meth:`update` calls it; an asynchronous caller
        (:class:`~uss_stream.pending.PendingDecisions`) calls it before recording the report.
        """
        depth = len(outputs)
        if depth < 2:
            return 0
        first = outputs[0]
        if all(output == first for output in outputs[1:]):
            return 0
        relations = self._relations(t)
        if self._requested < self.label_budget * math.sqrt(t):
            scope = range(self.n_stages)
        elif self._allowed(t, relations):
            scope = {i for i, _ in relations.decisive}
        else:
            return 0
        mask = 0
        for j in range(1, depth):
            for i in range(j):
                if (
                    outputs[i] != outputs[j]
                    and i in scope
                    and relations.plausible(i)
                    and (relations.open(i, j) or relations.audit(i, j))
                ):
                    mask |= 1 << (j * (j - 1) // 2 + i)
        if mask:
            self._requested += 1
        return mask

    def withdraw_label_request(self) -> None:
        """Take back the last request counted by :meth:`request_label` (its report was rejected)."""
        if self._requested < 1:
            raise RuntimeError("no label request to withdraw")
        self._requested -= 1

    def update(self, outputs: Sequence[Any]) -> None:
        """Learn from the outputs of the last :meth:`select`; :attr:`label_request` says whether to
        send its label to :meth:`learn_label` (with these outputs and the mask)."""
        values = check_outputs(outputs, self._pending())
        self._last_request = self.request_label(self._stats.decisions, values)
        self._stats.record(values)
        self._pending_depth = None

    def learn_label(self, outputs: Sequence[Any], label: Hashable, pairs: int) -> None:
        """Learn from the label of an event whose request was ``pairs`` (its outputs as reported)."""
        if isinstance(pairs, bool) or not isinstance(pairs, (int, np.integer)) or pairs <= 0:
            raise ValueError(f"pairs must be the non-zero request mask of the labelled event, got {pairs!r}")
        self._evidence.record(list(outputs), label, int(pairs))

    def run(self, outputs: Any, labels: Any = None, label_delay: int = 0) -> np.ndarray:  # type: ignore[override]
        """The select/update loop over ``T x K`` outputs; a requested label arrives ``label_delay``
        rounds later (applied just before the decision of round ``t + label_delay + 1``)."""
        if labels is None:
            return super().run(outputs)
        if isinstance(label_delay, bool) or not isinstance(label_delay, (int, np.integer)) or label_delay < 0:
            raise ValueError(f"label_delay must be an integer >= 0, got {label_delay!r}")
        rows = outputs.tolist() if hasattr(outputs, "tolist") else [list(r) for r in outputs]
        truth = labels.tolist() if hasattr(labels, "tolist") else list(labels)
        if len(truth) != len(rows):
            raise ValueError(f"labels has {len(truth)} entries, outputs has {len(rows)} rows")
        depths = np.empty(len(rows), dtype=np.int64)
        waiting: dict[int, tuple[list[Any], int]] = {}
        for t, row in enumerate(rows):
            depth = self.select()
            self.update(row[:depth])
            depths[t] = depth
            if self._last_request:
                waiting[t + label_delay] = (row[:depth], self._last_request)
            arrived = waiting.pop(t, None)
            if arrived is not None:
                self.learn_label(arrived[0], truth[t - label_delay], arrived[1])
        return depths

    # -- the vectorised rule (replay) ------------------------------------------------------------
    def decide_many(
        self,
        rounds: np.ndarray,
        queried: np.ndarray,
        disagreements: np.ndarray,
        errors: np.ndarray | None = None,
        *,
        streams: np.ndarray | None = None,
        evidence: np.ndarray | None = None,
        requested: np.ndarray | None = None,
    ) -> np.ndarray:
        """As USS-KL-UCB's, with ``evidence`` the ``M x 3 x P`` label counts ``(m, w⁺, w⁻)`` per pair
        (``None``: no labels, which is USS-KL-UCB's rule) and ``requested`` the labels requested
        before each state's round (``None``: none)."""
        upper_i, upper_j = self._columns
        pair_counts = np.asarray(disagreements, dtype=np.float64)[:, upper_i, upper_j]
        rounds = np.asarray(rounds)
        if evidence is None:
            evidence = np.zeros((rounds.size, 3, len(self._pairs)))
        if requested is None:
            requested = np.zeros(rounds.size, dtype=np.int64)
        evidence = np.asarray(evidence)
        lower = np.full(pair_counts.shape, -1.0)
        upper = np.full(pair_counts.shape, 1.0)
        strict = np.full(pair_counts.shape, 1.0)
        for state, pair in zip(*np.nonzero(evidence[:, 0])):
            m, plus, minus = (int(v) for v in evidence[state, :, pair])
            level = label_level(int(rounds[state]))
            lower[state, pair], upper[state, pair] = e_bounds(
                m, plus, minus, pair_level(level, m, self.n_stages)
            )
            strict[state, pair] = e_upper(m, plus, minus, level)
        relations = self.relations_many(
            rounds, queried, pair_counts, evidence[:, 0] > 0, lower, upper, strict
        )
        return self.depth_many(rounds, relations, np.asarray(requested))

    def relations_many(
        self,
        rounds: np.ndarray,
        queried: np.ndarray,
        pair_counts: np.ndarray,
        has_labels: np.ndarray,
        e_lower: np.ndarray,
        e_upper: np.ndarray,
        e_strict: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``beats``, ``worth``, ``audit`` and ``decisive`` (``M x P`` booleans) for ``M`` states,
        the pairs' ``e`` bounds given (``e_strict``: ``e^U`` at the level ``L_t``)."""
        _, upper_j = self._columns
        n = np.asarray(queried, dtype=np.float64)
        log_horizon = portable_log_many(self._horizon.many(np.asarray(rounds)))
        log_count = portable_log_many(self.n_stages * np.where(n > 0.0, n, 1.0))
        levels = self.alpha * np.maximum(log_horizon[:, None] - log_count, 0.0)
        gap, log_gap, log_rest = self._gap_arrays
        n_pairs = n[:, upper_j]
        kl = kl_beats_many(pair_counts, n_pairs, gap, log_gap, log_rest, levels[:, upper_j])
        level = label_level_many(np.asarray(rounds))[:, None]
        log_kn = log_count[:, upper_j]
        lower, upper = delta_bounds_many(pair_counts, n_pairs, e_lower, e_upper, level, self.n_stages, log_kn)
        by_labels = has_labels & (gap > upper) & ~kl
        beats = kl | by_labels
        decisive = np.zeros_like(by_labels)
        some = np.flatnonzero(by_labels.any(axis=1))
        if some.size:
            label_free = select_depth_many_by(kl[some], self.n_stages)
            changed = label_free != select_depth_many_by(beats[some], self.n_stages)
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
                self.n_stages,
                log_kn[state, pair],
            )[1]
            audit[state, pair] = ~(gap[pair] > strict)
        return beats, has_labels & (lower > gap), audit, decisive

    def plausible_many(self, beats: np.ndarray, worth: np.ndarray) -> np.ndarray:
        """``M x K`` booleans: stage ``i`` is plausible (see :class:`_Relations`)."""
        plausible = np.ones((beats.shape[0], self.n_stages), dtype=bool)
        for p, (i, j) in enumerate(self._pairs):
            plausible[:, j] &= ~beats[:, p]
            plausible[:, i] &= ~worth[:, p]
        return plausible

    def budget_many(self, rounds: np.ndarray, contradicted: np.ndarray) -> np.ndarray:
        """The label budget of each state's round (:meth:`request_label`'s, to the bit)."""
        scale = np.where(contradicted, self._raised, self.label_budget)
        return scale * np.sqrt(np.asarray(rounds, dtype=np.float64))

    def budget_thresholds_many(self, rounds: np.ndarray, relations: tuple) -> np.ndarray:
        """``M x 2``: the numbers of requested labels that :meth:`depth_many` and :meth:`request_many`
        compare the count with (``label_budget·sqrt(t)`` and the state's budget), to the bit."""
        root = np.sqrt(np.asarray(rounds, dtype=np.float64))
        return np.stack(
            [self.label_budget * root, self.budget_many(rounds, relations[3].any(axis=1))], axis=1
        )

    def depth_many(self, rounds: np.ndarray, relations: tuple, requested: np.ndarray) -> np.ndarray:
        """The depths of :meth:`select` for ``M`` states, from :meth:`relations_many`'s output."""
        beats, worth, audit, decisive = relations
        upper_i, upper_j = self._columns
        depth = select_depth_many_by(beats, self.n_stages)
        audited = audit & self.plausible_many(beats, worth)[:, upper_i]
        deepest = np.where(audited, upper_j + 1, 0).max(axis=1, initial=0)
        allowed = requested < self.budget_many(rounds, decisive.any(axis=1))
        return np.where(allowed, np.maximum(depth, deepest), depth)

    def request_many(
        self,
        rounds: np.ndarray,
        depths: np.ndarray,
        disagreeing: np.ndarray,
        relations: tuple,
        requested: np.ndarray,
    ) -> np.ndarray:
        """The ``M x P`` request masks of :meth:`request_label` for ``M`` states at once.

        ``disagreeing`` marks the pairs that disagree on each state's event; ``relations`` comes
        from :meth:`relations_many` on the counts before the event; ``requested`` holds the labels
        requested before each state's round.
        """
        beats, worth, audit, decisive = relations
        upper_i, upper_j = self._columns
        depths = np.asarray(depths)
        root = np.sqrt(np.asarray(rounds, dtype=np.float64))
        base = requested < self.label_budget * root
        raised = requested < self.budget_many(rounds, decisive.any(axis=1))
        contested = np.zeros((decisive.shape[0], self.n_stages), dtype=bool)
        for p, (i, _) in enumerate(self._pairs):
            contested[:, i] |= decisive[:, p]
        scope = base[:, None] | (raised[:, None] & contested[:, upper_i])
        plausible = self.plausible_many(beats, worth)
        queried = upper_j[None, :] < depths[:, None]
        open_pairs = (~beats & ~worth) | audit
        asked = (depths >= 2)[:, None] & scope & plausible[:, upper_i] & open_pairs
        return disagreeing & queried & asked

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        document = super().state_dict()
        document["evidence"] = self._evidence.to_dict()
        document["labels_requested"] = self._requested
        return document

    def load_state_dict(self, document: dict[str, Any]) -> None:
        if not isinstance(document, dict):
            raise ValueError(f"state document must be a JSON object, got {type(document).__name__}")
        evidence = LabelEvidence.from_dict(document.get("evidence"))
        if evidence.n_stages != self.n_stages:
            raise ValueError(
                f"state field 'evidence' has {evidence.n_stages} stages, the policy has {self.n_stages}"
            )
        requested = document.get("labels_requested")
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < evidence.labels:
            raise ValueError(
                "state field 'labels_requested' must be an integer >= the labels received "
                f"({evidence.labels}), "
                f"got {requested!r}"
            )
        super().load_state_dict(document)
        self._evidence = evidence
        self._requested = requested
        self._last_request = 0
        self._relations_key = None

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.5], "alpha": 1.5, "label_budget": 1.0, "contradicted_budget": 1.5}


class _PairBounds:
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


class _Relations:
    """What one decision of :class:`AuditedUSS` rests on, each relation computed once, on demand.

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
