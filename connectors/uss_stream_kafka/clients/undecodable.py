"""Record batches the consumer cannot decode: find the batch behind the error, so it can be skipped.

kafka-python decompresses a fetched record batch (gzip, snappy, lz4, zstd) when the records are
drained in ``poll()``. If that fails (a codec library missing, a corrupt or unknown payload, a CRC
mismatch), ``poll()`` raises without naming the partition, leaves the position at the batch, and
the next ``poll()`` fails again (kafka-python 3.0.12 even spins on the half-consumed fetch): one
bad batch would stop the service for good. Its records cannot be seen, so they cannot be
dead-lettered one by one; what can be seen is the batch itself, in the frames of the error's
traceback (the fetcher's ``_unpack_records`` generator holds the partition and the batch, whose
header, read without decompressing, gives its offsets). The service dead-letters the batch (raw
bytes, reason, offsets) and seeks past it.

The traceback is read, not trusted: if it holds no such frame (another kafka-python version, or
another error), :func:`undecodable_batch` returns ``None`` and the error stays fatal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["UndecodableBatch", "undecodable_batch"]

_FETCHER_FRAME = "_unpack_records"


@dataclass(frozen=True)
class UndecodableBatch:
    """A record batch that could not be decoded.

    Parameters
    ----------
    tp
        The kafka-python ``TopicPartition`` it was fetched from.
    base_offset
        Offset of its first record.
    next_offset
        Offset after its last record: where consumption resumes.
    compression
        Codec id of the batch header (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    raw
        The batch as fetched (header and compressed records), for a later decode by hand.
    error
        ``"<ExceptionType>: <message>"`` of the failure.

    Examples
    --------
    >>> batch = UndecodableBatch(tp=("events", 0), base_offset=100, next_offset=600, compression=4,
    ...                          raw=b"...", error="UnsupportedCodecError: no zstd")
    >>> batch.records, batch.codec
    (500, 'zstd')
    >>> batch.describe(first=100)
    'record batch at offsets 100..599 (500 records, zstd) cannot be decoded: UnsupportedCodecError: no zstd'

    """

    tp: Any
    base_offset: int
    next_offset: int
    compression: int
    raw: bytes
    error: str

    @property
    def records(self) -> int:
        """How many offsets the batch spans."""
        return self.next_offset - self.base_offset

    @property
    def codec(self) -> str:
        """Name of the batch's compression codec."""
        names = ("none", "gzip", "snappy", "lz4", "zstd")
        return names[self.compression] if 0 <= self.compression < len(names) else f"codec {self.compression}"

    def describe(self, first: int) -> str:
        """One line: the offsets skipped from ``first`` on, the codec and the error."""
        return (
            f"record batch at offsets {first}..{self.next_offset - 1} ({self.next_offset - first} records, "
            f"{self.codec}) cannot be decoded: {self.error}"
        )


def undecodable_batch(error: BaseException) -> UndecodableBatch | None:
    """The record batch whose decoding raised ``error`` in a consumer's ``poll()``, if it can be found.

    Examples
    --------
    An error that did not come from decoding a fetched batch:

    >>> undecodable_batch(ValueError("no")) is None
    True

    """
    traceback = error.__traceback__
    found = None
    while traceback is not None:  # the innermost fetcher frame is the one that failed
        frame = traceback.tb_frame
        if frame.f_code.co_name == _FETCHER_FRAME:
            found = frame.f_locals
        traceback = traceback.tb_next
    if found is None:
        return None
    tp, batch = found.get("tp"), found.get("batch")
    try:
        base_offset, next_offset = int(batch.base_offset), int(batch.next_offset)
        compression = int(batch.compression_type)
        raw = bytes(batch._buffer)
    except (AttributeError, TypeError, ValueError):  # a legacy (v0/v1) batch or another layout
        return None
    if tp is None or next_offset <= base_offset:
        return None
    return UndecodableBatch(
        tp=tp,
        base_offset=base_offset,
        next_offset=next_offset,
        compression=compression,
        raw=raw,
        error=f"{type(error).__name__}: {error}",
    )
