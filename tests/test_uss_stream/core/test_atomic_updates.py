"""Updates and state loads are all-or-nothing: a failure leaves the state exactly as it was.

Issue 16, items 7 and 8: ``DisagreementStats.record`` used to count ``queried`` before comparing
the outputs, so an output that cannot be compared (``pd.NA``) raised half way, a retry counted the
round twice, and the saved state was rejected by its own loader; ``SupervisedUCB.load_state_dict``
replaced the counts before validating ``errors``, and counts too large for a float (``10**400``)
loaded and crashed the next ``select()``.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uss_stream.core.schema import MAX_COUNT
from uss_stream.core.stats import DisagreementStats
from uss_stream.pending import PendingDecisions, RejectedReport
from uss_stream.policies import USSKLUCB, USSTS, USSUCB, FixedDepth, Hanawal2017WD, SupervisedUCB

# Outputs that pass the length check but cannot be compared with the other stages' outputs.
UNCOMPARABLE = [
    [1, pd.NA, 1],
    [pd.NA, 1, 1],
    [1, 1, np.array([1, 2])],
    [0, 1, pd.NA],  # the disagreement of stages 1-2 is counted first, then taken back
]
IDS = ["NA-second", "NA-first", "array-last", "NA-after-a-disagreement"]


def _reloads(stats: DisagreementStats) -> None:
    assert DisagreementStats.from_json(json.dumps(stats.to_dict(), allow_nan=False)) == stats


def assert_unchanged(actual: Any, before: Any, path: str = "state") -> None:
    """Every field of ``actual`` equals ``before``'s (a ``copy.deepcopy`` taken earlier), recursively.

    Compares the objects themselves, not their ``state_dict()``: a pending decision, a cache or a
    counter that a failed call touched shows up here even where the saved document does not hold it.
    """
    assert type(actual) is type(before), f"{path}: {type(actual).__name__} != {type(before).__name__}"
    if isinstance(before, np.ndarray):
        assert np.array_equal(actual, before, equal_nan=True), path
    elif isinstance(before, (list, tuple)):
        assert len(actual) == len(before), f"{path}: length {len(actual)} != {len(before)}"
        for i, (a, b) in enumerate(zip(actual, before)):
            assert_unchanged(a, b, f"{path}[{i}]")
    elif isinstance(before, dict):
        assert list(actual) == list(before), f"{path}: keys {list(actual)} != {list(before)}"
        for key in before:
            assert_unchanged(actual[key], before[key], f"{path}[{key!r}]")
    elif isinstance(before, float) and math.isnan(before):
        assert math.isnan(actual), path
    elif hasattr(before, "__dict__") or hasattr(type(before), "__slots__"):
        fields, now = _fields(before), _fields(actual)
        assert fields, f"{path}: no fields to compare"
        assert list(now) == list(fields), f"{path}: fields {list(now)} != {list(fields)}"
        for name, value in fields.items():
            assert_unchanged(now[name], value, f"{path}.{name}")
    else:
        assert actual == before, f"{path}: {actual!r} != {before!r}"


def _fields(value: Any) -> dict[str, Any]:
    slots = [name for cls in type(value).__mro__ for name in getattr(cls, "__slots__", ())]
    fields = {name: getattr(value, name) for name in slots if hasattr(value, name)}
    fields.update(getattr(value, "__dict__", {}))
    return fields


@pytest.mark.parametrize("discount", [None, 0.5])
@pytest.mark.parametrize("outputs", UNCOMPARABLE, ids=IDS)
def test_record_is_all_or_nothing(outputs, discount):
    stats = DisagreementStats(3, discount=discount)
    stats.decisions = 2
    stats.record([1, 0, 1])
    before = copy.deepcopy(stats)
    with pytest.raises(ValueError, match=r"outputs\[\d\]"):
        stats.record(outputs)
    assert_unchanged(stats, before)
    stats.record([1, 1, 1])  # the retry counts once
    expected = DisagreementStats(3, discount=discount)
    expected.decisions = 2
    expected.record([1, 0, 1])
    expected.record([1, 1, 1])
    assert stats == expected
    _reloads(stats)


class Poison:
    """An output whose comparison with anything raises (as ``pd.NA``'s truth value does)."""

    def __ne__(self, other):
        raise TypeError("poisoned comparison")

    __eq__ = __ne__
    __hash__ = object.__hash__


def _reference(rounds, k):
    """Plain counts by the definitions: n_j rounds with stage j queried, D_ij rounds with i, j differing."""
    queried = [sum(len(r) > j for r in rounds) for j in range(k)]
    disagreements = [
        [sum(len(r) > j and r[i] != r[j] for r in rounds) if i < j else 0 for j in range(k)] for i in range(k)
    ]
    return queried, disagreements


@given(st.lists(st.lists(st.sampled_from([0, 1, "a", "poison"]), min_size=1, max_size=4), max_size=12))
def test_record_takes_back_every_count_of_a_failed_round(rounds):
    stats = DisagreementStats(4)
    applied = []
    for row in rounds:
        outputs = [Poison() if value == "poison" else value for value in row]
        before = copy.deepcopy(stats)
        try:
            stats.record(outputs)
        except ValueError:
            assert "poison" in row and len(row) > 1
            assert_unchanged(stats, before)
            continue
        applied.append(outputs)
    assert (stats.queried, stats.disagreements) == _reference(applied, 4)


def test_record_refuses_more_outputs_than_stages_without_counting():
    stats = DisagreementStats(2)
    stats.decisions = 1
    before = copy.deepcopy(stats)
    with pytest.raises(ValueError, match=r"3 outputs.*2 stages"):
        stats.record([1, 1, 1])
    assert_unchanged(stats, before)


@pytest.mark.parametrize("outputs", UNCOMPARABLE, ids=IDS)
@pytest.mark.parametrize("policy_class", [USSUCB, Hanawal2017WD, USSKLUCB, USSTS])
def test_policy_update_with_uncomparable_outputs_keeps_state_and_decision(policy_class, outputs):
    # Free stages: no cost gap beats any bound, so every policy (USS-TS too) queries all 3 stages.
    policy = policy_class(stage_costs=[0.0, 0.0, 0.0])
    assert policy.select() == 3
    before = copy.deepcopy(policy)
    with pytest.raises(ValueError, match=r"outputs\[\d\]"):
        policy.update(outputs)
    assert_unchanged(policy, before)  # the counts, and the decision still pending
    policy.update([1, 1, 1])  # still pending; the retry counts once
    assert policy.stats.decisions == 1 and policy.stats.queried == [1, 1, 1]
    twin = policy_class(stage_costs=[0.0, 0.0, 0.0])
    twin.load_state_dict(json.loads(json.dumps(policy.state_dict())))
    assert twin.state_dict() == policy.state_dict()


@pytest.mark.parametrize("outputs", UNCOMPARABLE, ids=IDS)
def test_supervised_update_is_all_or_nothing(outputs):
    policy = SupervisedUCB(stage_costs=[0.0, 0.1, 0.2])
    policy.select()
    before = copy.deepcopy(policy)
    with pytest.raises(ValueError, match=r"outputs\[\d\]"):
        policy.update(outputs, label=1)
    assert_unchanged(policy, before)
    with pytest.raises(ValueError, match="label"):
        policy.update([1, 1, 1], label=pd.NA)
    assert_unchanged(policy, before)
    policy.update([1, 0, 1], label=1)
    assert policy.errors == [0, 1, 0] and policy.stats.queried == [1, 1, 1]


@pytest.mark.parametrize("outputs", UNCOMPARABLE, ids=IDS)
def test_pending_report_is_all_or_nothing(outputs):
    book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.1, 0.2]))
    book.decide("a")
    before = copy.deepcopy(book)
    with pytest.raises(RejectedReport) as caught:
        book.report("a", outputs)
    assert caught.value.reason == "invalid"
    assert book.counters["rejected_invalid"] == before.counters["rejected_invalid"] + 1
    before.counters["rejected_invalid"] += 1
    assert_unchanged(book, before)  # only the rejection is counted
    book.report("a", [1, 1, 1])  # still pending; the retry counts once
    assert book.policy.stats.queried == [1, 1, 1] and book.counters["applied"] == 1
    restored = PendingDecisions(USSUCB(stage_costs=[0.0, 0.1, 0.2]))
    restored.load_state_dict(json.loads(json.dumps(book.state_dict())))
    assert restored.state_dict() == book.state_dict()


@pytest.mark.parametrize(
    "outputs",
    [[[1]], [1, [1]], [{"a": 1}], [1, {1, 2}]],
    ids=["nested-list", "list-second", "object", "set"],
)
def test_unhashable_outputs_are_rejected_as_kafka_run_does(outputs):
    # `kafka run` dead-letters an output that is not a string, number or boolean; the library
    # (and so `orchestrate`, which reports through PendingDecisions) must not count it either.
    policy = USSUCB(stage_costs=[0.0, 0.1])
    policy.select()
    before = copy.deepcopy(policy)
    with pytest.raises(ValueError, match=r"outputs\[\d\]"):
        policy.update(outputs + [1] * (2 - len(outputs)))
    assert_unchanged(policy, before)
    book = PendingDecisions(USSUCB(stage_costs=[0.0, 0.1]))
    book.decide("a")
    with pytest.raises(RejectedReport) as caught:
        book.report("a", outputs)
    assert caught.value.reason == "invalid"
    assert book.policy.stats.queried == [0, 0] and book.pending == 1


# -- loading ----------------------------------------------------------------------------------------


def _trained(policy_class, **params):
    policy = policy_class(stage_costs=[0.0, 0.1, 0.2], **params)
    rows = [[1, 0, 1], [1, 1, 1], [0, 0, 1], [1, 1, 0]]
    for row in rows:
        depth = policy.select()
        if isinstance(policy, SupervisedUCB):
            policy.update(row[:depth], label=1)
        else:
            policy.update(row[:depth])
    return policy


def _set(document, path, value):
    document = copy.deepcopy(document)
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


TOO_LARGE = 10**400
BAD_COUNTS = [
    (("stats", "decisions"), TOO_LARGE, "decisions"),
    (("stats", "decisions"), MAX_COUNT + 1, "decisions"),
    (("stats", "decisions"), -1, "decisions"),
    (("stats", "decisions"), True, "decisions"),
    (("stats", "decisions"), 4.0, "decisions"),
    (("stats", "decisions"), math.nan, "decisions"),
    (("stats", "queried", 0), TOO_LARGE, r"queried\[0\]"),
    (("stats", "queried", 1), -1, r"queried\[1\]"),
    (("stats", "queried", 1), False, r"queried\[1\]"),
    (("stats", "queried", 2), math.inf, r"queried\[2\]"),
    (("stats", "queried", 2), "1", r"queried\[2\]"),
    (("stats", "queried"), [4, 4], "queried"),
    (("stats", "disagreements", 0, 1), TOO_LARGE, r"disagreements\[0\]\[1\]"),
    (("stats", "disagreements", 0, 2), math.nan, r"disagreements\[0\]\[2\]"),
    (("stats", "disagreements", 1), [0, 0], "disagreements"),
    (("stats", "disagreements"), [[0, 0, 0]], "disagreements"),
    (("stats", "n_stages"), TOO_LARGE, "n_stages"),
    (("stats", "n_stages"), 2, "queried|stages"),
    (("stats", "discount"), 0.5, "discount"),
    (("stats",), None, "JSON object"),
    (("policy",), "Other", "policy"),
]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    BAD_COUNTS,
    ids=[f"{'.'.join(map(str, path))}={str(value)[:12]}" for path, value, _ in BAD_COUNTS],
)
@pytest.mark.parametrize("policy_class", [USSUCB, Hanawal2017WD, USSKLUCB, USSTS, SupervisedUCB])
def test_a_rejected_state_names_the_field_and_changes_nothing(policy_class, path, value, message):
    policy = _trained(policy_class)
    document = policy.state_dict()
    target = policy_class(stage_costs=[0.0, 0.1, 0.2])
    depth = target.select()  # a pending decision survives a failed load
    before = copy.deepcopy(target)
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(_set(document, path, value))
    assert_unchanged(target, before)
    if isinstance(target, SupervisedUCB):
        target.update([1] * depth, label=1)
    else:
        target.update([1] * depth)
    assert target.stats.queried == [1] * depth + [0] * (3 - depth)
    target.load_state_dict(document)  # the valid document still loads
    assert target.state_dict() == document


@pytest.mark.parametrize(
    ("errors", "message"),
    [
        ([0, 0], r"errors"),
        ([0, 0, TOO_LARGE], r"errors\[2\]"),
        ([0, -1, 0], r"errors\[1\]"),
        ([0, 0, 1.0], r"errors\[2\]"),
        ([True, 0, 0], r"errors\[0\]"),
        ([0, 0, 99], r"errors\[2\]"),
        (None, "errors"),
    ],
    ids=["short", "huge", "negative", "float", "bool", "above-queried", "null"],
)
def test_supervised_validates_errors_before_replacing_the_counts(errors, message):
    document = {**_trained(SupervisedUCB).state_dict(), "errors": errors}
    target = _trained(SupervisedUCB)
    before = copy.deepcopy(target)
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(document)
    assert_unchanged(target, before)


@pytest.mark.parametrize(
    ("disagreement", "expected"),
    [(MAX_COUNT, 3), (0, 1)],
    ids=["every-pair-always-disagrees", "every-pair-always-agrees"],
)
@pytest.mark.parametrize("policy_class", [USSUCB, Hanawal2017WD, USSKLUCB, USSTS])
def test_loaded_counts_at_the_limit_still_decide(policy_class, disagreement, expected):
    # The largest counts a document may hold: the decision rule's float arithmetic must not overflow.
    # t = n_j = 2**53 and costs C = (0, 0.1, 0.3), so every bound sits on p̂ (the widths are
    # sqrt(log t / t) ~ 6e-8 or less, the KL level log(t / (3 n_j)) < 0 is 0): p̂ = 1 on every pair
    # means no stage beats a deeper one (depth 3); p̂ = 0 means stage 1 beats both (depth 1).
    # An overflow (inf or NaN bounds) fails one of the two: a NaN comparison beats nothing.
    document = USSUCB(stage_costs=[0.0, 0.1, 0.2]).state_dict()
    stats = document["stats"]
    stats.update(decisions=MAX_COUNT, queried=[MAX_COUNT] * 3)
    stats["disagreements"] = [[0, disagreement, disagreement], [0, 0, disagreement], [0, 0, 0]]
    policy = policy_class(stage_costs=[0.0, 0.1, 0.2])
    policy.load_state_dict(_set(document, ("policy",), policy_class.__name__))
    assert policy.select() == expected
    policy.update([1] * expected)
    assert policy.stats.decisions == MAX_COUNT + 1
    assert policy.stats.queried == [MAX_COUNT + 1] * expected + [MAX_COUNT] * (3 - expected)
    assert policy.stats.disagreements == stats["disagreements"]


def test_fixed_depth_loads_its_counts_too():
    policy = FixedDepth(2, stage_costs=[0.0, 0.1, 0.2])
    with pytest.raises(ValueError, match="decisions"):
        policy.load_state_dict(_set(policy.state_dict(), ("stats", "decisions"), TOO_LARGE))
