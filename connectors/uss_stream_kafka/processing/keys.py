"""Keyed selection: which key an event belongs to (``--key-from record-key|FIELD``).

With a key, the service runs one learner per key inside each input partition
(:class:`~uss_stream_kafka.processing.keyed.KeyedOutputsProcessor`). The key of an event is

* ``record-key``: its Kafka record key, which must be UTF-8 text (Kafka's partitioner puts every
  record of a key in one partition, so a key's learner sees all of its events);
* ``FIELD``: the top-level field ``FIELD`` of its JSON value, a string or an integer (``42`` and
  ``"42"`` are the same key).

A key is text of 1 to :data:`MAX_KEY_BYTES` UTF-8 bytes. An event without one is a dead letter
``missing_key`` (no record key, or no such field, or ``null``); one whose key is not text
(a record key that is not UTF-8, a field that is a float, boolean, array or object), empty or
longer is a dead letter ``invalid_key``. Either way the event is not decided and no learner sees it.

Examples
--------
>>> by_site = KeySource.parse("site")
>>> by_site.field, by_site.describe()
('site', 'field site')
>>> by_site.of_field({"site": "lyon-2"}), by_site.of_field({"site": 42})
('lyon-2', '42')
>>> by_site.of_field({"device": "a"})
Traceback (most recent call last):
...
uss_stream_kafka.InvalidEvent: missing_key: the event has no field 'site' (--key-from site)
>>> KeySource.parse("record-key").of_record_key(b"sensor-7")
'sensor-7'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uss_stream_kafka.processing.events import InvalidEvent

__all__ = ["MAX_KEY_BYTES", "RECORD_KEY", "KeySource"]

#: ``--key-from record-key``: the Kafka record key.
RECORD_KEY = "record-key"
#: The longest key, in UTF-8 bytes (a device id, a site, a tenant: short text).
MAX_KEY_BYTES = 256


@dataclass(frozen=True)
class KeySource:
    """Where the key of an event comes from: the record key (``field`` is ``None``) or a JSON field."""

    field: str | None = None

    @classmethod
    def parse(cls, spec: str) -> KeySource:
        """``"record-key"`` or a field name (``ValueError`` if empty).

        >>> KeySource.parse("record-key").field is None
        True
        >>> KeySource.parse(" ")
        Traceback (most recent call last):
        ...
        ValueError: --key-from must be record-key or a top-level field of the events, got ' '
        """
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(
                f"--key-from must be {RECORD_KEY} or a top-level field of the events, got {spec!r}"
            )
        if spec in ("id", "outputs"):
            raise ValueError(
                f"--key-from {spec}: "
                + (
                    "an event's id is its own: one learner per event would learn nothing"
                    if spec == "id"
                    else "the stage outputs are not a key"
                )
            )
        return cls(None if spec == RECORD_KEY else spec)

    @property
    def spec(self) -> str:
        """The ``--key-from`` value: ``record-key`` or the field's name."""
        return RECORD_KEY if self.field is None else self.field

    def describe(self) -> str:
        """``"record key"`` or ``"field NAME"`` (for messages)."""
        return "record key" if self.field is None else f"field {self.field}"

    def of_record_key(self, key: bytes | None) -> str:
        """The key of a record whose Kafka key is ``key``; raises :class:`InvalidEvent`.

        >>> source = KeySource()
        >>> source.of_record_key(None)
        Traceback (most recent call last):
        ...
        uss_stream_kafka.InvalidEvent: missing_key: the record has no key (--key-from record-key)
        >>> source.of_record_key(b"\\xff\\xfe")
        Traceback (most recent call last):
        ...
        uss_stream_kafka.InvalidEvent: invalid_key: the record key is not UTF-8 text: b'\\xff\\xfe' ...
        """
        if key is None:
            raise InvalidEvent("missing_key", f"the record has no key (--key-from {RECORD_KEY})")
        if len(key) > MAX_KEY_BYTES or not key:
            raise InvalidEvent("invalid_key", f"the record key {_size(len(key))} (--key-from {RECORD_KEY})")
        try:
            return key.decode()
        except UnicodeDecodeError:
            shown = key[:32]
            raise InvalidEvent(
                "invalid_key", f"the record key is not UTF-8 text: {shown!r} (--key-from {RECORD_KEY})"
            ) from None

    def of_record_keys(self, keys: Any) -> list[str] | None:
        """The keys of records whose Kafka keys are ``keys`` in one pass, or ``None`` if
        :meth:`of_record_key` would refuse one of them (it then says why, key by key).

        >>> source = KeySource()
        >>> source.of_record_keys([b"site-1", b"site-2"])
        ['site-1', 'site-2']
        >>> source.of_record_keys([b"site-1", None]) is None, source.of_record_keys([b""]) is None
        (True, True)
        >>> source.of_record_keys([b"x" * (MAX_KEY_BYTES + 1)]) is None
        True
        """
        try:
            decoded = [key.decode() for key in keys]
        except (AttributeError, UnicodeDecodeError):  # None (no key), or not UTF-8
            return None
        if decoded and (min(map(len, keys)) == 0 or max(map(len, keys)) > MAX_KEY_BYTES):
            return None
        return decoded

    def of_field(self, document: Any) -> str:
        """The key of a decoded JSON event (an object); raises :class:`InvalidEvent`.

        >>> source = KeySource("site")
        >>> source.of_field({"site": True})
        Traceback (most recent call last):
        ...
        uss_stream_kafka.InvalidEvent: invalid_key: field 'site' must be a string or an integer, got ...
        >>> source.of_field({"site": "x" * 300})
        Traceback (most recent call last):
        ...
        uss_stream_kafka.InvalidEvent: invalid_key: field 'site' has 300 bytes, more than 256 ...
        """
        value = document.get(self.field) if type(document) is dict else None
        flag = f"(--key-from {self.field})"
        if value is None:
            raise InvalidEvent("missing_key", f"the event has no field {self.field!r} {flag}")
        kind = type(value)
        if kind is int:
            value = str(value)
        elif kind is not str:
            raise InvalidEvent(
                "invalid_key",
                f"field {self.field!r} must be a string or an integer, got {_kind(value)} {flag}",
            )
        try:
            size = len(value.encode())
        except UnicodeEncodeError:  # a lone surrogate escaped in the JSON text
            raise InvalidEvent(
                "invalid_key", f"field {self.field!r} is not valid Unicode text {flag}"
            ) from None
        if not 0 < size <= MAX_KEY_BYTES:
            self._too_long(size, flag)
        return value

    def _too_long(self, size: int, flag: str) -> str:
        raise InvalidEvent("invalid_key", f"field {self.field!r} {_size(size)} {flag}")


def _size(size: int) -> str:
    return "is empty" if size == 0 else f"has {size} bytes, more than {MAX_KEY_BYTES}"


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", bool: "boolean", float: "number"}.get(
        type(value), type(value).__name__
    )
