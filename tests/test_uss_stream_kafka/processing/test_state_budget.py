"""An orchestration learner's state within the state topic's limit (``processing/state_budget.py``).

The remembered report ids are bounded by bytes, however long the identifiers: past ``TRIM_AT`` of
the limit the oldest are forgotten, in the checkpoint and in memory alike, until the state is back
near ``TRIM_TO``; then the oldest pending decisions are expired. A duplicate report of a forgotten
id is rejected as ``unknown``, of a remembered one as ``duplicate``; never applied twice.
"""

from __future__ import annotations

import json

import pytest

from uss_stream.pending import PendingDecisions, RejectedReport
from uss_stream.policies import USSUCB
from uss_stream_kafka.processing.state_budget import TRIM_AT, TRIM_TO, StateBudget

LIMIT = 40_000


def size(state: dict) -> int:
    """The bytes of the document the budget measures (the state under its checkpoint key)."""
    return len(json.dumps({"state": state}, separators=(",", ":")))


def reported_book(count: int, id_bytes: int) -> tuple[PendingDecisions, list[str]]:
    """A book that decided and received the report of ``count`` decisions with long identifiers."""
    book = PendingDecisions(USSUCB([0.0, 0.2]))
    ids = [f"{k:06d}-" + "x" * (id_bytes - 7) for k in range(count)]
    for decision_id in ids:
        book.report(decision_id, [1] * book.decide(decision_id))
    return book, ids


def rejection(book: PendingDecisions, decision_id: str) -> str:
    with pytest.raises(RejectedReport) as rejected:
        book.report(decision_id, [1])
    return rejected.value.reason


@pytest.mark.parametrize("id_bytes", [20, 200])
def test_past_the_trim_point_the_oldest_reported_ids_are_forgotten_down_to_trim_to(id_bytes):
    book, ids = reported_book(int(TRIM_AT * LIMIT / (id_bytes + 3)) + 50, id_bytes)
    assert size(book.state_dict()) > TRIM_AT * LIMIT
    state = StateBudget(book, LIMIT).fit(book.state_dict)
    kept = state["closed"]["ids"]
    assert 0.95 * TRIM_TO * LIMIT <= size(state) <= TRIM_TO * LIMIT + id_bytes + 3
    assert kept == ids[len(ids) - len(kept) :]  # the newest, in order
    assert book.state_dict()["closed"]["ids"] == kept  # forgotten in memory too
    assert rejection(book, kept[0]) == "duplicate"
    assert rejection(book, ids[len(ids) - len(kept) - 1]) == "unknown"


def test_under_the_trim_point_nothing_is_forgotten():
    book, ids = reported_book(int(TRIM_AT * LIMIT / 23) - 100, 20)
    assert size(book.state_dict()) <= TRIM_AT * LIMIT
    assert StateBudget(book, LIMIT).fit(book.state_dict)["closed"]["ids"] == ids
    assert rejection(book, ids[0]) == "duplicate"


def test_pending_decisions_past_the_limit_expire_oldest_first_and_their_reports_are_refused():
    book = PendingDecisions(USSUCB([0.0, 0.2]))
    ids = [f"pending-{k:05d}" for k in range(3_000)]
    for decision_id in ids:
        book.decide(decision_id)
    state = StateBudget(book, LIMIT).fit(book.state_dict)
    assert size(state) <= TRIM_AT * LIMIT and 0 < book.pending < len(ids)
    assert book.counters["expired"] == len(ids) - book.pending
    oldest_kept = len(ids) - book.pending
    assert book.depth_of(ids[oldest_kept]) > 0  # the newest are still pending
    book.report(ids[-1], [1, 1])
    # The expired ones were closed, and their ids forgotten in turn to fit the limit.
    assert rejection(book, ids[oldest_kept - 1]) == rejection(book, ids[0]) == "unknown"
