"""Decide now, learn when the sensors report: decisions whose outputs arrive later, in any order.

In a physical cascade the selector does not hold the sensors: it decides a depth, other systems
run sensors ``1..d`` and report their outputs later, out of order, sometimes never.
:class:`PendingDecisions` wraps a policy for that flow. The round counter ``t`` counts decisions;
the statistics stay exactly the counts of the reports applied. A report for an unknown, already
reported or expired decision, or with more outputs than the decided depth, is rejected with a
:class:`RejectedReport` (a ``ValueError``) and counted, never applied. Pending decisions expire
after ``max_age_decisions`` later decisions and/or ``max_age_seconds`` (a report arriving later is
rejected as expired), and are counted as expired.

Decision identifiers are strings or integers: they are saved in the JSON state, which also keeps
the last ``remember_reported`` reported or expired identifiers, so that after a restore an
identifier can still not be decided twice. Other identifiers (tuples, floats, ``None``) are
refused by :meth:`PendingDecisions.decide`; join the parts of a composite key into a string.

**Late labels.** With a label-asking policy (``policy.asks_for_labels``, e.g.
:class:`~uss_stream.policies.AuditedUSS`) a report may ask for the event's label
(:meth:`PendingDecisions.label_requested`); the label is given later, by id, to
:meth:`PendingDecisions.report_label`, which applies it, counts it, and rejects (with a
:class:`RejectedReport`, counted in :attr:`PendingDecisions.label_counters`) a label for an unknown
id, for a decision that did not ask, a second label, or one that expired (after
``max_label_age_decisions`` later decisions).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from uss_stream.core.schema import is_count, show, state_object
from uss_stream.core.validation import check_outputs, plain_number
from uss_stream.pending_books import ClosedIds, LateLabels, RejectedReport, is_id
from uss_stream.policies.base import Policy
from uss_stream.policies.learning_state import learning_state

__all__ = ["PendingDecisions", "RejectedReport", "STATE_FORMAT"]

STATE_FORMAT = "uss-stream/pending-decisions/v1"


class PendingDecisions:
    """Asynchronous decide/report around any policy.

    Parameters
    ----------
    policy
        The policy whose decision rule and statistics are used (its ``select``/``update`` must not
        be used at the same time).
    max_age_decisions
        A decision still unreported after this many later decisions expires (``None``: never).
    max_age_seconds
        A decision still unreported after this many seconds expires (``None``: never).
    remember_reported
        How many reported or expired identifiers are remembered (``>= 0``) to refuse a second
        decision with the same identifier and to tell duplicate reports from unknown ones (older
        ones are reported as ``unknown``). They are part of the state: about ``10_000 · (length
        of an identifier + 3)`` bytes of JSON at the default.
    clock
        Seconds, monotonic; injectable for tests.
    max_label_age_decisions
        A requested label still missing once this many decisions followed its own decision
        expires (``None``: never), whatever the order in which the reports came.

    Examples
    --------
    >>> from uss_stream.policies import USSUCB
    >>> book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.2, 0.8]))
    >>> book.decide("e1"), book.decide("e2")      # round 1 and 2: nothing reported yet
    (3, 3)
    >>> book.report("e2", [1, 1, 1])                # reports arrive in any order
    >>> book.report("e1", [1, 1])                   # fewer outputs than decided is allowed
    >>> book.policy.stats.queried
    [2, 2, 1]
    >>> book.report("e1", [1])
    Traceback (most recent call last):
    ...
    uss_stream.pending.RejectedReport: decision 'e1' was already reported
    >>> book.counters["rejected_duplicate"]
    1

    """

    def __init__(
        self,
        policy: Policy,
        *,
        max_age_decisions: int | None = None,
        max_age_seconds: float | None = None,
        remember_reported: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        max_label_age_decisions: int | None = None,
    ) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a uss_stream Policy, got {type(policy).__name__}")
        max_age_decisions, max_age_seconds = plain_number(max_age_decisions), plain_number(max_age_seconds)
        remember_reported = plain_number(remember_reported)
        if max_age_decisions is not None and not (is_count(max_age_decisions) and max_age_decisions >= 1):
            raise ValueError(f"max_age_decisions must be an integer >= 1 or None, got {max_age_decisions!r}")
        if max_age_seconds is not None and (
            isinstance(max_age_seconds, bool)
            or not isinstance(max_age_seconds, (int, float))
            or not max_age_seconds > 0
        ):
            raise ValueError(f"max_age_seconds must be a number > 0 or None, got {max_age_seconds!r}")
        if not is_count(remember_reported):
            raise ValueError(f"remember_reported must be an integer >= 0, got {remember_reported!r}")
        self.policy = policy
        self.max_age_decisions = max_age_decisions
        self.max_age_seconds = max_age_seconds
        self.remember_reported = remember_reported
        self._clock = clock
        # decision id -> (depth, round t, time decided); insertion order is decision order.
        self._pending: OrderedDict[Hashable, tuple[int, int, float]] = OrderedDict()
        self._closed = ClosedIds(remember_reported)
        if max_label_age_decisions is not None and not max_label_age_decisions > 0:
            raise ValueError(f"max_label_age_decisions must be > 0 or None, got {max_label_age_decisions!r}")
        self.max_label_age_decisions = max_label_age_decisions
        self._labels = LateLabels(policy, max_label_age_decisions, remember_reported)
        self.counters = {
            "decided": 0,
            "applied": 0,
            "expired": 0,
            "rejected_unknown": 0,
            "rejected_duplicate": 0,
            "rejected_expired": 0,
            "rejected_too_many_outputs": 0,
            "rejected_invalid": 0,
        }

    @property
    def label_counters(self) -> dict[str, int]:
        """The late labels' counts: ``requested``, ``applied``, ``expired`` and ``rejected_<reason>``."""
        return self._labels.counters

    @property
    def pending(self) -> int:
        """How many decisions await their report."""
        return len(self._pending)

    def decide(self, decision_id: Hashable) -> int:
        """Decide the depth for a new event identified by ``decision_id`` (a string or an integer)."""
        if not is_id(decision_id):
            raise ValueError(
                "decision_id must be a string or an integer (it is saved in the JSON state), "
                f"got {type(decision_id).__name__}"
            )
        if decision_id in self._pending or decision_id in self._closed:
            raise ValueError(f"decision_id {decision_id!r} was already used")
        stats = self.policy.stats
        t = stats.decisions + 1
        depth = self.policy._decide(t)
        stats.decisions = t
        self._pending[decision_id] = (depth, t, self._clock())
        self.counters["decided"] += 1
        self.expire()
        self._labels.expire_aged(t)
        return depth

    def withdraw(self, decision_id: Hashable) -> None:
        """Forget the pending decision ``decision_id``, never delivered: its identifier may be decided again.

        Examples
        --------
        >>> from uss_stream.policies import USSUCB
        >>> book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.2]))
        >>> book.decide("e0")
        2
        >>> book.withdraw("e0")
        >>> book.pending, book.counters["decided"], book.decide("e0")
        (0, 0, 2)
        """
        del self._pending[decision_id]
        self.counters["decided"] -= 1

    def depth_of(self, decision_id: Hashable) -> int:
        """The depth decided for a pending decision."""
        return self._pending[decision_id][0]

    def age_of(self, decision_id: Hashable) -> float | None:
        """Seconds since a pending decision was made (or restored); ``None`` if it is not pending."""
        entry = self._pending.get(decision_id) if is_id(decision_id) else None
        return None if entry is None else self._clock() - entry[2]

    def summary(self) -> dict[str, Any]:
        """What the book has learned and awaits, under the names of the service's metrics.

        :func:`~uss_stream.policies.learning_state.learning_state` of the policy (``policy_round``,
        ``chosen_depth``, ``depth_mix``, ``disagreement_ratio``, ``wd_verdict``), plus
        ``pending_decisions`` and, for a label-asking policy, ``labels_requested_total``,
        ``labels_answered_total`` and ``labels_expired_total`` (``docs/metrics.md``).

        >>> from uss_stream.policies import AuditedUSS
        >>> book = PendingDecisions(AuditedUSS(stage_costs=[0.0, 0.5]))
        >>> book.decide("e1"), book.decide("e2")
        (2, 2)
        >>> book.report("e1", ["cat", "dog"])      # asks for its label
        >>> summary = book.summary()
        >>> summary["pending_decisions"], summary["policy_round"], summary["labels_requested_total"]
        (1, 2, 1)
        >>> summary["disagreement_ratio"], summary["wd_verdict"]
        ({'1-2': 1.0}, 'undecided')

        """
        summary = learning_state(self.policy)
        summary["pending_decisions"] = self.pending
        if self.policy.asks_for_labels:
            counters = self.label_counters
            summary["labels_requested_total"] = counters["requested"]
            summary["labels_answered_total"] = counters["applied"]
            summary["labels_expired_total"] = counters["expired"]
        return summary

    def report(self, decision_id: Hashable, outputs: Sequence[Any]) -> None:
        """Apply the outputs of stages ``1..len(outputs)`` (at most the decided depth).

        All or nothing: a rejected report (:class:`RejectedReport`) is counted and changes nothing
        else; the decision stays pending unless it expired.
        """
        if not is_id(decision_id):
            self._reject("unknown", f"decision {show(decision_id)} is unknown (ids are strings or integers)")
        if self.max_age_seconds is not None:
            self.expire()
        entry = self._pending.get(decision_id)
        if entry is None:
            state = self._closed.get(decision_id)
            if state == "reported":
                self._reject("duplicate", f"decision {decision_id!r} was already reported")
            if state == "expired":
                self._reject("expired", f"decision {decision_id!r} expired before its report")
            self._reject("unknown", f"decision {decision_id!r} is unknown")
        depth = entry[0]
        try:
            count = len(outputs)
        except TypeError:
            self._reject("invalid", f"outputs of {decision_id!r} must be a sequence")
        if count > depth:
            self._reject(
                "too_many_outputs",
                f"decision {decision_id!r} queried {depth} stage(s), the report has {count} outputs",
            )
        if count == 0:
            self._reject("invalid", f"report of {decision_id!r} holds no output")
        try:
            values = check_outputs(outputs, count)
        except ValueError as error:
            self._reject("invalid", f"report of {decision_id!r}: {error}")
        request = self.policy.request_label(entry[1], values) if self.policy.asks_for_labels else 0
        try:
            self.policy.stats.record(values)
        except ValueError as error:
            if request:
                self.policy.withdraw_label_request()
            self._reject("invalid", f"report of {decision_id!r}: {error}")
        if request:
            self._labels.request(decision_id, values, request, entry[1])
        del self._pending[decision_id]
        self._closed.close(decision_id, "reported")
        self.counters["applied"] += 1

    @property
    def awaiting_labels(self) -> int:
        """How many reported decisions await their requested label."""
        return len(self._labels)

    def label_requested(self, decision_id: Hashable) -> bool:
        """Whether the report of ``decision_id`` asked for its label (and the label is still awaited)."""
        return decision_id in self._labels

    def report_label(self, decision_id: Hashable, label: Hashable) -> None:
        """Apply the late label of a decision whose report asked for it.

        >>> from uss_stream.policies import AuditedUSS
        >>> book = PendingDecisions(AuditedUSS(stage_costs=[0.0, 0.5]))
        >>> book.decide("e1")
        2
        >>> book.report("e1", ["cat", "dog"])       # the stages disagree: the label is asked for
        >>> book.label_requested("e1")
        True
        >>> book.report_label("e1", "dog")
        >>> book.policy.evidence.deeper_right, book.label_counters["applied"]
        ([1], 1)
        >>> book.report_label("e1", "dog")
        Traceback (most recent call last):
        ...
        uss_stream.pending.RejectedReport: the label of decision 'e1' was already applied

        """
        self._labels.apply(decision_id, label, self._was_decided)

    def _was_decided(self, decision_id: Hashable) -> bool:
        """Whether ``decision_id`` is pending or was reported (its label is not merely unknown)."""
        return decision_id in self._pending or self._closed.get(decision_id) == "reported"

    def expire(self) -> list[Hashable]:
        """Expire the decisions past their age limits; returns their identifiers."""
        now_round = self.policy.stats.decisions
        now = self._clock() if self.max_age_seconds is not None else 0.0

        def stale(t: int, decided_at: float) -> bool:
            too_old = self.max_age_decisions is not None and now_round - t >= self.max_age_decisions
            return too_old or (self.max_age_seconds is not None and now - decided_at >= self.max_age_seconds)

        return self._expire_oldest(stale)

    def _expire_oldest(self, stale: Callable[[int, float], bool]) -> list[Hashable]:
        """Expire the pending decisions, oldest first, while ``stale(round, decided_at)``."""
        expired: list[Hashable] = []
        while self._pending:
            decision_id, (_, t, decided_at) = next(iter(self._pending.items()))
            if not stale(t, decided_at):
                break
            del self._pending[decision_id]
            self._closed.close(decision_id, "expired")
            expired.append(decision_id)
        self.counters["expired"] += len(expired)
        return expired

    def expire_through(self, t: int) -> int:
        """Expire the pending decisions and the awaited labels of every decision made at round ``t``
        or before, whatever the age limits; returns how many expired.

        They are counted as expired (in :attr:`counters` and :attr:`label_counters`) and a later
        report or label for them is rejected as expired, as after the age limits. This is how a
        state that must fit a size limit lets its oldest entries go.

        Parameters
        ----------
        t
            The round (decision number) of the newest decision whose entries expire.

        Examples
        --------
        >>> from uss_stream.policies import USSUCB
        >>> book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.2]))
        >>> [book.decide(f"e{k}") for k in range(4)]
        [2, 2, 2, 2]
        >>> book.expire_through(2), book.pending, book.counters["expired"]
        (2, 2, 2)
        >>> book.report("e1", [1, 0])
        Traceback (most recent call last):
        ...
        uss_stream.pending.RejectedReport: decision 'e1' expired before its report

        """
        expired = self._expire_oldest(lambda decided, _: decided <= t)
        return len(expired) + self._labels.expire_through(t)

    def forget_closed(self, reports: int, labels: int = 0) -> None:
        """Forget the ``reports`` oldest remembered report identifiers and the ``labels`` oldest
        applied or expired label identifiers (a size limit's doing).

        A later duplicate of a forgotten one is rejected as ``unknown`` instead of ``duplicate``
        (or ``expired``); it is never applied.

        Examples
        --------
        >>> from uss_stream.policies import USSUCB
        >>> book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.2]))
        >>> for k in range(3):
        ...     book.report(f"e{k}", [1] * book.decide(f"e{k}"))
        >>> book.forget_closed(2)
        >>> book.state_dict()["closed"]["ids"]
        ['e2']
        """
        self._closed.forget(reports)
        self._labels.closed.forget(labels)

    def _reject(self, reason: str, message: str) -> None:
        self.counters[f"rejected_{reason}"] += 1
        raise RejectedReport(reason, message)

    def state_dict(self) -> dict[str, Any]:
        """JSON document: the policy's counts, the pending decisions, the remembered reported or
        expired identifiers (oldest first; ``expired`` lists the positions of the expired ones)
        and the counters.

        Decision times are not saved: after a restore, the age in seconds of a restored decision
        counts from the restore.
        """
        return {
            "format": STATE_FORMAT,
            "policy": self.policy.state_dict(),
            "pending": [[decision_id, depth, t] for decision_id, (depth, t, _) in self._pending.items()],
            "closed": self._closed.to_json(),
            "counters": dict(self.counters),
            "labels": self._labels.state_dict(),
        }

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`; everything is validated before anything is replaced.

        A document without ``closed`` (written before the identifiers were saved) restores with no
        identifier remembered; of a longer ``closed`` list the newest ``remember_reported`` are kept.

        Raises
        ------
        ValueError
            Naming the field: wrong format, a policy state that does not fit the policy, pending
            decisions with a malformed or duplicate identifier, a depth outside ``1..K``, rounds
            that do not increase or exceed the decisions of the policy state, identifiers both
            pending and closed, counters that are not the expected counts.
        """
        state_object(document, STATE_FORMAT)
        pending = document.get("pending")
        counters = document.get("counters")
        if not isinstance(pending, list) or not isinstance(counters, dict):
            raise ValueError("state fields 'pending' (list) and 'counters' (object) are required")
        if set(counters) != set(self.counters) or not all(is_count(v) for v in counters.values()):
            raise ValueError(
                f"state field 'counters' must hold the counts {sorted(self.counters)} (integers in 0..2**53)"
            )
        decisions = self.policy._checked_stats(document.get("policy")).decisions
        closed = ClosedIds.from_json(
            document.get("closed", {"ids": [], "expired": []}), self.remember_reported
        )
        restored = _restored_pending(pending, closed, self.policy.n_stages, decisions, self._clock())
        labels = self._labels.restored(document.get("labels"))
        self.policy.load_state_dict(document.get("policy"))
        self._pending = restored
        closed.trim()
        self._closed = closed
        self.counters = dict(counters)
        self._labels = labels


def _restored_pending(
    pending: list[Any], closed: ClosedIds, n_stages: int, decisions: int, now: float
) -> OrderedDict[Hashable, tuple[int, int, float]]:
    """The pending decisions of a state document, validated (see :meth:`PendingDecisions.load_state_dict`)."""
    restored: OrderedDict[Hashable, tuple[int, int, float]] = OrderedDict()
    last_round = 0
    for k, item in enumerate(pending):
        where = f"state field 'pending[{k}]'"
        if not (isinstance(item, list) and len(item) == 3):
            raise ValueError(f"{where} must be [id, depth, t]")
        decision_id, depth, t = item
        if not is_id(decision_id):
            raise ValueError(f"{where} has id {show(decision_id)}: ids are a string or an integer")
        if decision_id in restored:
            raise ValueError(f"{where}: decision {show(decision_id)} is pending twice")
        if decision_id in closed:
            raise ValueError(f"{where}: decision {show(decision_id)} is also closed (reported/expired)")
        if not is_count(depth) or not 1 <= depth <= n_stages:
            raise ValueError(f"{where} has depth {show(depth)} outside 1..{n_stages}")
        if not is_count(t) or t <= last_round:
            raise ValueError(
                f"{where} has round {show(t)}; the rounds must be integers that increase "
                f"(decision order) from {last_round + 1}"
            )
        if t > decisions:
            raise ValueError(f"{where} has round {t}, beyond the {decisions} decisions of the policy")
        restored[decision_id] = (depth, t, now)
        last_round = t
    return restored
