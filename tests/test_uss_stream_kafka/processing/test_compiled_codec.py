"""Outputs mode through the compiled kernels: the same decision records, byte for byte, as the Python
codec, and every value the kernels cannot be sure of is left to it.

The expectation is always the pure path (``USS_STREAM_PURE=1``: the Python codec and batch decider,
themselves tested against ``json.loads`` and the policies' loop); a missing kernel fails these tests
in CI (``tests/decision_paths.py``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.decision_paths import on_path, require_kernels
from uss_stream.core import compiled
from uss_stream.policies.kernel import Counts
from uss_stream_kafka import OutputsProcessor
from uss_stream_kafka.processing.events import OutputsCodec

COSTS = [0.0, 0.15, 0.2]
SPECS = [
    "uss-kl-ucb",
    "uss-ucb:alpha=0.51",
    "alg2",
    "fixed:depth=2",
    "uss-ts:seed=1",
    "uss-ucb:discount=0.99",
]

#: Values the kernels leave to the Python codec (each alone makes a batch the Python path's).
NOT_PLAIN = [
    None,
    b'{"id": "e1", "outputs": [1, 0]}',
    b'{"id": "e1", "outputs": [1, 0, 1, 1]}',
    b'{"id": "e1", "outputs": [1, 0, 256]}',
    b'{"id": "e1", "outputs": [1, 0, 01]}',
    b'{"id": "e1", "outputs": [1, 0, 1.0]}',
    b'{"id": "e1", "outputs": [1, 0, -1]}',
    b'{"id": "e1", "outputs": [1, 0, true]}',
    b'{"id": "e1", "outputs": [1, 0, "a"]}',
    b'{"id": "e1", "outputs": [1, 0, NaN]}',
    b'{"id": "e1", "outputs": [1, 0, null]}',
    b'{"id": "e\\u0031", "outputs": [1, 0, 1]}',
    b'{"id": "tab\\there", "outputs": [1, 0, 1]}',
    b'{"id": -0, "outputs": [1, 0, 1]}',
    b'{"id": 1e3, "outputs": [1, 0, 1]}',
    b'{"id": 007, "outputs": [1, 0, 1]}',
    b'{"id": 1234567890123456789, "outputs": [1, 0, 1]}',
    b'{"id": true, "outputs": [1, 0, 1]}',
    b'{"id": "a", "id": "b", "outputs": [1, 0, 1]}',
    b'{"id": "a", "outputs": [1, 0, 1], "outputs": [0, 0, 0]}',
    b'{"id": "a", "outputs": [1, 0, 1], "x": 1}',
    b'{"outputs": [1, 0, 1]}',
    b'{"id": "a"}',
    b'{"id": "a", "outputs": [1, 0, 1]} x',
    b'{"id": "a", "outputs": [1, 0, 1],}',
    '{"id": "é", "outputs": [1, 0, 1]}'.encode(),
    b'{"id": "del\x7f", "outputs": [1, 0, 1]}',
    b"[1, 0, 1]",
    b"",
    b"{}",
]


@pytest.fixture
def kernels():
    require_kernels()
    return compiled._load()


def _decide(kernels, values):
    counts = Counts.zeros(3, 1, discount=None)
    return kernels.decide_outputs(
        values,
        3,
        1 << 20,
        OutputsCodec(3, [0.0, 0.15, 0.35]).encoded_costs,
        "kl",
        (1.0, False, False),
        [0.0, 0.15, 0.35],
        counts.values,
        counts.rounds,
    )


@pytest.mark.parametrize("value", NOT_PLAIN, ids=range(len(NOT_PLAIN)))
def test_a_value_that_is_not_a_plain_event_leaves_its_batch_to_python(kernels, value):
    plain = b'{"id": "a", "outputs": [1, 0, 1]}'
    assert _decide(kernels, [plain]) is not None
    assert _decide(kernels, [plain, value, plain]) is None


def test_the_plain_events_are_read_as_json_loads_reads_them(kernels):
    values = [
        b'{"id": "e 1!", "outputs": [1, 0, 1]}',
        b'{"outputs":[255,0,7],"id":-12}',
        b' {"id" : 0 ,\n"outputs" : [ 1 , 2 , 3 ] }\r\n',
        b'{"id": "", "outputs": [0, 0, 0]}',
        b'{"id": 123456789012345678, "outputs": [9, 9, 9]}',
    ]
    payloads, depths = _decide(kernels, values)
    assert depths == [3, 3, 3, 3, 3]  # the first rounds query every stage
    for value, payload in zip(values, payloads):
        event = json.loads(value)
        assert payload == OutputsCodec(3, [0.0, 0.15, 0.35]).encode(event["id"], 3, event["outputs"][2])


def _value(event_id, outputs, draw_layout):
    """One event as JSON, laid out as ``draw_layout`` says (separators, key order, whitespace)."""
    separators, reverse, padding = draw_layout
    document = {"outputs": outputs, "id": event_id} if reverse else {"id": event_id, "outputs": outputs}
    return (padding + json.dumps(document, separators=separators) + padding).encode()


layouts = st.tuples(
    st.sampled_from([(", ", ": "), (",", ":"), (" ,\n", " :\t")]),
    st.booleans(),
    st.sampled_from(["", " ", "\n", "\r\n\t "]),
)
plain_ids = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'), max_size=12
) | st.integers(-(10**18) + 1, 10**18 - 1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(
        st.tuples(plain_ids, st.lists(st.integers(0, 255), min_size=3, max_size=3), layouts),
        min_size=1,
        max_size=60,
    ),
    stream_seed=st.integers(0, 10**6),
    spec=st.sampled_from(SPECS),
    repeat=st.integers(1, 40),
    oddity=st.none() | st.sampled_from(NOT_PLAIN),
)
def test_both_paths_write_the_same_records_and_learn_the_same_counts(
    events, stream_seed, spec, repeat, oddity
):
    """Batches of plain events (any ids, labels, layouts), a long labelled stream so that the policy
    settles, optionally one value the kernels leave to Python: the records, depths, rejections and
    the learned state are those of the Python path."""
    require_kernels()
    rng = np.random.default_rng(stream_seed)
    truth = rng.integers(0, 2, 2_000)
    stream = np.stack([truth ^ (rng.random(2_000) < 0.2), truth ^ (rng.random(2_000) < 0.1), truth], 1)
    warm = [json.dumps({"id": i, "outputs": row}).encode() for i, row in enumerate(stream.tolist())]
    batch = [_value(event_id, outputs, layout) for event_id, outputs, layout in events] * repeat
    if oddity is not None:
        batch.insert(len(batch) // 2, oddity)
    results = {}
    for path in ("pure", "compiled"):
        learner = OutputsProcessor(COSTS, policy=spec).new_learner()
        with on_path(path):
            first = learner.process_batch(warm, 1 << 20)
            second = learner.process_batch(batch, 1 << 20)
        results[path] = (first.payloads, first.depths, second.payloads, second.depths,
                         [str(e) for e in second.errors], learner.state_dict())  # fmt: skip
    assert results["compiled"] == results["pure"]
