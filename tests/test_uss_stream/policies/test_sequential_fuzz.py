"""Fuzzing SequentialKLUCB's state loader with arbitrary JSON,
as tests/test_uss_stream/core/test_state_fuzz.py does.

The loader either raises ``ValueError`` and changes nothing, or loads a state that then works
(events step through without raising) and saves as strict JSON that loads back to the same state.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_uss_stream.fuzzing import (
    SETTINGS,
    assert_from_json_refuses_or_round_trips,
    documents_near,
    json_values,
    loads_or_refuses,
)
from uss_stream.core.context_stats import ContextStats
from uss_stream.policies import SequentialKLUCB

COSTS = [0.0, 0.1, 0.2]
ROWS = [([1, 0, 1], [0.6, 0.9, 0.99]), ([1, 1, 1], [0.99, 0.7, 0.8]), (["a", "a", 1], [0.5, None, 1.0])]


def _event(policy, k: int) -> None:
    outputs, confidences = ROWS[k % len(ROWS)]
    policy.begin()
    j = 0
    while policy.step(outputs[j], confidences[j]):
        j += 1


def _trained(discount):
    policy = SequentialKLUCB(COSTS, n_bins=2, discount=discount)
    for k in range(40):  # past the first regroup (16 events)
        _event(policy, k)
    return policy


def _check(document, discount) -> None:
    policy = _trained(discount)
    if loads_or_refuses(policy, document, SequentialKLUCB(COSTS, n_bins=2, discount=discount)):
        for k in range(5):
            _event(policy, k)
        json.dumps(policy.state_dict(), allow_nan=False)


@pytest.mark.parametrize("discount", [None, 0.9])
@SETTINGS
@given(document=json_values)
def test_loader_takes_arbitrary_json(discount, document):
    _check(document, discount)


@pytest.mark.parametrize("discount", [None, 0.9])
@SETTINGS
@given(data=st.data())
def test_loader_takes_near_valid_documents(discount, data):
    _check(data.draw(documents_near(_trained(discount).state_dict())), discount)


@SETTINGS
@given(text=st.text() | st.binary())
def test_context_stats_from_json_takes_arbitrary_text(text):
    assert_from_json_refuses_or_round_trips(ContextStats.from_json, text)


def test_record_is_all_or_nothing():
    class Unequal:
        def __ne__(self, other):
            raise TypeError("cannot compare")

    stats = ContextStats(3)
    stats.record(["a", "a", "a"], [0.9, 0.9, 0.9])
    before = stats.to_dict()
    with pytest.raises(TypeError):
        stats.record(["a", Unequal(), "a"], [0.9, 0.9, 0.9])
    with pytest.raises(ValueError, match="cells"):
        stats.record(["a", "b"], cells=[1, 99])
    with pytest.raises(ValueError, match="outputs must hold"):
        stats.record(["a"] * 4, [0.9] * 4)
    assert stats.to_dict() == before
