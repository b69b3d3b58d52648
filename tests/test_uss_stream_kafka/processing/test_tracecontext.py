"""W3C Trace Context headers copied onto decisions: valid ones only, within the spec's bounds.

Expected values are written from the W3C Trace Context specification (level 1): ``traceparent`` is
``version "-" trace-id "-" parent-id "-" trace-flags`` in lowercase hex (2, 32, 16, 2 digits: 55
bytes), version ``ff`` and all-zero ids are invalid, a later version may append ``"-" ...``;
``tracestate`` holds at most 32 list members and vendors propagate at most 512 bytes of it.
"""

from __future__ import annotations

import pytest

from uss_stream_kafka.processing.tracecontext import trace_checked, traceparent, tracestate_members

TRACE_ID = b"4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = b"00f067aa0ba902b7"
VALID = b"00-" + TRACE_ID + b"-" + PARENT_ID + b"-01"


def test_the_specs_example_is_55_bytes_and_kept():
    assert len(VALID) == 55
    assert traceparent(VALID) == VALID


@pytest.mark.parametrize(
    "value",
    [
        VALID[:54],  # one short
        VALID + b"0",  # version 00 has exactly 55 bytes
        VALID + b"-x",  # and no more fields
        VALID.upper(),  # lowercase hex only
        b"ff" + VALID[2:],  # version ff is invalid
        b"00-" + b"0" * 32 + b"-" + PARENT_ID + b"-01",  # all-zero trace id
        b"00-" + TRACE_ID + b"-" + b"0" * 16 + b"-01",  # all-zero parent id
        b"00_" + VALID[3:],
        b"0" * 1_000_000,
        b"\xff\xfe\x00",
        b"",
        None,
    ],
)
def test_invalid_traceparents_are_dropped(value):
    assert traceparent(value) is None


def test_a_later_version_is_cut_to_the_55_bytes_every_version_starts_with():
    later = b"01" + VALID[2:]
    assert traceparent(later) == later
    assert traceparent(later + b"-more-fields") == later
    assert traceparent(later + b"xmore") is None  # after the 55 bytes, a later version has "-" or nothing


def test_tracestate_is_bounded_by_32_members_and_512_bytes():
    assert tracestate_members(b",".join([b"k%d=v" % i for i in range(32)])) == 32
    assert tracestate_members(b",".join([b"k%d=v" % i for i in range(33)])) is None
    at_limit = b"k=" + b"v" * 254 + b",j=" + b"w" * 253  # 256 + 1 + 255 = 512 bytes
    assert len(at_limit) == 512 and tracestate_members(at_limit) == 2
    assert tracestate_members(at_limit + b"w") is None
    assert (
        tracestate_members(b"rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE, ,") == 2
    )  # blanks and empty members
    assert tracestate_members(b"tenant@system=1") == 1
    for invalid in (b"Rojo=1", b"k=", b"k=a=b", b"=v", b"k=v\x00", b"k=" + b"v" * 257):
        assert tracestate_members(invalid) is None, invalid


def test_only_the_first_valid_traceparent_goes_and_tracestate_only_with_it():
    other = b"00-" + TRACE_ID + b"-" + b"1" * 16 + b"-00"
    headers = [("TRACEPARENT", b"00-aaaa-01"), ("traceparent", VALID), ("traceparent", other),
               ("tracestate", b"a=1"), ("x-custom", b"c" * 10)]  # fmt: skip
    assert trace_checked(headers) == [("traceparent", VALID), ("tracestate", b"a=1"), ("x-custom", b"c" * 10)]
    assert trace_checked([("tracestate", b"a=1"), ("traceparent", b"zz")]) == []
    assert trace_checked([("ce_traceparent", VALID), ("tracestate", b"a=1")]) == [("ce_traceparent", VALID)]


def test_tracestate_headers_past_the_bounds_together_are_dropped():
    copies = [("traceparent", VALID)] + [("tracestate", b"k=v")] * 2000
    kept = trace_checked(copies)
    assert kept == [("traceparent", VALID)] + [("tracestate", b"k=v")] * 32
    big = b"a=" + b"1" * 148 + b",b=" + b"2" * 148  # 301 bytes: two of them exceed 512 together
    halves = [("traceparent", VALID), ("tracestate", big), ("tracestate", big), ("tracestate", b"c=3")]
    assert trace_checked(halves) == [("traceparent", VALID), ("tracestate", big), ("tracestate", b"c=3")]
