"""AuditedUSS: USS-KL-UCB that asks for a few late labels where they pay, and trusts them over the proxy."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from uss_stream.core.validation import check_outputs
from uss_stream.labels.budget import LabelBudget, contested_many
from uss_stream.labels.evidence import (
    LabelEvidence,
    e_bounds,
    e_upper,
    label_level,
    label_level_many,
    pair_level,
)
from uss_stream.labels.relations import (
    ManyRelations,
    PairBounds,
    PairMasks,
    Relations,
    deepest_many,
    label_masks,
    label_relations_many,
    plausible_many,
    stage_columns,
)
from uss_stream.policies.base import CountStates
from uss_stream.policies.uss_kl_ucb import USSKLUCB
from uss_stream.rules.confidence import kl_beats_many, portable_log_many

__all__ = ["AuditedUSS"]


class AuditedUSS(USSKLUCB):
    """USS-KL-UCB audited by a few late labels, asked for where they can change the decision.

    **Deciding.** Stage ``i`` *beats* a deeper stage ``j`` when USS-KL-UCB says so (``C_j - C_i``
    above the KL upper bound of ``p_ij``) **or** when the labels say so: ``C_j - C_i > δ^U_ij``,
    the upper confidence bound of ``δ_ij = γ_i - γ_j`` from the pair's labelled disagreement rounds
    (:mod:`~uss_stream.labels.evidence`). The depth is the set test's
    ``min(B^l ∩ B^h ∪ {K})`` on that relation; without labels this is exactly USS-KL-UCB.

    **Asking: the value of a label to the decision.** The depth is a function of the pairs'
    relations, so a label is worth asking for exactly when it can change one the decision rests on:
    after a round's outputs are known (:meth:`update`, or :meth:`request_label` for an asynchronous
    report) the policy asks when a queried pair ``(i, j)`` *disagrees* on this event (where the
    stages agree the label says nothing about ``δ_ij``), stage ``i`` is *plausible* (no cheaper
    stage beats it and no label bound shows a deeper stage worth its cost over it: only such a
    stage can become the choice) and the pair is *unsettled*: neither "``i`` beats ``j``" nor
    "``j`` is worth its cost over ``i``" (``δ^L_ij > C_j - C_i``) is established, or the labels
    contradict the label-free rule on a stage it pays for (*decisive*) and a bound at the level
    ``L_t`` itself does not confirm it yet (*audited*). The request is the bit mask of those pairs;
    the label, whenever it arrives (:meth:`learn_label`), counts for exactly them, whose labelled
    rounds are then an unbiased sample of their disagreement rounds.

    **The budget caps the rate, it does not choose.** At most ``label_allotment +
    label_budget·sqrt(t)`` labels are requested by round ``t``. Settling a pair with a non-zero
    margin takes ``O(log T)`` labels, and every round before the choice settles costs regret, so
    the allotment pays for them up front instead of rationing them over time; ``c·sqrt(t)`` bounds
    the near-ties that never settle to a vanishing share.

    **Auditing.** While an audited pair of a plausible stage exists and the budget allows, the
    policy plays its deeper stage ``j`` (the deepest such, never deeper than the label-free depth:
    an audit costs no more than USS-KL-UCB's choice), so that a spurious label bound is undone by
    the next labels instead of standing until ``t`` doubles. Decisions and requests are functions
    of the counts, the labels requested and ``t``, so the streaming loop and the replay engine
    request the same labels. See ``docs/audited.md`` for the argument and its limits.

    Parameters
    ----------
    stage_costs
        Per-stage costs ``c_1..c_K >= 0``.
    alpha
        Scale of USS-KL-UCB's exploration level.
    label_budget
        ``c > 0``: at most ``label_allotment + c·sqrt(t)`` labels requested in the first ``t``
        rounds.
    contradicted_budget
        A raised ``c' >= c`` while a contradiction is decisive, its labels beyond ``c·sqrt(t)``
        asked about the contested stages' pairs only (``None``: no raise, ``c' = c``).
    label_allotment
        ``a >= 0`` labels allowed up front, beyond ``c·sqrt(t)``.

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
    ([0, 4884, 116], 304)

    """

    def __init__(
        self,
        stage_costs: Sequence[float],
        alpha: float = 1.0,
        label_budget: float = 2.0,
        contradicted_budget: float | None = None,
        label_allotment: float = 300.0,
    ) -> None:
        super().__init__(stage_costs, alpha=alpha)
        self._budget = LabelBudget(label_budget, contradicted_budget, label_allotment)
        self.label_budget = label_budget
        self.contradicted_budget = contradicted_budget
        self.label_allotment = label_allotment
        self._evidence = LabelEvidence(self.n_stages)
        self._last_request = 0
        self._label_bounds = PairBounds(self.n_stages, self._gap)
        self._masks = PairMasks(self.n_stages)
        self._relations_key: tuple[int, int, int] | None = None
        self._relations_cache: Relations | None = None

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
        return self._budget.requested

    @property
    def labels_received(self) -> int:
        """Labels learned from so far."""
        return self._evidence.labels

    @property
    def label_request(self) -> int:
        """The bit mask of pairs whose label the last :meth:`update` asked for (0: no request)."""
        return self._last_request

    def __getstate__(self) -> dict[str, Any]:
        """The state to pickle, without the relations cache (it holds a closure; it is rebuilt on use)."""
        state = self.__dict__.copy()
        state["_relations_key"] = state["_relations_cache"] = None
        return state

    # -- the decision ----------------------------------------------------------------------------
    def _relations(self, t: int) -> Relations:
        """The relations of round ``t``'s decision (``_audit_relations.Relations``), reused by
        the request of the same round while the counts are unchanged."""
        stats = self._stats
        key = (t, stats.queried[0], self._evidence.labels)
        if self._relations_key == key:
            return self._relations_cache
        queried = stats.queried
        disagreements = stats.disagreements
        evidence = self._evidence
        pair_bounds = self._label_bounds
        log_count = self._log_count
        level = label_level(t)
        beats = self._beats(t)
        kl = 0
        for bit, i, j in self._masks.bits:
            if beats(i, j):
                kl |= bit
        by_labels, worth = label_masks(evidence, pair_bounds, queried, disagreements, level, log_count)

        def confirmed(pair: int) -> bool:
            i, j = self._pairs[pair]
            d, n = disagreements[i][j], queried[j]
            return pair_bounds.confirmed(evidence, pair, d, n, level, log_count)

        relations = Relations(self._masks, kl, by_labels, worth, confirmed)
        self._relations_key, self._relations_cache = key, relations
        return relations

    def _decide(self, t: int) -> int:
        relations = self._relations(t)
        depth = relations.informed_depth
        if relations.decisive and self._budget.allowed(t, relations):
            # The deepest audited pair of a plausible stage, below the depth: play its deeper stage.
            audited = relations.audited & ~self._masks.shallower[depth]
            for p in range(audited.bit_length() - 1, -1, -1):
                i, j = self._pairs[p]
                if audited >> p & 1 and relations.plausible(i):
                    return j + 1
        return depth

    def label_free_depth_many(
        self, rounds: np.ndarray, queried: np.ndarray, disagreements: np.ndarray
    ) -> np.ndarray:
        """:meth:`label_free_depth` for ``M`` states (USS-KL-UCB's vectorised rule)."""
        return USSKLUCB._decide_many(self, CountStates(rounds, queried, disagreements))

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
        if len(outputs) < 2:
            return 0
        first = outputs[0]
        if all(output == first for output in outputs[1:]):
            return 0
        return self._budget.request(t, outputs, self._relations(t))

    def withdraw_label_request(self) -> None:
        """Take back the last request counted by :meth:`request_label` (its report was rejected)."""
        self._budget.withdraw()

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
    def _decide_many(self, states: CountStates) -> np.ndarray:
        """As USS-KL-UCB's, with the states' label ``evidence`` (``None``: no labels, which is
        USS-KL-UCB's rule) and ``requested`` labels (``None``: none)."""
        rounds, queried, disagreements, _, _, evidence, requested = states
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
        e_strict: np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray],
        *,
        log_horizon: np.ndarray | None = None,
        log_count: np.ndarray | None = None,
    ) -> ManyRelations:
        """The relations of ``M`` states (``beats``, ``worth``, ``audit``, ``decisive``: ``M x P``
        booleans, and what the depth and the request read), the pairs' ``e`` bounds given
        (``e_strict``: ``e^U`` at the level ``L_t``, or a function giving it for arrays of state
        and pair indices, called for the decisive pairs only). ``log_horizon`` (``M``) and
        ``log_count`` (``M x K``), if given, are the portable logarithms of the exploration
        function of the rounds and of ``K·n_j`` (``n_j = 0`` read as 1), already computed (for
        instance by table look-up)."""
        _, upper_j = self._columns
        n = np.asarray(queried, dtype=np.float64)
        if log_horizon is None:
            log_horizon = portable_log_many(self._horizon.many(np.asarray(rounds)))
        if log_count is None:
            log_count = portable_log_many(self.n_stages * np.where(n > 0.0, n, 1.0))
        levels = self.alpha * np.maximum(log_horizon[:, None] - log_count, 0.0)
        gap, log_gap, log_rest = self._gap_arrays
        n_pairs, d = stage_columns(n, upper_j), np.asarray(pair_counts, dtype=np.float64)  # cast once
        kl = kl_beats_many(d, n_pairs, gap, log_gap, log_rest, stage_columns(levels, upper_j))
        level = label_level_many(np.asarray(rounds))
        labels, log_kn = (has_labels, e_lower, e_upper, e_strict), stage_columns(log_count, upper_j)
        return label_relations_many(kl, d, n_pairs, log_kn, level, labels, gap, self._pairs, self.n_stages)

    def plausible_many(self, beats: np.ndarray, worth: np.ndarray) -> np.ndarray:
        """``M x K`` booleans: stage ``i`` is plausible (see ``_audit_relations.Relations``)."""
        return plausible_many(beats, worth, self._pairs, self.n_stages)

    def budget_many(self, rounds: np.ndarray, contradicted: np.ndarray) -> np.ndarray:
        """The label budget of each state's round (:meth:`request_label`'s, to the bit)."""
        return self._budget.many(rounds, contradicted)

    def budget_thresholds_many(self, rounds: np.ndarray, relations: ManyRelations) -> np.ndarray:
        """``M x 2``: the numbers of requested labels that :meth:`depth_many` and :meth:`request_many`
        compare the count with (``label_budget·sqrt(t)`` and the state's budget), to the bit."""
        return self._budget.thresholds_many(rounds, relations.contradicted)

    def depth_many(self, rounds: np.ndarray, relations: ManyRelations, requested: np.ndarray) -> np.ndarray:
        """The depths of :meth:`select` for ``M`` states, from :meth:`relations_many`'s output."""
        depth = relations.informed
        if not relations.audit.any():
            return depth.copy()
        audited = relations.audit & stage_columns(relations.plausible, self._columns[0])
        deepest = deepest_many(audited, self._pairs)
        allowed = requested < self._budget.many(rounds, relations.contradicted)
        return np.where(allowed, np.maximum(depth, deepest), depth)

    def request_many(
        self,
        rounds: np.ndarray,
        depths: np.ndarray,
        disagreeing: np.ndarray,
        relations: ManyRelations,
        requested: np.ndarray,
    ) -> np.ndarray:
        """The ``M x P`` request masks of :meth:`request_label` for ``M`` states at once.

        ``disagreeing`` marks the pairs that disagree on each state's event; ``relations`` comes
        from :meth:`relations_many` on the counts before the event; ``requested`` holds the labels
        requested before each state's round.
        """
        upper_i, upper_j = self._columns
        contested = contested_many(relations.decisive, self._pairs, self.n_stages)
        scope = self._budget.scope_many(rounds, requested, relations.contradicted, contested)
        # A queried pair has j >= 1, so its state's depth is >= 2.
        queried = (upper_j[:, None] < np.asarray(depths)).T
        open_pairs = (~relations.beats & ~relations.worth) | relations.audit
        asked = stage_columns(scope & relations.plausible, upper_i) & open_pairs
        return disagreeing & queried & asked

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        document = super().state_dict()
        document["evidence"] = self._evidence.to_dict()
        document["labels_requested"] = self._budget.requested
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
        self._budget.requested = requested
        self._last_request = 0
        self._label_bounds = PairBounds(self.n_stages, self._gap)
        self._relations_key = None

    @classmethod
    def _unit_test_params(cls):
        yield {"stage_costs": [0.0, 0.1, 0.3]}
        yield {"stage_costs": [0.0, 0.5], "alpha": 1.5, "label_budget": 1.0, "contradicted_budget": 1.5}
