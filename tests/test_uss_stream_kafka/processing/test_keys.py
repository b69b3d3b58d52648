"""Keyed selection, where its logic lives: the key of an event, and the state records of a key."""

from __future__ import annotations

import json

import pytest

from uss_stream_kafka import InvalidEvent
from uss_stream_kafka.processing.keys import MAX_KEY_BYTES, KeySource
from uss_stream_kafka.runtime.checkpoint import (
    Checkpoint,
    KeyCheckpoint,
    checkpoint_key,
    key_record_key,
    split_record_key,
)

RECORD_KEY = KeySource.parse("record-key")
SITE = KeySource.parse("site")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (b"sensor-7", "sensor-7"),
        ("lyon/été".encode(), "lyon/été"),
        (b"x" * MAX_KEY_BYTES, "x" * MAX_KEY_BYTES),  # at the limit
    ],
)
def test_a_record_key_is_its_utf8_text(key, expected):
    assert RECORD_KEY.of_record_key(key) == expected


@pytest.mark.parametrize(
    ("key", "reason", "words"),
    [
        (None, "missing_key", "has no key"),
        (b"", "invalid_key", "is empty"),
        (b"x" * (MAX_KEY_BYTES + 1), "invalid_key", f"{MAX_KEY_BYTES + 1} bytes"),  # one past the limit
        (b"\xc3\x28", "invalid_key", "not UTF-8"),
    ],
)
def test_a_missing_or_unusable_record_key_is_a_dead_letter_reason(key, reason, words):
    with pytest.raises(InvalidEvent) as caught:
        RECORD_KEY.of_record_key(key)
    assert caught.value.reason == reason
    assert words in caught.value.detail and "--key-from record-key" in caught.value.detail


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"site": "lyon-2", "outputs": [1]}, "lyon-2"),
        ({"site": 42}, "42"),  # an integer is keyed by its decimal text: 42 and "42" are one key
        ({"site": "42"}, "42"),
        ({"site": -7}, "-7"),
        ({"site": "é" * (MAX_KEY_BYTES // 2)}, "é" * (MAX_KEY_BYTES // 2)),  # 256 UTF-8 bytes
    ],
)
def test_a_field_key_is_a_string_or_an_integer(event, expected):
    assert SITE.of_field(event) == expected


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({"device": "a"}, "missing_key"),
        ({"site": None}, "missing_key"),
        ([1, 2], "missing_key"),  # not an object: no field at all
        ({"site": True}, "invalid_key"),
        ({"site": 1.5}, "invalid_key"),
        ({"site": ["a"]}, "invalid_key"),
        ({"site": {"id": 1}}, "invalid_key"),
        ({"site": ""}, "invalid_key"),
        ({"site": "é" * (MAX_KEY_BYTES // 2) + "x"}, "invalid_key"),  # 257 bytes
        ({"site": json.loads('"\\ud800"')}, "invalid_key"),  # a lone surrogate
    ],
)
def test_a_missing_or_unusable_field_key_is_a_dead_letter_reason(event, reason):
    with pytest.raises(InvalidEvent) as caught:
        SITE.of_field(event)
    assert caught.value.reason == reason
    assert "--key-from site" in caught.value.detail


def test_key_from_parses_record_key_or_a_field_name():
    assert RECORD_KEY.field is None and RECORD_KEY.spec == "record-key"
    assert SITE.field == "site" and SITE.spec == "site"
    with pytest.raises(ValueError, match="--key-from"):
        KeySource.parse("")


@pytest.mark.parametrize("key", ["a", "site/7", "a/b/c/", "é", "0", "x" * MAX_KEY_BYTES])
def test_a_key_record_key_splits_back_into_topic_partition_and_key(key):
    assert split_record_key(key_record_key("events.v2", 11, key)) == ("events.v2", 11, key)


def test_a_partition_checkpoint_key_has_no_key_part():
    assert split_record_key(checkpoint_key("events", 3)) == ("events", 3, None)


@pytest.mark.parametrize(
    "record_key", [b"events", b"events/", b"events/x/k", b"/3/k", b"events/3/", b"\xff/3/k"]
)
def test_a_state_record_key_of_neither_form_is_refused(record_key):
    with pytest.raises(ValueError, match="neither"):
        split_record_key(record_key)


def test_a_key_checkpoint_round_trips_and_keeps_its_offset():
    saved = KeyCheckpoint("events", 2, "site/7", 900, {"rounds": 3}, "uss", 12.5)
    assert saved.record_key == b"events/2/site/7"
    assert KeyCheckpoint.from_record(saved.record_key, saved.to_bytes(), ("events", 2)) == saved


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"{", "not JSON"),
        (b'{"format": "uss-stream/kafka-checkpoint/v1", "offset": 1, "state": {}}', "format"),
        (b'{"format": "uss-stream/kafka-key-checkpoint/v1", "offset": -1, "state": {}}', "offset"),
        (b'{"format": "uss-stream/kafka-key-checkpoint/v1", "offset": 1, "state": []}', "state"),
        (b'{"format": "uss-stream/kafka-key-checkpoint/v1", "offset": 1, "offset": 2, "state": {}}', "twice"),
        (b'{"format": "uss-stream/kafka-key-checkpoint/v1", "offset": 1, "state": {"n": 9007199254740992}}',
         "2\\*\\*52"),
    ],
)  # fmt: skip
def test_invalid_key_checkpoints_are_named(value, message):
    with pytest.raises(ValueError, match=message):
        KeyCheckpoint.from_record(b"events/0/k", value)


def test_a_key_checkpoint_is_not_a_partition_checkpoint_and_back():
    saved = KeyCheckpoint("events", 0, "k", 1, {})
    with pytest.raises(ValueError):
        Checkpoint.from_record(saved.record_key, saved.to_bytes())
    partition = Checkpoint("events", 0, 1, {})
    with pytest.raises(ValueError, match="partition's checkpoint"):
        KeyCheckpoint.from_record(partition.key, partition.to_bytes())


BASE = {
    "bootstrap_servers": "b:9092",
    "input_topic": "i",
    "output_topic": "o",
    "dlq_topic": "d",
    "state_topic": "s",
    "group_id": "g",
    "stage_costs": "0,0.1",
}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"key_from": "site", "mode": "features", "cascade_factory": "m:f", "stage_costs": None},
            "outputs mode",
        ),
        ({"max_keys": 10}, "--max-keys .* needs --key-from"),
        ({"key_ttl": 10}, "--key-ttl .* needs --key-from"),
        ({"key_from": "id"}, "its own"),
        (
            {"key_from": "site", "value_format": "avro", "schema_registry_url": "http://r"},
            "--value-format json",
        ),
        ({"key_from": "record-key", "max_keys": 0}, "--max-keys .*>= 1"),
    ],
)
def test_key_settings_are_checked_together(settings, message):
    from uss_stream_kafka.cli.settings import KafkaSettings

    with pytest.raises(ValueError, match=message):
        KafkaSettings("run", **{**BASE, **settings})


def test_key_settings_that_fit():
    from uss_stream_kafka.cli.settings import KafkaSettings

    settings = KafkaSettings("run", **BASE, key_from="record-key", max_keys="1000", key_ttl=50)
    assert (settings.key_from, settings.max_keys, settings.key_ttl) == ("record-key", 1000, 50)
    registry = {"value_format": "avro", "schema_registry_url": "http://r"}
    assert KafkaSettings("run", **BASE, key_from="record-key", **registry).key_from == "record-key"
