"""Dead-letter records: the input record that could not be decided, why, and where it came from.

Format (chosen so that a dead letter is self-describing JSON and any value, even invalid UTF-8,
survives): the record **value** is a JSON envelope, the original bytes base64-encoded::

    {"format": "uss-stream/dead-letter/v1", "reason": "invalid_json",
     "error": "value is not UTF-8 JSON: Expecting value: line 1 column 1 (char 0)",
     "source": {"topic": "events", "partition": 0, "offset": 17, "timestamp": 1700000000000},
     "key_b64": null, "value_b64": "bm90IGpzb24=", "value_size": 8, "value_truncated": false,
     "headers": [["trace-id", "YWJj"]]}

The record **key** is the original key (so the dead-letter topic is keyed like the input), and the
**headers** repeat the routing facts so that a consumer can filter without parsing the value:
``uss.reason``, ``uss.source.topic``, ``uss.source.partition``, ``uss.source.offset``.

A copy of the original value larger than ``max_value_bytes`` is truncated to that size
(``value_truncated`` is then true and ``value_size`` keeps the original size): an oversize record
must not make its dead letter oversize too.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from connectors.kafka.events import REASONS

__all__ = ["DEAD_LETTER_FORMAT", "DeadLetter"]

DEAD_LETTER_FORMAT = "uss-stream/dead-letter/v1"


@dataclass(frozen=True)
class DeadLetter:
    """One rejected input record.

    Examples
    --------
    >>> letter = DeadLetter(reason="invalid_json", error="not JSON", topic="events", partition=0,
    ...                     offset=17, timestamp=1700000000000, key=None, value=b"not json")
    >>> key, value, headers = letter.to_record(max_value_bytes=1024)
    >>> headers[0]
    ('uss.reason', b'invalid_json')
    >>> DeadLetter.from_record(value) == letter
    True
    >>> _, value, _ = letter.to_record(max_value_bytes=3)
    >>> restored = DeadLetter.from_record(value)
    >>> restored.value, restored.value_size, restored.value_truncated
    (b'not', 8, True)

    """

    reason: str
    error: str
    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]] = field(default_factory=tuple)
    value_size: int | None = None
    value_truncated: bool = False

    @classmethod
    def for_record(cls, record: Any, reason: str, error: str) -> DeadLetter:
        """The dead letter of a consumed record (a kafka-python ``ConsumerRecord``)."""
        return cls(
            reason=reason,
            error=error,
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            headers=tuple(record.headers or ()),
        )

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(
                f"unknown dead-letter reason {self.reason!r}; expected one of {', '.join(REASONS)}"
            )
        if self.value_size is None:
            object.__setattr__(self, "value_size", None if self.value is None else len(self.value))

    def to_record(self, max_value_bytes: int) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
        """``(key, value, headers)`` of the dead-letter record."""
        value = self.value
        truncated = self.value_truncated
        if value is not None and len(value) > max_value_bytes:
            value = value[:max_value_bytes]
            truncated = True
        document = {
            "format": DEAD_LETTER_FORMAT,
            "reason": self.reason,
            "error": self.error,
            "source": {
                "topic": self.topic,
                "partition": self.partition,
                "offset": self.offset,
                "timestamp": self.timestamp,
            },
            "key_b64": _b64(self.key),
            "value_b64": _b64(value),
            "value_size": self.value_size,
            "value_truncated": truncated,
            "headers": [[name, _b64(raw)] for name, raw in self.headers],
        }
        headers = [
            ("uss.reason", self.reason.encode()),
            ("uss.source.topic", self.topic.encode()),
            ("uss.source.partition", b"%d" % self.partition),
            ("uss.source.offset", b"%d" % self.offset),
        ]
        return self.key, json.dumps(document, separators=(",", ":")).encode(), headers

    @classmethod
    def from_record(cls, value: bytes) -> DeadLetter:
        """Read a dead-letter record's value back (the original bytes decoded from base64)."""
        document = json.loads(value)
        if not isinstance(document, dict) or document.get("format") != DEAD_LETTER_FORMAT:
            raise ValueError(f"not a {DEAD_LETTER_FORMAT} record")
        source = document["source"]
        return cls(
            reason=document["reason"],
            error=document["error"],
            topic=source["topic"],
            partition=source["partition"],
            offset=source["offset"],
            timestamp=source["timestamp"],
            key=_unb64(document["key_b64"]),
            value=_unb64(document["value_b64"]),
            headers=tuple((name, _unb64(raw)) for name, raw in document["headers"]),
            value_size=document["value_size"],
            value_truncated=document["value_truncated"],
        )


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
