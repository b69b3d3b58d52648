"""The bookkeeping behind :class:`~uss_stream.pending.PendingDecisions`.

:class:`ClosedIds` remembers the newest identifiers that were closed (reported, applied or
expired), so that a duplicate is told from an unknown identifier; :class:`LateLabels` holds the
labels that reports asked for until they come or expire. Both save and restore themselves as the
``closed`` and ``labels`` fields of the book's JSON state (``uss-stream/pending-decisions/v1``).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from uss_stream.core.schema import is_count, show
from uss_stream.policies.base import Policy

__all__ = ["ClosedIds", "LateLabels", "RejectedReport", "is_id"]


class RejectedReport(ValueError):
    """A report that cannot be applied; ``reason`` is one of ``unknown``, ``duplicate``,
    ``expired``, ``too_many_outputs``, ``invalid`` (and ``not_requested`` for a label)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# Its public home, where it is documented and imported from (tracebacks and pickles name it so).
RejectedReport.__module__ = "uss_stream.pending"


def is_id(value: Any) -> bool:
    """A decision identifier: a string or an integer (not a boolean), as JSON restores them.

    >>> is_id("e1"), is_id(7), is_id(True), is_id(1.0), is_id(("a", 1))
    (True, True, False, False, False)
    """
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _json_kind(value: Any) -> str:
    """The JSON type of a label or output: ``"1"``, ``1`` and ``true`` never equal one another.

    >>> _json_kind("1"), _json_kind(1), _json_kind(1.0), _json_kind(True)
    ('string', 'number', 'number', 'boolean')
    """
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__


class ClosedIds:
    """The newest ``limit`` closed identifiers, oldest first, each with how it closed.

    A state is ``"expired"`` or the one of a completed entry (``"reported"`` for a decision,
    ``"applied"`` for a label); closing one more than ``limit`` forgets the oldest.

    Parameters
    ----------
    limit
        How many identifiers are remembered (``>= 0``).
    done
        The state of a completed entry, as :meth:`from_json` restores it.

    Examples
    --------
    >>> closed = ClosedIds(2)
    >>> for decision_id, state in (("e1", "reported"), ("e2", "expired"), (3, "reported")):
    ...     closed.close(decision_id, state)
    >>> closed.get("e1"), closed.get("e2"), 3 in closed, len(closed)
    (None, 'expired', True, 2)
    >>> closed.to_json()
    {'ids': ['e2', 3], 'expired': [0]}
    >>> restored = ClosedIds.from_json({"ids": ["a", "b", "c"], "expired": [2]}, limit=2)
    >>> len(restored), "a" in restored
    (3, True)
    >>> restored.trim()
    >>> restored.to_json()
    {'ids': ['b', 'c'], 'expired': [1]}
    """

    __slots__ = ("_states", "done", "limit")

    def __init__(self, limit: int, done: str = "reported") -> None:
        self.limit = limit
        self.done = done
        self._states: OrderedDict[Hashable, str] = OrderedDict()

    def __contains__(self, decision_id: Hashable) -> bool:
        return decision_id in self._states

    def __len__(self) -> int:
        return len(self._states)

    def get(self, decision_id: Hashable) -> str | None:
        """How ``decision_id`` closed; ``None`` if it is not remembered."""
        return self._states.get(decision_id)

    def close(self, decision_id: Hashable, state: str) -> None:
        """Remember ``decision_id`` as closed with ``state``, forgetting the oldest past the limit."""
        self._states[decision_id] = state
        self.trim()

    def trim(self) -> None:
        """Forget the oldest identifiers past the limit."""
        states = self._states
        while len(states) > self.limit:
            states.popitem(last=False)

    def forget(self, count: int) -> None:
        """Forget the ``count`` oldest identifiers (all of them if there are fewer)."""
        states = self._states
        for _ in range(min(count, len(states))):
            states.popitem(last=False)

    def to_json(self) -> dict[str, list[Any]]:
        """``{"ids": [...], "expired": [positions of the expired ones in ids]}``."""
        return {
            "ids": list(self._states),
            "expired": [k for k, state in enumerate(self._states.values()) if state == "expired"],
        }

    @classmethod
    def from_json(cls, document: Any, limit: int, done: str = "reported") -> ClosedIds:
        """The identifiers of a :meth:`to_json` document, validated; all of them until :meth:`trim`.

        Raises
        ------
        ValueError
            Naming the field (``closed.ids``, ``closed.expired``): not the two lists, an identifier
            that is not a string or an integer or appears twice, positions that do not increase
            within ``ids``.
        """
        if not isinstance(document, dict) or not isinstance(document.get("ids"), list):
            raise ValueError("state field 'closed' must be an object with the lists 'ids' and 'expired'")
        ids, expired = document["ids"], document.get("expired")
        states: OrderedDict[Hashable, str] = OrderedDict()
        for k, decision_id in enumerate(ids):
            if not is_id(decision_id):
                raise ValueError(
                    f"state field 'closed.ids[{k}]' is {show(decision_id)}: ids are a string or an integer"
                )
            if decision_id in states:
                raise ValueError(
                    f"state field 'closed.ids[{k}]': decision {show(decision_id)} is closed twice"
                )
            states[decision_id] = done
        if not isinstance(expired, list):
            raise ValueError("state field 'closed.expired' must be a list of positions in 'closed.ids'")
        keys = list(states)
        last = -1
        for position in expired:
            if not is_count(position) or not last < position < len(keys):
                raise ValueError(
                    f"state field 'closed.expired' must hold increasing positions in 0..{len(keys) - 1}, "
                    f"got {show(position)}"
                )
            states[keys[position]] = "expired"
            last = position
        closed = cls(limit, done)
        closed._states = states
        return closed


class LateLabels:
    """The labels a book's reports asked for: awaited, then applied or expired, each counted.

    Parameters
    ----------
    policy
        The label-asking policy that learns from the labels (its ``learn_label``).
    max_age_decisions
        A label still missing once this many decisions followed its own decision expires
        (``None``: never), whatever the order in which the reports came.
    remember
        How many applied or expired identifiers are remembered (:class:`ClosedIds`).

    Examples
    --------
    >>> from uss_stream.policies import AuditedUSS
    >>> policy = AuditedUSS(stage_costs=[0.0, 0.5])
    >>> labels = LateLabels(policy, max_age_decisions=2, remember=10)
    >>> labels.request("e1", ["cat", "dog"], mask=1, t=1)
    >>> "e1" in labels, len(labels), labels.counters["requested"]
    (True, 1, 1)
    >>> labels.apply("e1", "dog", decided=lambda decision_id: False)
    >>> policy.evidence.deeper_right, labels.counters["applied"]
    ([1], 1)
    >>> labels.request("e2", ["cat", "dog"], mask=1, t=2)
    >>> labels.expire_aged(now_round=4)      # two decisions after round 2
    >>> labels.counters["expired"], labels.closed.to_json()
    (1, {'ids': ['e1', 'e2'], 'expired': [1]})
    """

    def __init__(self, policy: Policy, max_age_decisions: int | None, remember: int) -> None:
        self.policy = policy
        self.max_age_decisions = max_age_decisions
        # decision id -> (outputs, request mask, round t) of reports that asked for their label.
        self.awaiting: OrderedDict[Hashable, tuple[list[Any], int, int]] = OrderedDict()
        # (round, sequence, id) of each request, a heap: reports come in any order, so the age
        # limit finds the oldest rounds here (entries of labels already closed are skipped).
        self._ages: list[tuple[int, int, Hashable]] = []
        self.closed = ClosedIds(remember, done="applied")
        self.counters = {
            "requested": 0,
            "applied": 0,
            "expired": 0,
            "rejected_unknown": 0,
            "rejected_not_requested": 0,
            "rejected_duplicate": 0,
            "rejected_expired": 0,
            "rejected_invalid": 0,
        }

    def __len__(self) -> int:
        return len(self.awaiting)

    def __contains__(self, decision_id: Hashable) -> bool:
        return decision_id in self.awaiting

    def request(self, decision_id: Hashable, values: list[Any], mask: int, t: int) -> None:
        """Await the label of ``decision_id`` (decided at round ``t``) asked with request ``mask``."""
        self.awaiting[decision_id] = (values, mask, t)
        if self.max_age_decisions is not None:
            heapq.heappush(self._ages, (t, self.counters["requested"], decision_id))
        self.counters["requested"] += 1

    def apply(self, decision_id: Hashable, label: Hashable, decided: Callable[[Hashable], bool]) -> None:
        """Give the awaited label of ``decision_id`` to the policy.

        ``decided(decision_id)`` says whether it is a decision that is pending or was reported (a
        label it did not ask for is rejected as ``not_requested``, not as ``unknown``). A rejection
        raises :class:`RejectedReport` and is counted, nothing else changes.
        """
        entry = self.awaiting.get(decision_id)
        if entry is None:
            state = self.closed.get(decision_id)
            if state == "applied":
                self._reject("duplicate", f"the label of decision {decision_id!r} was already applied")
            if state == "expired":
                self._reject("expired", f"the label of decision {decision_id!r} expired before it came")
            if decided(decision_id):
                self._reject("not_requested", f"decision {decision_id!r} did not ask for its label")
            self._reject("unknown", f"decision {decision_id!r} is unknown")
        values, request, _ = entry
        kinds = {_json_kind(value) for value in values}
        if _json_kind(label) not in kinds:
            self._reject(
                "invalid",
                f"label of {decision_id!r} is a JSON {_json_kind(label)}, the outputs "
                f"{' and '.join(sorted(kinds))}: it could never equal one (is it coded like the outputs?)",
            )
        try:
            self.policy.learn_label(values, label, request)
        except ValueError as error:
            self._reject("invalid", f"label of {decision_id!r}: {error}")
        del self.awaiting[decision_id]
        self.closed.close(decision_id, "applied")
        self.counters["applied"] += 1

    def expire_aged(self, now_round: int) -> None:
        """Expire the labels awaited for ``max_age_decisions`` or more decisions at round ``now_round``."""
        limit = self.max_age_decisions
        if limit is None:
            return
        ages = self._ages
        stale = []
        while ages and now_round - ages[0][0] >= limit:
            t, _, decision_id = heapq.heappop(ages)
            entry = self.awaiting.get(decision_id)
            if entry is not None and entry[2] == t:
                stale.append(decision_id)
        self._expire(stale)

    def expire_through(self, t: int) -> int:
        """Expire the labels awaited for decisions of round ``t`` or before; returns how many."""
        # Reports come in any order: the awaited labels are not in the order of their rounds.
        stale = [decision_id for decision_id, (_, _, decided) in self.awaiting.items() if decided <= t]
        self._expire(stale)
        return len(stale)

    def _expire(self, decision_ids: list[Hashable]) -> None:
        for decision_id in decision_ids:
            del self.awaiting[decision_id]
            self.closed.close(decision_id, "expired")
        self.counters["expired"] += len(decision_ids)

    def _reject(self, reason: str, message: str) -> None:
        self.counters[f"rejected_{reason}"] += 1
        raise RejectedReport(reason, message)

    def state_dict(self) -> dict[str, Any]:
        """The book state's ``labels`` field: the awaited labels, the closed ids and the counters."""
        return {
            "awaiting": [[i, list(v), mask, t] for i, (v, mask, t) in self.awaiting.items()],
            "closed": self.closed.to_json(),
            "counters": dict(self.counters),
        }

    def restored(self, document: Any) -> LateLabels:
        """A copy of this (empty) book of labels restored from :meth:`state_dict`, validated.

        ``None`` (a document written before labels were saved) restores an empty one; so does a
        document without ``closed``.
        """
        labels = LateLabels(self.policy, self.max_age_decisions, self.closed.limit)
        if document is None:
            return labels
        if not isinstance(document, dict):
            raise ValueError("state field 'labels' must be an object")
        awaiting_list = document.get("awaiting")
        counters = document.get("counters")
        if not isinstance(awaiting_list, list):
            raise ValueError("state field 'labels.awaiting' must be a list")
        if (
            not isinstance(counters, dict)
            or set(counters) != set(labels.counters)
            or not all(is_count(v, high=None) for v in counters.values())
        ):
            raise ValueError(f"state field 'labels.counters' must hold the counts {sorted(labels.counters)}")
        for k, item in enumerate(awaiting_list):
            if not (isinstance(item, list) and len(item) == 4 and isinstance(item[1], list)):
                raise ValueError(f"state field 'labels.awaiting[{k}]' must be [id, outputs, mask, t]")
            decision_id, values, mask, t = item
            if not isinstance(mask, int) or isinstance(mask, bool) or mask <= 0:
                raise ValueError(f"state field 'labels.awaiting[{k}]' has request mask {mask!r}")
            if not isinstance(t, int) or isinstance(t, bool) or t < 1:
                raise ValueError(f"state field 'labels.awaiting[{k}]' has round {t!r}")
            labels.awaiting[decision_id] = (values, mask, t)
        closed = document.get("closed", {"ids": [], "expired": []})
        labels.closed = ClosedIds.from_json(closed, self.closed.limit, done="applied")
        labels.closed.trim()
        labels.counters = dict(counters)
        if self.max_age_decisions is not None:
            labels._ages = [(t, k, i) for k, (i, (_, _, t)) in enumerate(labels.awaiting.items())]
            heapq.heapify(labels._ages)
        return labels
