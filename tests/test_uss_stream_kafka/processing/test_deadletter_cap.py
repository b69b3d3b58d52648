"""The dead-letter cap at and around its limit: a dead letter that fits is sent whole, one byte more is cut.

``DeadLetter.to_record(max_value_bytes, max_record_bytes)`` keeps the whole record (key, value,
headers) and 128 bytes of framing within ``max_record_bytes``; what does not fit is cut in a fixed
order: the input's headers, the value copy, the error text (to ``MAX_ERROR_CHARS``), a key longer
than a sixteenth of the limit. The fuzz test (``test_fuzz_parsers.py``) draws small records; these
are at the limit, one byte over it, and far over it (a 100 KB value, an 800 KB header, a 6 KB
error, a 3 KB key). The sizes expected are those of the uncapped record, measured here.
"""

from __future__ import annotations

import pytest

from uss_stream_kafka import DeadLetter
from uss_stream_kafka.clients.limits import headers_bytes
from uss_stream_kafka.processing.deadletter import MAX_ERROR_CHARS

FRAMING = 128


def letter(
    value: bytes | None = b"v" * 2_000,
    headers: tuple[tuple[str, bytes], ...] = (),
    key: bytes | None = b"key",
    error: str = "value is not UTF-8 JSON",
) -> DeadLetter:
    return DeadLetter("invalid_json", error, "events", 3, 17, 1_700_000_000_000, key, value, headers)


def record_size(record: tuple[bytes | None, bytes, list[tuple[str, bytes]]]) -> int:
    """The record's bytes as the broker counts them against its limit (``clients/limits.py``)."""
    key, value, headers = record
    return len(key or b"") + len(value) + headers_bytes(headers)


def uncapped_size(dead: DeadLetter) -> int:
    """The bytes the dead letter's record takes, framing included, when nothing is cut."""
    return record_size(dead.to_record(1 << 30)) + FRAMING


CASES = {
    "value": letter(),
    "value and headers": letter(headers=(("traceparent", b"t" * 55), ("lane", b"2" * 300))),
    "null value, long key": letter(value=None, key=b"k" * 900),
}


@pytest.mark.parametrize("dead", CASES.values(), ids=CASES.keys())
def test_a_dead_letter_exactly_at_the_limit_is_sent_whole(dead):
    limit = uncapped_size(dead)
    record = dead.to_record(1 << 30, limit)
    assert record == dead.to_record(1 << 30)
    assert DeadLetter.from_record(record[1]) == dead


@pytest.mark.parametrize("dead", CASES.values(), ids=CASES.keys())
def test_one_byte_over_the_limit_something_is_cut_and_the_record_fits(dead):
    limit = uncapped_size(dead) - 1
    record = dead.to_record(1 << 30, limit)
    assert record_size(record) + FRAMING <= limit
    restored = DeadLetter.from_record(record[1])
    assert restored != dead
    assert (restored.reason, restored.topic, restored.partition, restored.offset) == (
        "invalid_json",
        "events",
        3,
        17,
    )
    assert restored.value_size == dead.value_size and restored.headers_size == dead.headers_size
    cut = (restored.headers_truncated, restored.value_truncated, restored.key_truncated)
    assert any(cut)


def test_the_input_s_headers_are_cut_before_the_value():
    """A 2 KB value and a 3 KB header over a limit that the value alone fits: the value stays whole."""
    dead = letter(headers=(("tracestate", b"s" * 3_000), ("lane", b"2")))
    alone = uncapped_size(letter())
    restored = DeadLetter.from_record(dead.to_record(1 << 30, alone + 200)[1])
    assert restored.value == dead.value and not restored.value_truncated
    assert restored.headers_truncated and restored.headers_size == dead.headers_size
    assert ("lane", b"2") in restored.headers and ("tracestate", None) in restored.headers  # the name stays


@pytest.mark.parametrize("limit", [4_096, 40_000, 1_047_552])
def test_a_100_kb_value_keeps_as_much_as_fits(limit):
    """The value copy is cut to what its base64 fits, not dropped: within 3/4 of the room left."""
    dead = letter(value=bytes(range(256)) * 400)
    record = dead.to_record(1 << 30, limit)
    size = record_size(record) + FRAMING
    restored = DeadLetter.from_record(record[1])
    if uncapped_size(dead) <= limit:
        assert restored == dead
        return
    assert size <= limit and restored.value_truncated and restored.value_size == 102_400
    assert dead.value.startswith(restored.value)
    assert len(restored.value) >= (limit - 1_000) * 3 // 4 - 200  # the envelope's facts take under 1 KB


def test_an_800_kb_header_on_an_8_byte_value_fits_a_1_mb_limit():
    """The case that crash-looped the service: the broker refused the dead letter, on every restart."""
    dead = letter(value=b"not json", headers=(("traceparent", b"x" * 800_000),))
    limit = 1_047_552
    assert uncapped_size(dead) > limit  # base64 makes 800 KB into 1.07 MB
    record = dead.to_record(1 << 30, limit)
    restored = DeadLetter.from_record(record[1])
    assert record_size(record) + FRAMING <= limit
    assert restored.value == b"not json" and restored.headers == (("traceparent", None),)


def test_an_error_text_over_the_limit_keeps_its_first_max_error_chars():
    error = "e" * (MAX_ERROR_CHARS + 2_000)
    dead = letter(error=error)
    restored = DeadLetter.from_record(dead.to_record(1 << 30, uncapped_size(dead) - 1)[1])
    assert restored.error == "e" * MAX_ERROR_CHARS + " ...(truncated)"
    assert restored.value == dead.value  # the error gave the room back: the value stays whole


def test_a_key_longer_than_a_sixteenth_of_the_limit_is_cut_when_the_record_is_over():
    limit = 16_000
    dead = letter(key=b"k" * 3_000, value=b"v" * 20_000)
    key, value, headers = dead.to_record(1 << 30, limit)
    assert key == b"k" * (limit // 16)
    assert DeadLetter.from_record(value).key_truncated
    assert record_size((key, value, headers)) + FRAMING <= limit
    small = letter(key=b"k" * 3_000, value=b"v" * 100)  # over a sixteenth, but the record fits whole
    assert small.to_record(1 << 30, uncapped_size(small))[0] == b"k" * 3_000


@pytest.mark.parametrize("limit", [2_000, 2_500, 4_096])
def test_everything_at_once_fits_the_smallest_limits(limit):
    dead = letter(
        value=b"v" * 60_000, headers=(("a" * 300, b"h" * 20_000),) * 6, key=b"k" * 3_000, error="x" * 6_000
    )
    record = dead.to_record(1 << 30, limit)
    assert record_size(record) + FRAMING <= limit
    restored = DeadLetter.from_record(record[1])
    assert (restored.reason, restored.offset, restored.value_size) == ("invalid_json", 17, 60_000)
