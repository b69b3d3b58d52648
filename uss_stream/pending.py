"""Decide now, learn when the sensors report: decisions whose outputs arrive later, in any order.

In a physical cascade the selector does not hold the sensors: it decides a depth, other systems
run sensors ``1..d`` and report their outputs later, out of order, sometimes never.
:class:`PendingDecisions` wraps a policy for that flow. The round counter ``t`` counts decisions;
the statistics stay exactly the counts of the reports applied. A report for an unknown, already
reported or expired decision, or with more outputs than the decided depth, is rejected with a
:class:`RejectedReport` (a ``ValueError``) and counted, never applied. Pending decisions expire
after ``max_age_decisions`` later decisions and/or ``max_age_seconds``, and are counted as expired.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from uss_stream.policies.base import Policy
from uss_stream.validation import check_outputs

__all__ = ["PendingDecisions", "RejectedReport", "STATE_FORMAT"]

STATE_FORMAT = "uss-stream/pending-decisions/v1"


class RejectedReport(ValueError):
    """A report that cannot be applied; ``reason`` is one of ``unknown``, ``duplicate``,
    ``expired``, ``too_many_outputs``, ``invalid``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


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
        How many reported or expired identifiers are remembered to tell duplicates from unknown
        identifiers (older ones are reported as ``unknown``).
    clock
        Seconds, monotonic; injectable for tests.

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
        remember_reported: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a uss_stream Policy, got {type(policy).__name__}")
        for name, value in (("max_age_decisions", max_age_decisions), ("max_age_seconds", max_age_seconds)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 or None, got {value!r}")
        self.policy = policy
        self.max_age_decisions = max_age_decisions
        self.max_age_seconds = max_age_seconds
        self.remember_reported = remember_reported
        self._clock = clock
        # decision id -> (depth, round t, time decided); insertion order is decision order.
        self._pending: OrderedDict[Hashable, tuple[int, int, float]] = OrderedDict()
        self._closed: OrderedDict[Hashable, str] = OrderedDict()
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
    def pending(self) -> int:
        """How many decisions await their report."""
        return len(self._pending)

    def decide(self, decision_id: Hashable) -> int:
        """Decide the depth for a new event identified by ``decision_id``."""
        if decision_id in self._pending or decision_id in self._closed:
            raise ValueError(f"decision_id {decision_id!r} was already used")
        stats = self.policy.stats
        t = stats.decisions + 1
        depth = self.policy._decide(t)
        stats.decisions = t
        self._pending[decision_id] = (depth, t, self._clock())
        self.counters["decided"] += 1
        self.expire()
        return depth

    def depth_of(self, decision_id: Hashable) -> int:
        """The depth decided for a pending decision."""
        return self._pending[decision_id][0]

    def report(self, decision_id: Hashable, outputs: Sequence[Any]) -> None:
        """Apply the outputs of stages ``1..len(outputs)`` (at most the decided depth)."""
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
        self.policy.stats.record(values)
        del self._pending[decision_id]
        self._close(decision_id, "reported")
        self.counters["applied"] += 1

    def expire(self) -> list[Hashable]:
        """Expire the decisions past their age limits; returns their identifiers."""
        expired: list[Hashable] = []
        now_round = self.policy.stats.decisions
        now = self._clock() if self.max_age_seconds is not None else 0.0
        while self._pending:
            decision_id, (_, t, decided_at) = next(iter(self._pending.items()))
            too_old = self.max_age_decisions is not None and now_round - t >= self.max_age_decisions
            too_late = self.max_age_seconds is not None and now - decided_at >= self.max_age_seconds
            if not (too_old or too_late):
                break
            del self._pending[decision_id]
            self._close(decision_id, "expired")
            expired.append(decision_id)
        self.counters["expired"] += len(expired)
        return expired

    def _close(self, decision_id: Hashable, state: str) -> None:
        self._closed[decision_id] = state
        while len(self._closed) > self.remember_reported:
            self._closed.popitem(last=False)

    def _reject(self, reason: str, message: str) -> None:
        self.counters[f"rejected_{reason}"] += 1
        raise RejectedReport(reason, message)

    def state_dict(self) -> dict[str, Any]:
        """JSON document: the policy's counts, the pending decisions and the counters.

        Identifiers must be JSON values (strings or numbers). Decision times are not saved: after a
        restore, the age in seconds of a restored decision counts from the restore.
        """
        return {
            "format": STATE_FORMAT,
            "policy": self.policy.state_dict(),
            "pending": [[decision_id, depth, t] for decision_id, (depth, t, _) in self._pending.items()],
            "counters": dict(self.counters),
        }

    def load_state_dict(self, document: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` (validated before anything is replaced)."""
        if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
            raise ValueError(f"state document must be a {STATE_FORMAT!r} object")
        pending = document.get("pending")
        counters = document.get("counters")
        if not isinstance(pending, list) or not isinstance(counters, dict):
            raise ValueError("state fields 'pending' (list) and 'counters' (object) are required")
        restored: OrderedDict[Hashable, tuple[int, int, float]] = OrderedDict()
        now = self._clock()
        for k, item in enumerate(pending):
            if not (isinstance(item, list) and len(item) == 3):
                raise ValueError(f"state field 'pending[{k}]' must be [id, depth, t]")
            decision_id, depth, t = item
            if not isinstance(depth, int) or not 1 <= depth <= self.policy.n_stages:
                raise ValueError(f"state field 'pending[{k}]' has depth {depth!r} outside 1..K")
            if not isinstance(t, int) or t < 1:
                raise ValueError(f"state field 'pending[{k}]' has round {t!r}")
            restored[decision_id] = (depth, t, now)
        if set(counters) != set(self.counters) or not all(
            isinstance(v, int) and v >= 0 for v in counters.values()
        ):
            raise ValueError(f"state field 'counters' must hold the counts {sorted(self.counters)}")
        self.policy.load_state_dict(document.get("policy"))
        self._pending = restored
        self.counters = dict(counters)
