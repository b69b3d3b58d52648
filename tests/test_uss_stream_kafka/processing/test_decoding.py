"""Decoding, validation and dead-letter formatting, without a broker."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uss_stream_kafka import REASONS, DeadLetter, InvalidEvent, OutputsProcessor
from uss_stream_kafka.processing.events import FeaturesCodec, OutputsCodec, _parse
from uss_stream_kafka.processing.formats import PayloadFormat

CODEC = OutputsCodec(3, [0.0, 0.15, 0.35])

#: One malformed input per dead-letter reason of outputs mode, and the reason it must get.
MALFORMED = [
    (b"\xff\xfe not utf-8", "invalid_json"),
    (b'{"id": "e1", "outputs": [1, 0, 1]', "invalid_json"),
    (b"", "invalid_json"),
    (None, "invalid_json"),
    (b'{"outputs": [1, 0, 1]}', "missing_field"),
    (b'{"id": "e1"}', "missing_field"),
    (b'{"id": "e1", "outputs": null}', "missing_field"),
    (b"[1, 0, 1]", "wrong_type"),
    (b'{"id": ["e1"], "outputs": [1, 0, 1]}', "wrong_type"),
    (b'{"id": true, "outputs": [1, 0, 1]}', "wrong_type"),
    (b'{"id": "e1", "outputs": "1,0,1"}', "wrong_type"),
    (b'{"id": "e1", "outputs": [1, {"a": 0}, 1]}', "wrong_type"),
    (b'{"id": "e1", "outputs": [1, Infinity, 1]}', "wrong_type"),
    (b'{"id": "e1", "outputs": [1, 0]}', "wrong_output_count"),
    (b'{"id": "e1", "outputs": [1, 0, 1, 1]}', "wrong_output_count"),
    (b'{"id": "e1", "outputs": [1, null, 1]}', "missing_output"),
    (b'{"id": "e1", "outputs": [1, 0, NaN]}', "missing_output"),
]


@pytest.mark.parametrize(("value", "reason"), MALFORMED)
def test_malformed_events_are_rejected_with_their_reason(value, reason):
    with pytest.raises(InvalidEvent) as caught:
        CODEC.decode(value)
    assert caught.value.reason == reason
    assert caught.value.detail


def test_every_reason_of_outputs_mode_is_exercised():
    orchestration = {r for r in REASONS if r == "duplicate_request" or r.startswith("report_")}
    assert {reason for _, reason in MALFORMED} == set(REASONS) - {
        "oversize",
        "processing_error",
        "undecodable_batch",  # a whole fetched batch, not an event: see test_compression.py
        "invalid_payload",  # Schema Registry formats: see test_registry.py
        "unknown_schema",
        "out_of_range",  # features mode's guard: see test_feature_guard.py
        "outlier",
    } - orchestration


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b'{"id": "e1", "outputs": [1, 0, 1]}', ("e1", [1, 0, 1])),
        (b'  {"outputs": ["cat", "dog", "dog"], "id": 7}\n', (7, ["cat", "dog", "dog"])),
        (b'{"id": "e", "outputs": [true, 0.5, -3], "extra": {"kept": "out"}}', ("e", [True, 0.5, -3])),
        ('{"id": "é", "outputs": [1, 1, 1]}'.encode("utf-16"), ("é", [1, 1, 1])),
    ],
)
def test_valid_events_decode_like_json_loads(value, expected):
    assert CODEC.decode(value) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=40),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=8,
        ).map(lambda doc: json.dumps(doc).encode()),
    )
)
def test_fast_parse_agrees_with_json_loads(value):
    try:
        expected = json.loads(value)
    except ValueError:
        with pytest.raises(InvalidEvent) as caught:
            _parse(value)
        assert caught.value.reason == "invalid_json"
    else:
        assert _parse(value) == expected


@pytest.mark.parametrize(
    ("event_id", "prediction", "expected"),
    [
        ("e1", 0, b'{"id":"e1","depth":2,"prediction":0,"cost":0.15}'),
        (17, "dog", b'{"id":17,"depth":2,"prediction":"dog","cost":0.15}'),
        ('q"\n\u00e9', True, b'{"id":"q\\"\\n\\u00e9","depth":2,"prediction":true,"cost":0.15}'),
        ("x", 1.5, b'{"id":"x","depth":2,"prediction":1.5,"cost":0.15}'),
    ],
)
def test_decisions_are_compact_json(event_id, prediction, expected):
    encoded = CODEC.encode(event_id, 2, prediction)
    assert encoded == expected
    assert json.loads(encoded) == {"id": event_id, "depth": 2, "prediction": prediction, "cost": 0.15}


def test_equal_labels_of_different_types_encode_differently():
    # 1, 1.0 and True are equal in Python (and share nothing in the encoder's cache).
    assert [CODEC.encode("e", 1, label) for label in (1, 1.0, True)] == [
        b'{"id":"e","depth":1,"prediction":1,"cost":0.0}',
        b'{"id":"e","depth":1,"prediction":1.0,"cost":0.0}',
        b'{"id":"e","depth":1,"prediction":true,"cost":0.0}',
    ]


def test_a_rejected_event_leaves_the_learner_untouched():
    learner = OutputsProcessor([0, 0.15, 0.2]).new_learner()
    learner.process(b'{"id": 1, "outputs": [1, 0, 1]}')
    before = learner.state_dict()
    result = learner.process_batch([value for value, _ in MALFORMED], max_bytes=1 << 20)
    assert [error.reason for error in result.errors] == [reason for _, reason in MALFORMED]
    assert result.payloads == [None] * len(MALFORMED)
    assert result.depths == [0] * len(MALFORMED)
    assert learner.state_dict() == before


def test_oversize_values_are_rejected_before_decoding():
    learner = OutputsProcessor([0, 0.15, 0.2]).new_learner()
    value = json.dumps({"id": "big", "outputs": [1, 0, 1], "pad": "x" * 100}).encode()
    result = learner.process_batch([value], max_bytes=64)
    assert result.errors[0].reason == "oversize"
    assert learner.state_dict()["stats"]["decisions"] == 0


def test_features_codec_rejects_bad_features_and_labels():
    codec = FeaturesCodec()
    for value, reason in [
        (b'{"id": 1}', "missing_field"),
        (b'{"id": 1, "features": {"a": [1]}}', "wrong_type"),
        (b'{"id": 1, "features": {"a": NaN}}', "wrong_type"),
    ]:
        with pytest.raises(InvalidEvent) as caught:
            codec.decode(value)
        assert caught.value.reason == reason
    with pytest.raises(InvalidEvent) as caught:
        codec.decode_label(b'{"id": 1, "features": {"a": 1}}')
    assert caught.value.reason == "missing_field"
    with pytest.raises(InvalidEvent) as caught:
        codec.decode_label(b'{"id": 1, "features": {"a": 1}, "label": null}')
    assert caught.value.reason == "missing_field"


def test_dead_letter_round_trip_keeps_the_original_bytes_headers_and_source():
    letter = DeadLetter(
        reason="wrong_type",
        error="event must be a JSON object, got array",
        topic="events",
        partition=2,
        offset=41,
        timestamp=1_700_000_000_000,
        key=b"\x00key",
        value=b"\xff[1, 0, 1]",
        headers=(("trace", b"\x01\x02"),),
    )
    key, value, headers = letter.to_record(max_value_bytes=1024)
    assert key == b"\x00key"
    assert dict(headers) == {
        "uss.reason": b"wrong_type",
        "uss.source.topic": b"events",
        "uss.source.partition": b"2",
        "uss.source.offset": b"41",
    }
    document = json.loads(value)
    assert document["source"] == {
        "topic": "events",
        "partition": 2,
        "offset": 41,
        "timestamp": 1_700_000_000_000,
    }
    assert DeadLetter.from_record(value) == letter


def test_dead_letter_of_a_huge_value_is_truncated_but_says_so():
    letter = DeadLetter("oversize", "too big", "t", 0, 5, None, None, b"x" * 10_000)
    _, value, _ = letter.to_record(max_value_bytes=100)
    restored = DeadLetter.from_record(value)
    assert restored.value == b"x" * 100
    assert (restored.value_size, restored.value_truncated) == (10_000, True)
    assert len(value) < 400


def test_dead_letter_of_a_null_value():
    letter = DeadLetter("invalid_json", "record has no value (null)", "t", 0, 5, None, b"k", None)
    restored = DeadLetter.from_record(letter.to_record(16)[1])
    assert (restored.value, restored.value_size, restored.key) == (None, None, b"k")


def test_unknown_reasons_are_refused():
    with pytest.raises(ValueError, match="unknown dead-letter reason"):
        DeadLetter("bad", "x", "t", 0, 0, None, None, b"")
    with pytest.raises(ValueError, match="unknown dead-letter reason"):
        InvalidEvent("bad", "x")


def test_nan_never_reaches_the_output():
    with pytest.raises(InvalidEvent):
        CODEC.decode(b'{"id": "e", "outputs": [NaN, NaN, NaN]}')
    assert not math.isnan(json.loads(CODEC.encode("e", 3, 0.0))["cost"])


def test_registry_payloads_of_the_json_format_are_the_json_codecs():
    assert type(PayloadFormat().outputs_codec(3, [0.0, 0.15, 0.35], "i", "o")) is OutputsCodec
