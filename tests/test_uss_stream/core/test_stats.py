"""DisagreementStats: counts, merge algebra, JSON round trip, validation of loaded state."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uss_stream.core.stats import DisagreementStats

K = 3
rounds = st.lists(
    st.integers(1, K).flatmap(lambda d: st.lists(st.sampled_from(["a", "b", 0]), min_size=d, max_size=d)),
    max_size=30,
)


def stats_of(stream):
    stats = DisagreementStats(K)
    for outputs in stream:
        stats.decisions += 1
        stats.record(outputs)
    return stats


def test_record_counts_by_hand():
    stats = stats_of([[1, 0, 1], [1, 1], [0]])
    assert stats.decisions == 3
    assert stats.queried == [3, 2, 1]
    # (1,0,1): D12, D23; (1,1): nothing.
    assert stats.disagreements == [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    assert stats.disagreement_rate(0, 1) == 0.5
    assert stats.disagreement_rate(1, 2) == 1.0


@given(rounds, rounds)
def test_merge_equals_union_and_commutes(a, b):
    assert stats_of(a).merge(stats_of(b)) == stats_of(a + b)
    assert stats_of(a).merge(stats_of(b)) == stats_of(b).merge(stats_of(a))


@given(rounds, rounds, rounds)
def test_merge_is_associative(a, b, c):
    sa, sb, sc = stats_of(a), stats_of(b), stats_of(c)
    assert sa.merge(sb).merge(sc) == sa.merge(sb.merge(sc))


@given(rounds)
def test_json_round_trip_is_lossless_and_consistent(stream):
    stats = stats_of(stream)
    loaded = DisagreementStats.from_json(json.dumps(stats.to_dict()))
    assert loaded == stats
    # Consistency the loader enforces: n_j non-increasing, D_ij <= n_j, n_1 <= decisions.
    assert all(x >= y for x, y in zip(stats.queried, stats.queried[1:]))
    assert all(stats.disagreements[i][j] <= stats.queried[j] for i in range(K) for j in range(i + 1, K))
    assert stats.queried[0] <= stats.decisions


def _document(**changes):
    document = stats_of([[1, 0, 1], [1, 1]]).to_dict()
    document.update(changes)
    return document


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"queried": [2, -1, 0]}, r"queried\[1\]"),
        ({"queried": [2, 2]}, "list of 3"),
        ({"disagreements": [[0, 5, 0], [0, 0, 1], [0, 0, 0]]}, r"disagreements\[0\]\[1\]'=5 exceeds"),
        ({"disagreements": [[0, 1], [0, 0]]}, "3x3"),
        ({"disagreements": [[0, 1, 0], [1, 0, 1], [0, 0, 0]]}, "only pairs i < j"),
        ({"queried": [2, 2, 3]}, "non-increasing"),
        ({"decisions": 1}, "exceeds 'decisions'"),
        ({"decisions": 2.5}, "decisions"),
        ({"format": "other"}, "format"),
    ],
)
def test_malformed_state_is_rejected_with_the_reason(changes, message):
    with pytest.raises(ValueError, match=message):
        DisagreementStats.from_dict(_document(**changes))


def test_invalid_json_and_missing_fields():
    with pytest.raises(ValueError, match="not valid JSON"):
        DisagreementStats.from_json("{nope")
    document = _document()
    del document["queried"]
    with pytest.raises(ValueError, match="lacks field"):
        DisagreementStats.from_dict(document)


def test_merge_needs_same_shape():
    with pytest.raises(ValueError, match="cannot merge"):
        DisagreementStats(2).merge(DisagreementStats(3))


@given(rounds, rounds)
def test_subtract_takes_back_a_merged_stream(a, b):
    first, second = stats_of(a), stats_of(b)
    assert first.merge(second).subtract(second) == first
    assert first.merge(second).subtract(first) == second


def test_subtract_refuses_what_is_not_part_of_the_counts():
    small, large = stats_of([[1, 0, 1]]), stats_of([[1, 0, 1], [0, 0, 1]])
    with pytest.raises(ValueError, match="decisions would be -1"):
        small.subtract(large)
    with pytest.raises(ValueError, match="only plain counts"):
        DisagreementStats(3, discount=0.5).subtract(DisagreementStats(3, discount=0.5))
