"""Keep an orchestration learner's checkpoint within the largest record the state topic accepts.

An orchestration learner checkpoints its whole state in one record, pending decisions included. With no
expiry, decisions whose reports never come pile up until the checkpoint is larger than the broker
accepts; the write then fails, the offsets are never committed, and every restart redoes the same
decisions and fails at the same point. :class:`StateBudget` makes that impossible:

* at :data:`WARN_AT` of the limit it warns (again at every further tenth, or after a minute), naming
  the pending decisions and the settings that bound them;
* past :data:`TRIM_AT` it expires the oldest pending decisions and labels awaited (oldest by the
  round of their decision; counted as ``expired``: their late reports are dead-lettered
  ``report_expired``, their late labels ``report_label_expired``) until the checkpoint is back
  under :data:`TRIM_TO` of the limit, and says how many. A label-asking policy asks for up to
  ``label_allotment + label_budget·sqrt(t)`` labels by round ``t``: those never answered would
  otherwise outgrow any limit in a long enough run.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

__all__ = ["TRIM_AT", "TRIM_TO", "WARN_AT", "StateBudget"]

log = logging.getLogger("uss_stream_kafka.orchestration")

WARN_AT = 0.5
TRIM_AT = 0.9
TRIM_TO = 0.7


class StateBudget:
    """Keep the state of a :class:`~uss_stream.pending.PendingDecisions` within ``limit`` bytes of JSON.

    Parameters
    ----------
    book
        The pending decisions (trimmed in place when the checkpoint is too large).
    limit
        The largest state (JSON bytes) a checkpoint may hold.

    Examples
    --------
    >>> from uss_stream.pending import PendingDecisions
    >>> from uss_stream.policies import USSUCB
    >>> book = PendingDecisions(USSUCB([0.0, 0.1]))
    >>> for i in range(1000):
    ...     _ = book.decide(f"decision-{i:04d}")
    >>> budget = StateBudget(book, limit=20_000)
    >>> state = budget.fit(book.state_dict)
    >>> len(_dumps(state)) <= 0.9 * 20_000, 0 < book.pending < 1000
    (True, True)
    >>> book.counters["expired"] == 1000 - book.pending
    True
    >>> book.report("decision-0999", [1])   # the newest decisions stay
    >>> book.report("decision-0000", [1])   # expired, and its id forgotten to fit the limit
    Traceback (most recent call last):
    ...
    uss_stream.pending.RejectedReport: decision 'decision-0000' is unknown

    """

    def __init__(self, book: Any, limit: int) -> None:
        self.book = book
        self.limit = limit
        self._warned_at = 0.0
        self._warned_ratio = 0.0

    def fit(self, state: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``state()`` (the book's state), after trimming it (and the book) if too large.

        First the oldest remembered report and label ids are forgotten, then the oldest pending
        decisions and awaited labels are expired.
        """

        def document() -> dict[str, Any]:
            return {"state": state()}

        checkpoint = document()
        value = _dumps(checkpoint)
        ratio = len(value) / self.limit
        if ratio >= WARN_AT:
            self._warn(len(value), ratio)
        if len(value) <= TRIM_AT * self.limit:
            return checkpoint["state"]
        _drop_closed(checkpoint, self.limit, len(value), self.book)
        value = _dumps(checkpoint)
        book = self.book
        while len(value) > TRIM_AT * self.limit and (book.pending or book.awaiting_labels):
            held = book.pending + book.awaiting_labels
            keep = int(held * TRIM_TO * self.limit / len(value))
            expired = self._expire_oldest(checkpoint["state"], held - keep)
            if not expired:
                break
            checkpoint = document()
            _drop_closed(checkpoint, self.limit, len(_dumps(checkpoint)), self.book)
            value = _dumps(checkpoint)
            log.warning(
                "checkpoint over %d%% of the %d-byte limit of the state topic: expired the %d oldest "
                "pending decisions and awaited labels (their reports and labels will be dead-lettered "
                "report_expired and report_label_expired), %d pending, %d labels awaited, "
                "checkpoint now %d bytes",
                int(TRIM_AT * 100),
                self.limit,
                expired,
                book.pending,
                book.awaiting_labels,
                len(value),
            )
        if len(value) > self.limit:
            raise ValueError(
                f"the checkpoint is {len(value)} bytes after trimming, more than the state topic "
                f"accepts ({self.limit}): raise max.message.bytes of the state topic"
            )
        return checkpoint["state"]

    def _warn(self, size: int, ratio: float) -> None:
        now = time.monotonic()
        if ratio < self._warned_ratio + 0.1 and now - self._warned_at < 60.0:
            return
        self._warned_at, self._warned_ratio = now, ratio
        log.warning(
            "checkpoint is %d bytes, %d%% of the %d-byte limit of the state topic, with %d decisions "
            "pending: past %d%% the oldest are expired. Bound them with --max-age-decisions or "
            "--max-age-seconds, or raise max.message.bytes of the state topic",
            size,
            int(ratio * 100),
            self.limit,
            self.book.pending,
            int(TRIM_AT * 100),
        )

    def _expire_oldest(self, state: dict[str, Any], count: int) -> int:
        """Expire the ``count`` oldest (by round) pending decisions and awaited labels of ``state``
        (the book's state); returns how many expired."""
        if count <= 0:
            return 0
        rounds = sorted([t for _, _, t in state["pending"]] + [t for *_, t in state["labels"]["awaiting"]])
        return self.book.expire_through(rounds[min(count, len(rounds)) - 1])


def _closed_lists(checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
    """The remembered-id lists of a checkpoint: reports (``closed``), then labels (``labels.closed``)."""
    state = checkpoint.get("state", {})
    found = [state.get("closed"), (state.get("labels") or {}).get("closed")]
    return [closed if isinstance(closed, dict) else {} for closed in found]


def _drop_closed(checkpoint: dict[str, Any], limit: int, size: int, book: Any) -> int:
    """Keep in ``checkpoint`` and ``book`` the newest remembered ids that fit :data:`TRIM_TO` of ``limit``.

    Both lists (reported ids, applied label ids) give up their oldest ids, each in proportion to
    its bytes: they are bounded by bytes, however long the identifiers. A later duplicate report or
    label of a forgotten id is dead-lettered ``report_unknown`` (``report_label_unknown``) instead of
    ``report_duplicate``, never applied. Returns how many were dropped.
    """
    lists = _closed_lists(checkpoint)
    excess = size - TRIM_TO * limit
    total = sum(len(_dumps(closed.get("ids") or [])) for closed in lists)
    if excess <= 0 or total <= 4:
        return 0
    drops = []
    for closed in lists:  # each gives up its share of the excess: len(ids) / total ids per byte
        ids = closed.get("ids") or []
        drop = min(len(ids), math.ceil(excess * len(ids) / total))
        if drop:
            closed["ids"] = ids[drop:]
            closed["expired"] = [k - drop for k in closed.get("expired", []) if k >= drop]
        drops.append(drop)
    book.forget_closed(*drops)
    log.warning(
        "checkpoint keeps the newest %d remembered report ids and %d label ids only (%d and %d "
        "dropped to fit the state topic)",
        len(lists[0].get("ids") or []),
        len(lists[1].get("ids") or []),
        *drops,
    )
    return sum(drops)


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()
