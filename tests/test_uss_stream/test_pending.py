"""Pending decisions: counts equal the reports applied, t counts decisions, bad reports are counted."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from uss_stream.core.stats import DisagreementStats
from uss_stream.pending import PendingDecisions, RejectedReport
from uss_stream.policies import USSUCB


def test_shuffled_reports_give_exactly_the_counts_of_what_was_applied():
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 2, 2000)
    outputs = np.stack([truth ^ (rng.random(2000) < p) for p in (0.3, 0.1, 0.05)], axis=1).tolist()
    book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.15, 0.2]))
    depths = {f"e{k}": book.decide(f"e{k}") for k in range(2000)}
    order = list(depths)
    random.Random(1).shuffle(order)
    expected = DisagreementStats(3)
    expected.decisions = 2000
    for decision_id in order[20:]:  # the first 20 are never reported
        row = outputs[int(decision_id[1:])][: depths[decision_id]]
        book.report(decision_id, row)
        expected.record(row)
    assert book.policy.stats == expected
    assert book.pending == 20 and book.counters["applied"] == 1980
    # With no report before any decision, every decision saw an empty state: t grew, counts did not.
    assert set(depths.values()) == {3}


def test_round_counter_counts_decisions_not_reports():
    # Same reports, but decided in between: t = 3 at the third decision even though only one report is in.
    book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.9, 0.05]))
    assert book.decide(1) == 3
    book.report(1, [1, 1, 1])
    assert book.decide(2) == 1  # t=2, n=1: sqrt(0.51 ln 2) = 0.59 < 0.9 (as in the synchronous case)
    assert book.decide(3) == 1  # t=3, n=1: sqrt(0.51 ln 3) = 0.75 < 0.9
    assert book.decide(4) == 1  # t=4: 0.84 < 0.9
    assert book.decide(5) == 3  # t=5: 0.906 > 0.9: exploration resumes although no report came in
    assert book.policy.stats.decisions == 5 and book.policy.stats.queried == [1, 1, 1]


@pytest.mark.parametrize(
    ("decision_id", "outputs", "reason"),
    [
        ("nope", [1], "unknown"),
        ("a", [1, 1, 1, 1], "too_many_outputs"),
        ("a", [1, None], "invalid"),
        ("a", [], "invalid"),
        ("a", 5, "invalid"),
    ],
)
def test_rejected_reports_are_counted_and_not_applied(decision_id, outputs, reason):
    book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.1, 0.2]))
    book.decide("a")
    before = book.policy.stats.to_dict()
    with pytest.raises(RejectedReport) as caught:
        book.report(decision_id, outputs)
    assert caught.value.reason == reason
    assert book.counters[f"rejected_{reason}"] == 1
    assert book.policy.stats.to_dict() == before
    book.report("a", [0, 0, 0])  # still pending, still answerable
    assert book.counters["applied"] == 1


def test_duplicate_and_expired_reports():
    now = [0.0]
    book = PendingDecisions(
        USSUCB(stage_costs=[0.0, 0.1]), max_age_decisions=3, max_age_seconds=10.0, clock=lambda: now[0]
    )
    book.decide("a")
    book.report("a", [1, 0])
    with pytest.raises(RejectedReport, match="already reported"):
        book.report("a", [1, 0])
    book.decide("b")  # t = 2
    for k in range(3):
        book.decide(f"c{k}")  # t = 3, 4, 5: at the 5th decision "b" is 3 decisions old
    assert book.counters["expired"] == 1
    with pytest.raises(RejectedReport) as caught:
        book.report("b", [1])
    assert caught.value.reason == "expired"
    now[0] = 10.0
    assert book.expire() == ["c0", "c1", "c2"]
    assert book.counters == {
        "decided": 5,
        "applied": 1,
        "expired": 4,
        "rejected_unknown": 0,
        "rejected_duplicate": 1,
        "rejected_expired": 1,
        "rejected_too_many_outputs": 0,
        "rejected_invalid": 0,
    }


def test_state_round_trip_through_json():
    book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.1, 0.2]))
    for k in range(5):
        book.decide(k)
    book.report(3, [1, 0, 1])
    document = json.loads(json.dumps(book.state_dict()))
    restored = PendingDecisions(USSUCB(stage_costs=[0.0, 0.1, 0.2]))
    restored.load_state_dict(document)
    assert restored.pending == 4 and restored.depth_of(0) == 3
    restored.report(0, [1, 1, 1])
    assert restored.policy.stats.queried == [2, 2, 2]
    with pytest.raises(ValueError, match="depth"):
        restored.load_state_dict({**document, "pending": [[9, 7, 1]]})


def test_ids_are_single_use():
    book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.1]))
    book.decide("x")
    with pytest.raises(ValueError, match="already used"):
        book.decide("x")


@pytest.mark.parametrize(
    ("outputs", "label", "applied"),
    [
        ([1, 0], "1", False),
        ([1, 0], True, False),
        (["cat", "dog"], 1, False),
        ([1, 0], 1, True),
        ([1, 0], 0.0, True),  # a JSON number, as the outputs
    ],
)
def test_a_label_of_another_json_type_than_the_outputs_is_refused_as_invalid(outputs, label, applied):
    from uss_stream.policies import AuditedUSS

    book = PendingDecisions(AuditedUSS(stage_costs=[0.0, 0.5]))
    book.decide("e1")
    book.report("e1", outputs)  # the stages disagree: the label is asked for
    assert book.label_requested("e1")
    if applied:
        book.report_label("e1", label)
        assert book.label_counters["applied"] == 1
        return
    before = book.policy.state_dict()
    with pytest.raises(RejectedReport, match="could never equal one") as caught:
        book.report_label("e1", label)
    assert caught.value.reason == "invalid" and book.label_counters["applied"] == 0
    assert book.policy.state_dict() == before
    assert book.label_requested("e1")  # still awaited: the right label can still come
