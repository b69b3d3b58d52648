"""Avro writer schemas whose records could ask for unbounded memory are refused (no broker).

An Avro array is written as block counts and items; an item that takes zero bytes (``null``, an
empty ``fixed``, a record of such fields) lets a few bytes ask for any number of items, which the
decoder would build. A writer schema with such an array is refused: its records are dead letters
(``invalid_payload``). Items of any other type take a byte at least, so their count is bounded by
the record's size, and a block count beyond the bytes ends in an error, not an allocation.
"""

from __future__ import annotations

import json
import uuid

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema

from uss_stream_kafka.processing import formats
from uss_stream_kafka.processing.events import InvalidEvent
from uss_stream_kafka.processing.formats import PayloadFormat, unbounded_array


def zigzag(value: int) -> bytes:
    """Avro's long encoding (zigzag varint), written from the specification."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            return bytes(out + bytes([low]))
        out.append(low | 0x80)


def record(items: object, name: str = "E") -> dict:
    outputs = {"name": "outputs", "type": {"type": "array", "items": items}}
    return {"type": "record", "name": name, "fields": [{"name": "id", "type": "string"}, outputs]}


NULL_RECORD = {"type": "record", "name": "Z", "fields": [{"name": "n", "type": "null"}]}


@pytest.mark.parametrize(
    ("items", "refused"),
    [
        ("null", True),
        ({"type": "null"}, True),
        (NULL_RECORD, True),
        ({"type": "record", "name": "Y", "fields": []}, True),
        ({"type": "fixed", "name": "F0", "size": 0}, True),
        ({"type": "fixed", "name": "F1", "size": 1}, False),
        (
            {
                "type": "record",
                "name": "W",
                "fields": [{"name": "n", "type": "null"}, {"name": "b", "type": "boolean"}],
            },
            False,
        ),
        (["null", "long"], False),  # a union's branch index takes a byte
        ({"type": "enum", "name": "One", "symbols": ["a"]}, False),  # its index takes a byte
        ({"type": "array", "items": "long"}, False),  # an item's own count takes a byte
        ({"type": "map", "values": "null"}, False),  # a map's count and each key take a byte
        ("boolean", False),
        ("long", False),
        ("string", False),
        ({"type": "string", "logicalType": "uuid"}, False),
    ],
)
def test_an_array_is_refused_exactly_when_its_items_take_zero_bytes(items, refused):
    parsed = fastavro.parse_schema(record(items))
    assert unbounded_array(parsed) == ("E.outputs" if refused else None)


def test_nested_named_and_recursive_schemas_are_walked_to_their_arrays():
    nested = {"type": "record", "name": "N", "fields": [{"name": "inner", "type": record("null", "Inner")}]}
    assert unbounded_array(fastavro.parse_schema(nested)) == "N.inner.outputs"
    by_name = {"type": "record", "name": "R", "fields": [
        {"name": "first", "type": NULL_RECORD},
        {"name": "many", "type": {"type": "map", "values": {"type": "array", "items": "Z"}}}]}  # fmt: skip
    assert unbounded_array(fastavro.parse_schema(by_name)) == "R.many{}"
    linked = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]},
        {"name": "tags", "type": {"type": "array", "items": ["null", "Node"]}}]}  # fmt: skip
    assert unbounded_array(fastavro.parse_schema(linked)) is None  # ends, and nothing is unbounded
    deep = {"type": "array", "items": {"type": "array", "items": "null"}}
    assert unbounded_array(fastavro.parse_schema(deep)) == "value[]"


@pytest.fixture
def registered():
    """A codec on confluent-kafka's in-memory registry, and a function registering a writer schema."""
    url = f"mock://avro-bounds-{uuid.uuid4().hex}"
    payloads = PayloadFormat("avro", url)
    client = payloads.client()

    def register(schema: dict) -> int:
        return client.register_schema(
            f"events-value-{len(json.dumps(schema))}", Schema(json.dumps(schema), "AVRO")
        )

    yield payloads.outputs_codec(3, [0.0, 0.15, 0.35], "events", "decisions"), register
    formats._CLIENTS.pop((url, None), None)


@pytest.mark.parametrize("count", [3, 2 * 10**9])
def test_records_of_a_writer_schema_with_an_array_of_nulls_are_dead_letters(registered, count):
    """Refused by their schema before any is read: 13 bytes asking for two billion nulls, and the
    3 nulls of a well-formed record alike (the unrefused decoder built 2.4 GB for the first)."""
    codec, register = registered
    schema_id = register(record("null"))
    value = b"\x00" + schema_id.to_bytes(4, "big") + zigzag(1) + b"x" + zigzag(count) + zigzag(0)
    with pytest.raises(
        InvalidEvent, match=r"invalid_payload: writer schema \d+ is refused: its array E.outputs"
    ):
        codec.decode(value)
    # The next record of a good schema is decided as ever.
    good = register(record(["long", "string"], "G"))
    items = b"".join(zigzag(0) + zigzag(output) for output in (1, 0, 1))  # union branch 0 (long), value
    value = b"\x00" + good.to_bytes(4, "big") + zigzag(1) + b"y" + zigzag(3) + items + zigzag(0)
    assert codec.decode(value) == ("y", [1, 0, 1])


def test_a_block_count_beyond_the_records_bytes_ends_in_an_error_not_an_allocation(registered):
    codec, register = registered
    schema_id = register(record("long"))
    value = b"\x00" + schema_id.to_bytes(4, "big") + zigzag(1) + b"x" + zigzag(2 * 10**9) + zigzag(0)
    with pytest.raises(InvalidEvent, match="invalid_payload"):
        codec.decode(value)
