"""PendingDecisions: late reports expire, parameters and identifiers are checked, the state keeps
what was reported (issue 16, item 9)."""

from __future__ import annotations

import copy
import json
import math

import pytest

from uss_stream.pending import PendingDecisions, RejectedReport
from uss_stream.policies import USSUCB

COSTS = [0.0, 0.1, 0.2]


def _book(**params) -> PendingDecisions:
    return PendingDecisions(USSUCB(stage_costs=COSTS), **params)


def _round_trip(book: PendingDecisions, **params) -> PendingDecisions:
    restored = _book(**params)
    restored.load_state_dict(json.loads(json.dumps(book.state_dict(), allow_nan=False)))
    return restored


def test_a_report_arriving_after_max_age_seconds_is_rejected_as_expired():
    now = [0.0]
    book = _book(max_age_seconds=10.0, clock=lambda: now[0])
    book.decide("early")
    book.decide("late")
    now[0] = 9.5
    book.report("early", [1, 1, 1])  # in time
    now[0] = 10.0  # "late" is 10 s old: expired, although no decision came in since
    before = book.policy.state_dict()
    with pytest.raises(RejectedReport) as caught:
        book.report("late", [1, 1, 1])
    assert caught.value.reason == "expired"
    assert book.policy.state_dict() == before
    assert book.pending == 0
    assert book.counters["applied"] == 1 and book.counters["expired"] == 1
    assert book.counters["rejected_expired"] == 1


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"remember_reported": -1}, "remember_reported"),
        ({"remember_reported": 1.5}, "remember_reported"),
        ({"remember_reported": True}, "remember_reported"),
        ({"remember_reported": "10"}, "remember_reported"),
        ({"max_age_decisions": 2.5}, "max_age_decisions"),
        ({"max_age_decisions": True}, "max_age_decisions"),
        ({"max_age_decisions": "3"}, "max_age_decisions"),
        ({"max_age_decisions": 0}, "max_age_decisions"),
        ({"max_age_seconds": math.nan}, "max_age_seconds"),
        ({"max_age_seconds": "3"}, "max_age_seconds"),
        ({"max_age_seconds": -1.0}, "max_age_seconds"),
        ({"max_age_seconds": True}, "max_age_seconds"),
    ],
)
def test_parameters_are_validated_at_init(params, name):
    with pytest.raises(ValueError, match=name):
        _book(**params)


def test_remembering_nothing_is_allowed():
    book = _book(remember_reported=0)
    book.decide("a")
    book.report("a", [1, 1, 1])
    with pytest.raises(RejectedReport) as caught:
        book.report("a", [1])
    assert caught.value.reason == "unknown"  # forgotten at once, as asked


def test_the_state_keeps_reported_and_expired_ids():
    now = [0.0]
    book = _book(max_age_seconds=5.0, clock=lambda: now[0])
    book.decide("reported")
    book.decide("expired")
    book.report("reported", [1, 0, 1])
    now[0] = 6.0
    assert book.expire() == ["expired"]
    restored = _round_trip(book, max_age_seconds=5.0)
    for decision_id in ("reported", "expired"):
        with pytest.raises(ValueError, match="already used"):
            restored.decide(decision_id)
    with pytest.raises(RejectedReport) as caught:
        restored.report("reported", [1])
    assert caught.value.reason == "duplicate"
    with pytest.raises(RejectedReport) as caught:
        restored.report("expired", [1])
    assert caught.value.reason == "expired"
    assert restored.state_dict()["closed"] == book.state_dict()["closed"]


def test_a_restore_remembers_at_most_remember_reported_ids_the_newest():
    book = _book()
    for k in range(5):
        book.decide(k)
        book.report(k, [1])
    restored = _round_trip(book, remember_reported=2)
    restored.decide(0)  # forgotten: usable again, as it would be without the restart
    with pytest.raises(ValueError, match="already used"):
        restored.decide(4)


def test_documents_without_closed_ids_still_load():
    # Documents written before the reported ids were saved have no "closed" field.
    book = _book()
    book.decide("a")
    document = book.state_dict()
    del document["closed"]
    restored = _book()
    restored.load_state_dict(document)
    assert restored.pending == 1


@pytest.mark.parametrize("decision_id", [("partition", 7), 1.5, True, None, b"id", frozenset({1})], ids=repr)
def test_ids_that_the_json_state_cannot_restore_are_refused_at_decide(decision_id):
    book = _book()
    with pytest.raises(ValueError, match="decision_id must be a string or an integer"):
        book.decide(decision_id)
    assert book.policy.stats.decisions == 0 and book.pending == 0


@pytest.mark.parametrize("decision_id", [[1], {"a": 1}, 1.5, None], ids=repr)
def test_a_report_with_an_impossible_id_is_rejected_not_raised(decision_id):
    book = _book()
    book.decide("a")
    with pytest.raises(RejectedReport) as caught:
        book.report(decision_id, [1])
    assert caught.value.reason == "unknown"
    assert book.counters["rejected_unknown"] == 1


def _saved() -> dict:
    book = _book()
    for decision_id in ("a", "b", "c"):
        book.decide(decision_id)
    book.report("b", [1, 0])
    return json.loads(json.dumps(book.state_dict()))


def _with(path, value):
    document = copy.deepcopy(_saved())
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("pending",), [["a", 3, 1], ["a", 3, 3]], r"pending\[1\].*'a'.*twice"),
        (("pending",), [["a", 3, 1], ["c", 3, 1]], r"pending\[1\].*round"),
        (("pending",), [["a", 3, 3], ["c", 3, 1]], r"pending\[1\].*round"),
        (("pending",), [["a", 3, 4]], r"pending\[0\].*round 4.*3 decisions"),
        (("pending",), [[["a"], 3, 1]], r"pending\[0\].*string or an integer"),
        (("pending",), [[1.5, 3, 1]], r"pending\[0\].*string or an integer"),
        (("pending",), [["a", True, 1]], r"pending\[0\].*depth"),
        (("pending",), [["a", 3, 1.0]], r"pending\[0\].*round"),
        (("pending",), [["a", 3, 10**400]], r"pending\[0\].*round"),
        (("pending",), [["b", 3, 2]], r"pending\[0\].*'b'.*closed"),
        (("pending",), {"a": 1}, "pending"),
        (("closed",), {"ids": ["b", "b"], "expired": []}, r"closed.*'b'.*twice"),
        (("closed",), {"ids": [["b"]], "expired": []}, r"closed.*string or an integer"),
        (("closed",), {"ids": ["b"], "expired": [1]}, r"closed.*expired"),
        (("closed",), {"ids": ["b"], "expired": [True]}, r"closed.*expired"),
        (("closed",), {"ids": ["b"], "expired": [0, 0]}, r"closed.*expired"),
        (("closed",), {"ids": ["b"]}, "closed"),
        (("closed",), ["b"], "closed"),
        (("counters", "applied"), True, "counters"),
        (("counters", "applied"), 10**400, "counters"),
        (("counters", "applied"), -1, "counters"),
        (("counters", "bogus"), 1, "counters"),
        (("policy", "stats", "decisions"), 10**400, "decisions"),
        (("format",), "uss-stream/pending-decisions/v0", "format"),
    ],
    ids=lambda value: repr(value)[:30],
)
def test_a_bad_document_is_rejected_naming_the_field_and_changes_nothing(path, value, message):
    book = _book()
    book.decide("x")
    book.decide("y")
    book.report("x", [1, 1, 1])
    before = book.state_dict()
    with pytest.raises(ValueError, match=message):
        book.load_state_dict(_with(path, value))
    assert book.state_dict() == before
    book.report("y", [1, 1])  # the book still works
    assert book.counters["applied"] == 2


def test_a_valid_document_round_trips_exactly():
    document = _saved()
    book = _book()
    book.load_state_dict(document)
    assert book.state_dict() == document
    book.report("a", [1, 1, 1])
    with pytest.raises(ValueError, match="already used"):
        book.decide("b")
