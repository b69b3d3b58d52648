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

With ``max_record_bytes`` (the producer's and the broker's limit, less a margin) the **whole**
record is capped: key, envelope and headers together (a header counted as in
``clients.limits.headers_bytes``), with 128 bytes kept for the record's framing. A record that
fits is sent whole; otherwise what does not fit is cut, in this order of sacrifice: the original
headers (``headers_truncated``, ``headers_size`` keeps their original bytes), then the value copy,
the error text (at most :data:`MAX_ERROR_CHARS` characters) and a key longer than a sixteenth of
the limit (``key_truncated``). A dead letter can then never be refused by the broker, which would
otherwise stop the service on the record for good.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from uss_stream_kafka.clients.limits import headers_bytes
from uss_stream_kafka.processing.events import REASONS

__all__ = ["DEAD_LETTER_FORMAT", "MAX_ERROR_CHARS", "DeadLetter"]

DEAD_LETTER_FORMAT = "uss-stream/dead-letter/v1"

#: Longest error text a capped dead letter keeps.
MAX_ERROR_CHARS = 4096

#: Bytes kept free for the record's framing (lengths, timestamps, attributes) under the cap.
_FRAMING = 128


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

    A 100 kB header and a 100 kB value under a 40 kB record limit:

    >>> noisy = DeadLetter(reason="invalid_json", error="not JSON", topic="events", partition=0,
    ...                    offset=18, timestamp=None, key=b"k", value=b"v" * 100_000,
    ...                    headers=(("trace", b"t" * 100_000), ("lane", b"2")))
    >>> key, value, headers = noisy.to_record(max_value_bytes=1 << 20, max_record_bytes=40_000)
    >>> len(key) + len(value) + sum(len(n) + len(v) for n, v in headers) <= 40_000
    True
    >>> restored = DeadLetter.from_record(value)
    >>> restored.headers_truncated, restored.headers_size, restored.value_truncated
    (True, 100010, True)
    >>> restored.value == b"v" * len(restored.value), len(restored.value) > 25_000
    (True, True)

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
    headers_size: int | None = None
    headers_truncated: bool = False
    key_truncated: bool = False

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
        if self.headers_size is None:
            size = sum(len(name.encode()) + len(raw or b"") for name, raw in self.headers)
            object.__setattr__(self, "headers_size", size)

    def to_record(
        self, max_value_bytes: int, max_record_bytes: int | None = None
    ) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
        """``(key, value, headers)`` of the dead-letter record.

        The copy of the original value keeps at most ``max_value_bytes``; with
        ``max_record_bytes`` the whole record (key, value and headers) fits in that many bytes.
        """
        value = self.value
        truncated = self.value_truncated
        if value is not None and len(value) > max_value_bytes:
            value = value[:max_value_bytes]
            truncated = True
        routing = [
            ("uss.reason", self.reason.encode()),
            ("uss.source.topic", self.topic.encode()),
            ("uss.source.partition", b"%d" % self.partition),
            ("uss.source.offset", b"%d" % self.offset),
        ]
        if max_record_bytes is None:
            document = self._document(self.key, value, truncated, self.headers, self.error)
            return self.key, _dumps(document), routing
        return self._capped(value, truncated, routing, max_record_bytes)

    def _capped(
        self, value: bytes | None, truncated: bool, routing: list[tuple[str, bytes]], limit: int
    ) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
        """The record within ``limit`` bytes: cut headers, then value, error and key (see the module)."""
        fixed = _FRAMING + headers_bytes(routing)
        document = self._document(self.key, value, truncated, self.headers, self.error, self.key_truncated)
        whole = _dumps(document)
        if fixed + len(self.key or b"") + len(whole) <= limit:  # it fits: nothing is cut
            return self.key, whole, routing
        key, key_truncated = self.key, self.key_truncated
        if key is not None and len(key) > limit // 16:
            key, key_truncated = key[: limit // 16], True
        error = self.error
        if len(error) > MAX_ERROR_CHARS:
            error = error[:MAX_ERROR_CHARS] + " ...(truncated)"
        fixed += len(key or b"")
        bare = self._document(key, None, truncated, (), error, key_truncated, True)
        room = limit - fixed - len(_dumps(bare)) - 8  # 8: the quotes of value_b64 and slack
        # The headers' names are kept before the value (at most an eighth of the room).
        names = min(sum(len(json.dumps([name, None])) + 1 for name, _ in self.headers), room // 8)
        if value is not None:
            keep = min(len(value), max(0, room - names - 2) // 4 * 3)
            if keep < len(value):
                value, truncated = value[:keep], True
            room -= len(_b64(value) or "") + 2
        headers: list[tuple[str, bytes | None]] = []
        for name, raw in self.headers:
            cost = len(json.dumps([name, _b64(raw)])) + 1
            if cost <= room:
                headers.append((name, raw))
                room -= cost
            elif len(json.dumps([name, None])) + 1 <= room:
                headers.append((name, None))  # the name says which header was cut
                room -= len(json.dumps([name, None])) + 1
        headers_truncated = self.headers_truncated or headers != list(self.headers)
        document = self._document(key, value, truncated, headers, error, key_truncated, headers_truncated)
        encoded = _dumps(document)
        if fixed + len(encoded) > limit:  # only if the estimate above was wrong: keep the facts
            document = self._document(key, None, True, (), error[:200], key_truncated, True)
            encoded = _dumps(document)
        return key, encoded, routing

    def _document(
        self,
        key: bytes | None,
        value: bytes | None,
        value_truncated: bool,
        headers: Sequence[tuple[str, bytes | None]],
        error: str,
        key_truncated: bool = False,
        headers_truncated: bool = False,
    ) -> dict[str, Any]:
        document: dict[str, Any] = {
            "format": DEAD_LETTER_FORMAT,
            "reason": self.reason,
            "error": error,
            "source": {
                "topic": self.topic,
                "partition": self.partition,
                "offset": self.offset,
                "timestamp": self.timestamp,
            },
            "key_b64": _b64(key),
            "value_b64": _b64(value),
            "value_size": self.value_size,
            "value_truncated": value_truncated,
            "headers": [[name, _b64(raw)] for name, raw in headers],
        }
        if headers_truncated or self.headers_truncated:
            document["headers_size"] = self.headers_size
            document["headers_truncated"] = True
        if key_truncated:
            document["key_truncated"] = True
        return document

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
            headers_size=document.get("headers_size"),
            headers_truncated=document.get("headers_truncated", False),
            key_truncated=document.get("key_truncated", False),
        )


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
