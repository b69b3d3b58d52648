"""How large a record the service may produce to a topic: the producer's and the broker's limits.

A dead letter carries a copy of the rejected record; if it were larger than the producer's
``max_request_size`` or the topic's ``max.message.bytes`` the broker would refuse it, the offsets
would never be committed, and every restart would stop on the same record. The service therefore
caps its dead letters at :func:`record_limit`, and dead-letters (``oversize``) an input whose decision
would not fit the output topic's limit. A topic whose limit is below :data:`MIN_RECORD_BYTES` (a
dead letter's own facts could not fit) is refused at start by :func:`check_record_limits`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BROKER_DEFAULT_MAX_MESSAGE_BYTES",
    "MIN_RECORD_BYTES",
    "PRODUCER_DEFAULT_MAX_REQUEST_SIZE",
    "RecordLimits",
    "STATE_ENVELOPE_BYTES",
    "check_record_limits",
    "headers_bytes",
    "record_limit",
]

log = logging.getLogger("uss_stream_kafka")

#: The broker's default ``message.max.bytes`` (used when the topic's setting cannot be read).
BROKER_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
#: kafka-python's default ``max_request_size``.
PRODUCER_DEFAULT_MAX_REQUEST_SIZE = 1_048_576
#: Bytes kept free for the record batch's header and the producer's size estimate.
MARGIN = 1024
#: The smallest record limit (after :data:`MARGIN`) the service works with on a topic it writes: a
#: dead letter reduced to its facts (source topic, offset, reason, the error's first 200 characters)
#: takes up to about 2 KiB, and a decision or checkpoint of ordinary identifiers far less.
MIN_RECORD_BYTES = 4096
#: Room a checkpoint's envelope (key, offsets, processor) takes beside the learner's state.
STATE_ENVELOPE_BYTES = 2048
#: The most bytes a record header takes besides its name and value: the varints of their lengths.
HEADER_FRAMING = 8


def headers_bytes(headers: Sequence[tuple[str, bytes | None]] | None) -> int:
    """The bytes ``headers`` add to a record: names, values and :data:`HEADER_FRAMING` each.

    >>> headers_bytes([("traceparent", b"0" * 55), ("tenant", None)]), headers_bytes(None)
    (88, 0)
    """
    return sum(len(name.encode()) + len(value or b"") + HEADER_FRAMING for name, value in headers or ())


@dataclass(frozen=True)
class RecordLimits:
    """The largest record (see :func:`record_limit`) each topic the service writes accepts."""

    output: int
    dead_letter: int
    state: int


def check_record_limits(limits: RecordLimits, output: str, dead_letter: str, state: str) -> None:
    """Raise ``ValueError`` naming the first topic whose record limit is below :data:`MIN_RECORD_BYTES`.

    Examples
    --------
    >>> check_record_limits(RecordLimits(1_047_552, 1_047_552, 1_047_552), "out", "dlq", "state")
    >>> try:
    ...     check_record_limits(RecordLimits(1_047_552, 976, 1_047_552), "out", "dlq", "state")
    ... except ValueError as error:
    ...     print(str(error)[:60])
    dead-letter topic 'dlq' accepts records of at most 976 bytes
    """
    for role, topic, limit in (
        ("output", output, limits.output),
        ("dead-letter", dead_letter, limits.dead_letter),
        ("state", state, limits.state),
    ):
        if limit < MIN_RECORD_BYTES:
            raise ValueError(
                f"{role} topic {topic!r} accepts records of at most {limit} bytes (max.message.bytes "
                f"and the producer's max_request_size, less {MARGIN}): the service needs "
                f"{MIN_RECORD_BYTES}; raise the topic's max.message.bytes to at least "
                f"{MIN_RECORD_BYTES + MARGIN}"
            )


def record_limit(admin: Any, topic: str, producer_settings: Mapping[str, Any]) -> int:
    """The largest record (key, value and headers) the service may send to ``topic``.

    ``min(producer max_request_size, topic max.message.bytes) - MARGIN``; the topic's setting is
    read with ``admin`` (the client seam's ``Admin``, or ``None``), the broker default if it cannot be.
    """
    producer = int(producer_settings.get("max_request_size", PRODUCER_DEFAULT_MAX_REQUEST_SIZE))
    return min(producer, topic_max_message_bytes(admin, topic)) - MARGIN


def topic_max_message_bytes(admin: Any, topic: str) -> int:
    """The topic's ``max.message.bytes`` (the broker default if it cannot be read)."""
    if admin is not None:
        try:
            return int(admin.topic_config(topic)["max.message.bytes"])
        except Exception as error:  # e.g. DescribeConfigs not authorised: assume the default
            log.warning(
                "could not read max.message.bytes of topic %r (%s): assuming the broker default %d",
                topic,
                error,
                BROKER_DEFAULT_MAX_MESSAGE_BYTES,
            )
    return BROKER_DEFAULT_MAX_MESSAGE_BYTES
